"""Each allocator's state at any instant, in the peak's columns.

``instant_table(timeline, time_ps)`` is ``peak_table`` for a chosen time instead
of the maximum: per (host, allocator) the latest event at or before
``time_ps`` (file order for equal times), with the allocator's own counters
after it. ``live_at_peak_table`` and ``breakdown_table`` take it as they take
the peak, so ``Profile.breakdown_at`` lists who held the bytes then with the
same rows, summing to the allocator's counter at that event.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import group_codes
from traceparse.analysis.peak import PEAK, PEAK_COLUMNS, in_use


def instant_table(timeline: pd.DataFrame, time_ps: int, host: str | None = None) -> pd.DataFrame:
    """One row per (host, allocator) with an event at or before ``time_ps``: the latest.

    ``host`` keeps one host's allocators (times are from each host's own capture
    start). An allocator whose first event comes later has no row: nothing says
    what it held before.
    """
    if timeline.empty:
        return PEAK.empty()
    keys = group_codes(timeline, ["host", "allocator"])
    groups = int(keys.max()) + 1
    times = timeline["time_ps"].to_numpy(dtype=np.int64)
    before = times <= int(time_ps)
    if host is not None:
        before &= (timeline["host"].astype(object) == host).to_numpy(dtype=bool)
    rows_before = np.flatnonzero(before)
    event = np.full(groups, -1, dtype=np.int64)
    # Rows are in time order within an allocator: the largest row index is the latest.
    np.maximum.at(event, keys[rows_before], rows_before)
    counts = np.bincount(keys, minlength=groups)
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
