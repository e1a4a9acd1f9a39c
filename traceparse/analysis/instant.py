"""Each allocator's state at any instant, in the peak's columns.

``instant_table(timeline, time_ps)`` is ``peak_table`` for a chosen time instead
of the maximum: per (host, allocator) the latest event at or before
``time_ps`` (file order for equal times), with the allocator's own counters
after it. ``live_at_peak_table`` and ``breakdown_table`` take it as they take
the peak, so ``Profile.breakdown_at`` lists who held the bytes then with the
same rows, summing to the allocator's counter at that event.
"""

from __future__ import annotations

import weakref

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import group_codes
from traceparse.analysis.peak import PEAK, PEAK_COLUMNS, in_use
from traceparse.tables.select import row_index_type


def instant_table(timeline: pd.DataFrame, time_ps: int, host: str | None = None) -> pd.DataFrame:
    """One row per (host, allocator) with an event at or before ``time_ps``: the latest.

    ``host`` keeps one host's allocators (times are from each host's own capture
    start). An allocator whose first event comes later has no row: nothing says
    what it held before.
    """
    if timeline.empty:
        return PEAK.empty()
    order = _order_of(timeline)
    if order.in_time_order:
        event = order.latest(int(time_ps), host)
        counts = order.counts
    else:
        event, counts = _latest_by_mask(timeline, int(time_ps), host)
    has = event >= 0
    event, counts = event[has], counts[has]
    rows = timeline.iloc[event]
    values = in_use(timeline)[event]
    available = rows["available_bytes"].astype("Int64")
    table = pd.DataFrame(
        {
            "host": rows["host"].to_numpy(),
            "allocator": rows["allocator"].to_numpy(),
            "time_ps": rows["time_ps"].to_numpy(dtype=np.int64),
            "in_use_bytes": values,
            "heap_bytes": rows["heap_bytes"].astype("Int64").to_numpy(),
            "reserved_bytes": rows["reserved_bytes"].astype("Int64").to_numpy(),
            "available_bytes": available.to_numpy(),
            "capacity_bytes": (available + values).to_numpy(),
            "fragmentation": rows["fragmentation"].astype("Float64").to_numpy(),
            "step": rows["step"].astype("Int64").to_numpy(),
            "event": event,
            "peak_events": np.ones(len(event), dtype=np.int64),
            "lifetime_peak_bytes": rows["peak_bytes_in_use"].astype("Int64").to_numpy(),
            "events": counts,
        }
    )
    table = table.astype(PEAK_COLUMNS)
    return table.sort_values(["host", "allocator"], kind="stable").reset_index(drop=True)


def _latest_by_mask(
    timeline: pd.DataFrame, time_ps: int, host: str | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per (host, allocator) group: the largest row at or before ``time_ps`` (-1:
    none), and its events; over every row (for a timeline not in time order)."""
    keys = group_codes(timeline, ["host", "allocator"])
    groups = int(keys.max()) + 1
    times = timeline["time_ps"].to_numpy(dtype=np.int64)
    before = times <= time_ps
    if host is not None:
        before &= (timeline["host"].astype(object) == host).to_numpy(dtype=bool)
    rows_before = np.flatnonzero(before)
    event = np.full(groups, -1, dtype=np.int64)
    np.maximum.at(event, keys[rows_before], rows_before)
    return event, np.bincount(keys, minlength=groups)


class _Order:
    """A timeline's rows by (host, allocator) group, with their times: the latest
    event at or before an instant is then one binary search a group instead of a
    pass over every row (a report asks for a dozen instants of millions of rows).

    Kept for the life of the timeline, so kept small: the rows as int32, and no
    copy of the times where the whole timeline's never go back (one host's
    capture): a group's latest row at or before an instant is then its last row
    before the timeline's own cut."""

    def __init__(self, timeline: pd.DataFrame) -> None:
        self.table = weakref.ref(timeline)
        self.length = len(timeline)
        keys = group_codes(timeline, ["host", "allocator"])
        groups = int(keys.max()) + 1
        self.counts = np.bincount(keys, minlength=groups)
        order = np.argsort(keys, kind="stable")  # each group's rows in file order
        del keys
        order = order.astype(row_index_type(self.length), copy=False)
        times = timeline["time_ps"].to_numpy(dtype=np.int64)
        hosts = timeline["host"].astype(object)
        self.rows = np.split(order, np.cumsum(self.counts)[:-1])
        self.hosts = [hosts.iloc[int(rows[0])] for rows in self.rows]
        self.whole = bool((times[1:] >= times[:-1]).all())
        # Rows are in time order within an allocator: the largest row at or
        # before an instant is the one a binary search of its times finds.
        self.times = [] if self.whole else [times[rows] for rows in self.rows]
        self.in_time_order = self.whole or all(bool((np.diff(t) >= 0).all()) for t in self.times)

    def latest(self, time_ps: int, host: str | None) -> np.ndarray:
        event = np.full(len(self.rows), -1, dtype=np.int64)
        cut = 0
        if self.whole:
            timeline = self.table()
            assert timeline is not None, "an order outlived its timeline"
            times = timeline["time_ps"].to_numpy(dtype=np.int64)
            cut = int(np.searchsorted(times, time_ps, side="right"))
        for g, rows in enumerate(self.rows):
            if host is not None and self.hosts[g] != host:
                continue
            if self.whole:
                at = int(np.searchsorted(rows, cut, side="left")) - 1
            else:
                at = int(np.searchsorted(self.times[g], time_ps, side="right")) - 1
            if at >= 0:
                event[g] = rows[at]
        return event


_ORDERS: list[_Order] = []


def _order_of(timeline: pd.DataFrame) -> _Order:
    """The last timelines' ``_Order`` (by identity, weakly held, and length: a Profile
    does not change a table it has built)."""
    for found in _ORDERS:
        if found.length == len(timeline) and found.table() is timeline:
            return found
    made = _Order(timeline)
    _ORDERS.insert(0, made)
    del _ORDERS[2:]
    return made
