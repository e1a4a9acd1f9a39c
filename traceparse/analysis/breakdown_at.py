"""The breakdown at another instant than the peak: any time (``breakdown_at``),
one of the repeated peak instants (``tables_at``), and what every repeat of a
peak holds (``peak_repeats``).

``breakdown_table`` takes the state at any instant as it takes the peak
(``instant.instant_table``), so these open the same rows at another event,
summing to the allocator's counter then. Moved from ``core/profile.py`` (issue
46): ``Profile.breakdown_at``, ``at_instant`` and the summary's repeated peaks
call them and cache the answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.breakdown import BREAKDOWN, breakdown_table
from traceparse.analysis.instant import instant_table
from traceparse.analysis.naming import KnownNames, VariableMatch
from traceparse.analysis.peak import LIVE_AT_PEAK, PEAK, live_at_peak_table
from traceparse.analysis.peak_repeats import MOST_INSTANTS, NEAR, chosen_instant, held_at_every
from traceparse.errors import UsageError
from traceparse.tables.contracts import conform

__all__ = ["Holders", "breakdown_at", "peak_repeats", "tables_at"]

# (time_ps, host) -> the breakdown then: a Profile's cached ``breakdown_at``.
BreakdownAt = Callable[[int, str], pd.DataFrame]


@dataclass(frozen=True)
class Holders:
    """What names the holders of a breakdown besides the instant's live rows
    (``breakdown_table``'s arguments after the slabs)."""

    known: KnownNames
    shapes: dict[str, str]
    variables: pd.DataFrame | None
    parameters: pd.DataFrame | None
    matched: VariableMatch | None

    def table(self, peak: pd.DataFrame, live: pd.DataFrame, slabs: pd.DataFrame) -> pd.DataFrame:
        """``breakdown_table`` of ``peak``'s instants."""
        return breakdown_table(
            peak,
            live,
            slabs,
            self.known,
            self.shapes,
            self.variables,
            self.parameters,
            self.matched,
        )


def breakdown_at(
    timeline: pd.DataFrame,
    allocations: pd.DataFrame,
    ends: np.ndarray,
    time_ps: int,
    host: str | None,
    slabs: Callable[[pd.DataFrame], pd.DataFrame],
    holders: Holders,
    categories: dict[str, pd.CategoricalDtype],
) -> pd.DataFrame:
    """Per allocator (of ``host``, or all) the rows of what held the bytes just
    after its latest event at or before ``time_ps``; ``slabs`` gives the linked
    XLA slabs' rows of the allocations live then, ``categories`` the profile's
    hosts and allocators."""
    instant = conform(instant_table(timeline, time_ps, host), PEAK, categories)
    live = conform(live_at_peak_table(allocations, instant, ends), LIVE_AT_PEAK, categories)
    return conform(holders.table(instant, live, slabs(live)), BREAKDOWN, categories)


def tables_at(
    instants: pd.DataFrame,
    at: str | int,
    timeline: pd.DataFrame,
    opened: BreakdownAt,
    categories: dict[str, pd.CategoricalDtype],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``peak`` and ``breakdown`` at the repeated peak instant ``at`` (``"first"``,
    ``"last"`` or a step number; ``peak_repeats.chosen_instant``) of each allocator
    that has one. A usage error when no allocator has one."""
    chosen = chosen_instant(instants, at)
    if chosen.empty:
        steps = sorted({int(s) for s in instants["step"].dropna()})
        raise UsageError(
            f"no peak instant in step {at}; the peak is reached in steps "
            f"{', '.join(map(str, steps)) or 'none (no marked steps)'}"
        )
    peaks, frames = [], []
    for row in chosen.itertuples(index=False):
        instant = instant_table(timeline, int(row.time_ps), str(row.host))
        mine = (instant["allocator"].astype(object) == row.allocator).to_numpy(dtype=bool)
        peaks.append(instant[mine])
        rows = opened(int(row.time_ps), str(row.host))
        frames.append(rows[(rows["allocator"].astype(object) == row.allocator).to_numpy()])
    peak = conform(pd.concat(peaks, ignore_index=True), PEAK, categories)
    return peak, conform(pd.concat(frames, ignore_index=True), BREAKDOWN, categories)


def peak_repeats(
    instants: pd.DataFrame, opened: BreakdownAt
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (host, allocator) whose peak is reached at several ``instants``
    (``peak_repeats.peak_instants``): the instants' steps and bytes, and the
    layers and ops holding memory at every one of the ``MOST_INSTANTS`` highest
    (``held_at_every``), for the summary."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (host, allocator), mine in instants.groupby(["host", "allocator"], observed=True):
        if len(mine) < 2:
            continue
        highest = mine.sort_values("in_use_bytes", ascending=False, kind="stable")
        top = highest.head(MOST_INSTANTS)
        frames = []
        for time_ps in top["time_ps"].tolist():
            rows = opened(int(time_ps), str(host))
            frames.append(rows[(rows["allocator"] == allocator).to_numpy(dtype=bool)])
        out[(str(host), str(allocator))] = {
            "instants": len(mine),
            "opened": len(top),
            "near": NEAR,
            "steps": sorted({int(s) for s in mine["step"].dropna()}),
            "low_bytes": int(mine["in_use_bytes"].min()),
            "high_bytes": int(mine["in_use_bytes"].max()),
            "layers": held_at_every(frames, "layer"),
            "ops": held_at_every(frames, "op"),
        }
    return out
