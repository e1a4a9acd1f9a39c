"""The failure section: who held the memory when a capture ended in an exception (issue 39).

Built once here from a profile's failures and its breakdown at each failure's
moment (``analysis.failure.holders_at``); the reports, the terminal, the gate
and the batch runner render it. Its tables are whole, largest first: a
renderer cuts them and says how many rows it left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from traceparse.analysis.failure import Failure, holders_at

__all__ = ["FailureSection", "FailureSource", "failure_sections"]

# The groupings a failure's holders are listed by, in the order renderers show them.
BY = ("layer", "op")


@dataclass(frozen=True)
class FailureSection:
    """One failed host: the failure and who held the bytes then, by layer and by op
    (columns ``name``, ``bytes``, ``share``; every row, largest first)."""

    failure: Failure
    by_layer: pd.DataFrame
    by_op: pd.DataFrame

    def holders(self) -> list[tuple[str, int]]:
        """(name, bytes) of every layer holding bytes at the failure, largest first."""
        return [
            (str(n), int(b))
            for n, b in zip(self.by_layer["name"], self.by_layer["bytes"], strict=True)
        ]

    def tables(self) -> tuple[tuple[str, pd.DataFrame], ...]:
        """(grouping, table) in the order renderers show them (``BY``)."""
        return (("layer", self.by_layer), ("op", self.by_op))


class FailureSource(Protocol):
    """What the section is built from (``Profile`` has it)."""

    def failures(self) -> Sequence[Failure]: ...
    def breakdown_at(self, time_ps: int | None = None, host: str | None = None) -> pd.DataFrame: ...


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"name": [], "bytes": [], "share": []})


def failure_sections(source: FailureSource | Any) -> list[FailureSection]:
    """One section per failed host of ``source`` (a ``Profile``); none for a healthy
    capture, or for a stand-in without ``failures``."""
    found = getattr(source, "failures", None)
    out = []
    for f in (found() if callable(found) else found) or []:
        if f.time_ps is None:  # not placed on the timeline: no one to name
            out.append(FailureSection(f, _empty(), _empty()))
            continue
        rows = source.breakdown_at(f.time_ps, f.host)
        out.append(FailureSection(f, *(holders_at(rows, f, by) for by in BY)))
    return out
