"""XLA parts of ``Profile``: programs, buffers, links, slabs at the peak.

Kept apart from ``core/profile.py`` so that a capture without programs pays
for nothing: programs are parsed only when a table that needs them is built.
"""

from __future__ import annotations

from functools import cached_property

import pandas as pd

from traceparse.analysis.rollups import scope_of
from traceparse.analysis.xla import peak_buffers_table
from traceparse.analysis.xla_live import covered_bytes, expand_live, live_deltas, slab_rows
from traceparse.decode.trace import MemoryTrace
from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla import buffers_table, programs_table
from traceparse.tables.xla_link import Links, link_allocations

LINK_COLUMNS = ["xla_program", "xla_allocation_index"]


class XlaParts:
    """The XLA tables of one run's traces."""

    def __init__(self, traces: list[MemoryTrace]) -> None:
        self.traces = traces
        self.links: Links | None = None

    @property
    def present(self) -> bool:
        """Whether any trace kept a metadata plane (no parsing)."""
        return any(t.xla is not None for t in self.traces)

    @cached_property
    def programs(self) -> list[tuple[str, XlaProgram]]:
        return [(t.host, p) for t in self.traces if t.xla is not None for p in t.xla.programs()]

    @property
    def notes(self) -> list[str]:
        found = [n for t in self.traces if t.xla is not None for n in t.xla.notes]
        return found + (self.links.notes if self.links is not None else [])

    def link(self, allocations: pd.DataFrame) -> pd.DataFrame:
        """``allocations`` with ``xla_program`` and ``xla_allocation_index``."""
        if self.present and self.programs:
            runs = {t.host: t.function_runs for t in self.traces}
            self.links = link_allocations(allocations, self.programs, runs)
            program, index = self.links.columns(allocations.index)
        else:
            program = pd.Series(pd.NA, index=allocations.index, dtype=object).astype("category")
            index = pd.Series(pd.NA, index=allocations.index, dtype="Int64")
        return allocations.assign(xla_program=program, xla_allocation_index=index)

    def programs_table(self) -> pd.DataFrame:
        runs = dict(self.links.runs) if self.links is not None else {}
        return programs_table(self.programs if self.present else [], runs)

    def buffers_table(self) -> pd.DataFrame:
        return buffers_table(self.programs if self.present else [])

    def slabs(self, live: pd.DataFrame) -> pd.DataFrame:
        """Per linked temp slab live at a peak: its buffers at the program's peak."""
        if not self.present or live.empty or live["xla_allocation_index"].isna().all():
            return slab_rows(live, pd.DataFrame())
        linked = live[live["xla_allocation_index"].notna()]
        keys = set(
            zip(
                linked["host"].astype(object),
                linked["xla_program"].astype(object),
                linked["xla_allocation_index"].astype(int),
                strict=True,
            )
        )
        return slab_rows(live, peak_buffers_table(self.programs, keys))

    @staticmethod
    def covered(slabs: pd.DataFrame) -> pd.Series:
        return covered_bytes(slabs)

    @staticmethod
    def expand(live: pd.DataFrame, slabs: pd.DataFrame, buffers: pd.DataFrame) -> pd.DataFrame:
        return expand_live(live, slabs, buffers)


def with_live_deltas(
    table: pd.DataFrame, live: pd.DataFrame, expanded: pd.DataFrame, depth: int | None = None
) -> pd.DataFrame:
    """A roll-up (``ops``, or ``scopes`` at ``depth``) whose live-at-peak columns
    count the HLO buffers of linked slabs under their TF ops instead of the slab."""
    delta = live_deltas(live, expanded)
    if delta.empty:
        return table
    key = "op" if depth is None else "scope"
    if depth is not None:
        delta["scope"] = [
            scope_of(str(op), depth) if isinstance(op, str) else None for op in delta["op"]
        ]
        delta = delta.groupby(["host", "allocator", "scope"], dropna=False, as_index=False)[
            ["live", "live_bytes"]
        ].sum()
    dtypes = table.dtypes
    work = table.astype({c: object for c, d in dtypes.items() if str(d) == "category"})
    merged = work.merge(
        delta[["host", "allocator", key, "live", "live_bytes"]],
        on=["host", "allocator", key],
        how="outer",
    )
    new = merged["count"].isna()
    for column in dtypes.index:
        if column in (
            "count",
            "unestimated",
            "live_at_peak",
            "live_at_peak_bytes",
            "live_at_end",
            "live_at_end_bytes",
            "ops",
        ):
            merged.loc[new, column] = 0
    if depth is None and "op_type" in merged:
        types = expanded.drop_duplicates("op").set_index(
            expanded["op"].astype(object).drop_duplicates()
        )
        fill = merged.loc[new, "op"].map(types["op_type"].astype(object)) if len(types) else None
        if fill is not None:
            merged.loc[new, "op_type"] = fill
    merged["live_at_peak"] = merged["live_at_peak"] + merged["live"].fillna(0)
    merged["live_at_peak_bytes"] = merged["live_at_peak_bytes"] + merged["live_bytes"].fillna(0)
    merged = merged.drop(columns=["live", "live_bytes"])
    merged = merged.astype(
        {c: str(d) if str(d) != "category" else "category" for c, d in dtypes.items()}
    )
    merged = merged.sort_values(
        ["host", "allocator", "live_at_peak_bytes", "allocated_bytes"],
        ascending=[True, True, False, False],
        kind="stable",
        na_position="last",
    )
    return merged.reset_index(drop=True)
