"""The breakdown at another instant than the peak: any time (``live_at`` then
``Holders.table``), one of the repeated peak instants (``tables_at``), and what
every repeat of a peak holds (``peak_repeats``).

``breakdown_table`` takes the state at any instant as it takes the peak
(``instant.instant_table``), so these open the same rows at another event,
summing to the allocator's counter then. Moved from ``core/profile.py`` (issue
46). Nothing here calls back into a profile: ``chosen_instants`` and
``repeat_instants`` say which instants to open, ``Profile.breakdown_at`` opens
(and caches) each, and ``tables_at`` / ``peak_repeats`` take the opened rows.
"""

from __future__ import annotations

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

__all__ = [
    "Holders",
    "chosen_instants",
    "live_at",
    "peak_repeats",
    "repeat_instants",
    "tables_at",
]

# (time_ps, host) of an instant to open, and the breakdown opened there.
Instant = tuple[int, str]
Opened = dict[Instant, pd.DataFrame]


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


def live_at(
    timeline: pd.DataFrame,
    allocations: pd.DataFrame,
    ends: np.ndarray,
    time_ps: int,
    host: str | None,
    categories: dict[str, pd.CategoricalDtype],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per allocator (of ``host``, or all) its state just after its latest event at
    or before ``time_ps`` (``peak``'s columns) and the allocations live then
    (``live_at_peak``'s), with the profile's hosts and allocators (``categories``):
    what ``Holders.table`` takes, with the linked slabs of those allocations."""
    instant = conform(instant_table(timeline, time_ps, host), PEAK, categories)
    live = conform(live_at_peak_table(allocations, instant, ends), LIVE_AT_PEAK, categories)
    return instant, live


def chosen_instants(instants: pd.DataFrame, at: str | int) -> pd.DataFrame:
    """The repeated peak instant ``at`` (``"first"``, ``"last"`` or a step number;
    ``peak_repeats.chosen_instant``) of each allocator that has one. A usage error
    when no allocator has one."""
    chosen = chosen_instant(instants, at)
    if chosen.empty:
        steps = sorted({int(s) for s in instants["step"].dropna()})
        raise UsageError(
            f"no peak instant in step {at}; the peak is reached in steps "
            f"{', '.join(map(str, steps)) or 'none (no marked steps)'}"
        )
    return chosen


def tables_at(
    chosen: pd.DataFrame,
    timeline: pd.DataFrame,
    opened: Opened,
    categories: dict[str, pd.CategoricalDtype],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``peak`` and ``breakdown`` at the ``chosen`` instants (``chosen_instants``),
    each allocator at its own; ``opened`` has the breakdown at each."""
    peaks, frames = [], []
    for row in chosen.itertuples(index=False):
        instant = instant_table(timeline, int(row.time_ps), str(row.host))
        mine = (instant["allocator"].astype(object) == row.allocator).to_numpy(dtype=bool)
        peaks.append(instant[mine])
        rows = opened[(int(row.time_ps), str(row.host))]
        frames.append(rows[(rows["allocator"].astype(object) == row.allocator).to_numpy()])
    peak = conform(pd.concat(peaks, ignore_index=True), PEAK, categories)
    return peak, conform(pd.concat(frames, ignore_index=True), BREAKDOWN, categories)


def _repeated(instants: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame, list[int]]]:
    """Per (host, allocator) whose peak is reached at several instants: its rows and
    the times of the ``MOST_INSTANTS`` highest."""
    out = []
    for (host, allocator), mine in instants.groupby(["host", "allocator"], observed=True):
        if len(mine) < 2:
            continue
        highest = mine.sort_values("in_use_bytes", ascending=False, kind="stable")
        times = [int(t) for t in highest.head(MOST_INSTANTS)["time_ps"].tolist()]
        out.append(((str(host), str(allocator)), mine, times))
    return out


def repeat_instants(instants: pd.DataFrame) -> list[Instant]:
    """The instants ``peak_repeats`` reads, in the order it reads them."""
    return [(t, key[0]) for key, _, times in _repeated(instants) for t in times]


def peak_repeats(instants: pd.DataFrame, opened: Opened) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (host, allocator) whose peak is reached at several ``instants``
    (``peak_repeats.peak_instants``): the instants' steps and bytes, and the
    layers and ops holding memory at every one of the ``MOST_INSTANTS`` highest
    (``held_at_every``; ``opened`` has the breakdown at each, ``repeat_instants``),
    for the summary."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (host, allocator), mine, times in _repeated(instants):
        frames = []
        for time_ps in times:
            rows = opened[(time_ps, host)]
            frames.append(rows[(rows["allocator"] == allocator).to_numpy(dtype=bool)])
        out[(host, allocator)] = {
            "instants": len(mine),
            "opened": len(times),
            "near": NEAR,
            "steps": sorted({int(s) for s in mine["step"].dropna()}),
            "low_bytes": int(mine["in_use_bytes"].min()),
            "high_bytes": int(mine["in_use_bytes"].max()),
            "layers": held_at_every(frames, "layer"),
            "ops": held_at_every(frames, "op"),
        }
    return out
