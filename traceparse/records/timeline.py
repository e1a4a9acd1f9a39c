"""The timeline section: one allocator's bytes in use after every event, its
counter before the first event, and its host's step spans, for plots.

Built here from the profile's ``timeline`` and ``step_markers`` so that a
renderer (the HTML's chart) draws them without slicing tables itself; a
renderer decides what to leave out (too many steps to shade) and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceparse.records.allocator import owned
from traceparse.units import is_missing

__all__ = ["TimelineSection", "counter_before", "step_spans", "timeline_section"]


@dataclass(frozen=True)
class TimelineSection:
    """``time_ps`` (int64) and ``in_use_bytes`` (float64, NaN where unknown) of every
    event of one allocator; ``start_bytes`` its counter before the first (None when
    unknown); ``steps`` (step, start_ps, end_ps) of its host, in step order, whole."""

    time_ps: np.ndarray
    in_use_bytes: np.ndarray
    start_bytes: int | None
    steps: tuple[tuple[int, int, int], ...]


def counter_before(timeline: pd.DataFrame) -> int | None:
    """An allocator's bytes in use before its first event (its counter minus the change)."""
    if timeline.empty or is_missing(timeline["in_use_bytes"].iloc[0]):
        return None
    delta = timeline["delta_bytes"].iloc[0]
    return int(timeline["in_use_bytes"].iloc[0]) - (0 if is_missing(delta) else int(delta))


def step_spans(markers: pd.DataFrame | None, host: str) -> tuple[tuple[int, int, int], ...]:
    """(step, first start, last end) of the step markers of ``host`` (every host's
    when the table has no host column), in step order."""
    if markers is None or markers.empty:
        return ()
    if "host" in markers.columns:
        markers = markers[markers["host"].astype(object) == host]
    spans = markers.groupby("step", sort=True).agg(start=("start_ps", "min"), end=("end_ps", "max"))
    return tuple(
        (int(i), int(r.start), int(r.end))
        for i, r in zip(spans.index, spans.itertuples(), strict=True)
    )


def timeline_section(
    timeline: pd.DataFrame, markers: pd.DataFrame | None, host: str, allocator: str
) -> TimelineSection:
    """The section of (host, allocator) from a profile's ``timeline`` and ``step_markers``."""
    mine = owned(timeline, host, allocator)
    return TimelineSection(
        time_ps=mine["time_ps"].to_numpy(dtype=np.int64),
        in_use_bytes=mine["in_use_bytes"].to_numpy(dtype=np.float64, na_value=np.nan),
        start_bytes=counter_before(mine),
        steps=step_spans(markers, host),
    )
