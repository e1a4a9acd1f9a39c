"""The peak of each allocator, and every allocation live at that instant.

The peak follows xprof's rule: bytes in use are ``bytes_reserved +
bytes_allocated`` after an event (a missing counter counts as 0, as in xprof),
and the peak is the *latest* event at which they reach their maximum in the
capture. Capacity is the in-use bytes plus ``bytes_available`` at that event.

xprof breaks ties in the order it reads the trace's lines, which is not time
order when memory events sit on several threads' lines; we take the latest in
time (file order for equal times), which is the same instant whenever the
maximum is reached once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import end_events, group_codes, live_mask, owner_groups
from traceparse.errors import UsageError
from traceparse.tables.contracts import ALLOCATIONS, declare

# The allocator's counters at the peak event: unknown where the capture lacks them.
_COUNTERS = [
    "heap_bytes",
    "reserved_bytes",
    "available_bytes",
    "capacity_bytes",
    "fragmentation",
    "step",
]
PEAK = declare(
    "peak",
    [
        "host",
        "allocator",
        "time_ps",
        "in_use_bytes",
        *_COUNTERS,
        "event",
        # Added: how many events reach the maximum, the allocator's own lifetime
        # peak counter (it may have peaked higher before the capture started), and
        # the allocator's event count.
        "peak_events",
        "lifetime_peak_bytes",
        "events",
    ],
    nullable=["allocator", *_COUNTERS, "lifetime_peak_bytes"],
)
PEAK_COLUMNS = PEAK.dtypes
# The allocations live at an allocator's peak, and whether in the peak's step.
LIVE_AT_PEAK = declare(
    "live_at_peak", [*ALLOCATIONS.columns, "in_peak_step"], nullable=ALLOCATIONS.nullable
)


def in_use(timeline: pd.DataFrame) -> np.ndarray:
    """Bytes in use after each timeline event (reserved + allocated; missing counts as 0).

    Read only: where no counter is missing, this is the ``in_use_bytes`` column itself.
    """
    column = timeline["in_use_bytes"]
    if not column.hasnans:  # their sum, as the timeline holds it
        view = column.to_numpy(dtype=np.int64).view()
        view.flags.writeable = False  # the table's own memory
        return view
    heap = timeline["heap_bytes"].to_numpy(dtype=np.int64, na_value=0)
    return np.add(heap, timeline["reserved_bytes"].to_numpy(dtype=np.int64, na_value=0))


def peak_table(timeline: pd.DataFrame) -> pd.DataFrame:
    """One row per (host, allocator): the latest event at its maximum bytes in use."""
    if timeline.empty:
        return _empty()
    # Per (host, allocator) group, numbered 0.. in order of first appearance, with
    # ufuncs over the group numbers: a frame grouped this way costs copies of
    # columns of millions of events.
    keys = group_codes(timeline, ["host", "allocator"])
    groups = int(keys.max()) + 1
    values = in_use(timeline)
    top = np.full(groups, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(top, keys, values)
    # One group (one allocator): compared with one number, not a row each.
    at_max = np.flatnonzero(values == (top[0] if groups == 1 else top[keys]))
    event = np.zeros(groups, dtype=np.int64)
    np.maximum.at(event, keys[at_max], at_max)  # the latest event at the maximum
    ties = np.bincount(keys[at_max], minlength=groups)
    counts = np.bincount(keys, minlength=groups)
    lifetime = _group_max(timeline["peak_bytes_in_use"], keys, groups)
    rows = timeline.iloc[event]
    heap = rows["heap_bytes"].astype("Int64").to_numpy()
    reserved = rows["reserved_bytes"].astype("Int64").to_numpy()
    available = rows["available_bytes"].astype("Int64")
    used = values[event]
    peak = pd.DataFrame(
        {
            "host": rows["host"].to_numpy(),
            "allocator": rows["allocator"].to_numpy(),
            "time_ps": rows["time_ps"].to_numpy(dtype=np.int64),
            "in_use_bytes": used,
            "heap_bytes": heap,
            "reserved_bytes": reserved,
            "available_bytes": available.to_numpy(),
            "capacity_bytes": (available + used).to_numpy(),
            "fragmentation": rows["fragmentation"].astype("Float64").to_numpy(),
            "step": rows["step"].astype("Int64").to_numpy(),
            "event": event,
            "peak_events": ties,
            "lifetime_peak_bytes": lifetime,
            "events": counts,
        }
    )
    peak = peak.astype(PEAK_COLUMNS)
    return peak.sort_values(["host", "allocator"], kind="stable").reset_index(drop=True)


def _group_max(column: pd.Series, keys: np.ndarray, groups: int) -> pd.arrays.IntegerArray:
    """The largest value of ``column`` per group; NA where a group has none."""
    values = column.to_numpy(dtype=np.int64, na_value=0)
    if column.hasnans:  # only then the known rows, as copies
        known = column.notna().to_numpy(dtype=bool)
        keys, values = keys[known], values[known]
    largest = np.full(groups, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(largest, keys, values)
    has = np.bincount(keys, minlength=groups) > 0
    return pd.arrays.IntegerArray(np.where(has, largest, 0), ~has)


def peak_by_group(
    allocations: pd.DataFrame, peak: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray, pd.arrays.IntegerArray]:
    """Each allocation's (host, allocator) group (``group_codes``), and per group
    its allocator's peak ``event`` and ``step`` (-1 / NA without one).

    Per group, not per allocation: a column of a row each for millions of
    allocations that mostly share one allocator would repeat a few values.
    """
    # Looked up once per (host, allocator), NA matching NA.
    found = {
        (_key(host), _key(allocator)): (event, step)
        for host, allocator, event, step in zip(
            peak["host"], peak["allocator"], peak["event"], peak["step"], strict=True
        )
    }
    group, owners = owner_groups(allocations)
    keys = zip(owners["host"], owners["allocator"], strict=True)
    hits = [found.get((_key(host), _key(allocator))) for host, allocator in keys]
    event = np.asarray([-1 if hit is None else int(hit[0]) for hit in hits], dtype=np.int64)
    step = pd.array([pd.NA if hit is None else hit[1] for hit in hits], dtype="Int64")
    return group, event, step


def _key(name: object) -> str | None:
    """A host or allocator name as a key, NA as None (NA matches NA)."""
    return None if pd.isna(name) else str(name)


def live_at_peak_table(
    allocations: pd.DataFrame, peak: pd.DataFrame, ends: np.ndarray | None = None
) -> pd.DataFrame:
    """Every allocation live at its allocator's peak, largest first, plus ``in_peak_step``.

    The index is the allocation's row in ``Profile.allocations``; ``ends`` is
    ``end_events(allocations)`` where the caller has it already.
    """
    group, peak_event, peak_step = peak_by_group(allocations, peak)
    ends = end_events(allocations) if ends is None else ends
    # One allocator: its peak as one number, not repeated for every row.
    event = peak_event[0] if len(peak_event) == 1 else peak_event[group]
    live = live_mask(allocations, ends, event)
    del event
    rows = allocations[live].copy()
    same = rows["step"].array == peak_step.take(group[live])
    rows["in_peak_step"] = same.fillna(False).to_numpy(dtype=bool)
    order = rows.sort_values(
        ["host", "allocator", "allocated_bytes", "alloc_ps"],
        ascending=[True, True, False, True],
        kind="stable",
    )
    return order


def select(
    frame: pd.DataFrame, allocator: str | None, host: str | None, known: pd.DataFrame
) -> pd.DataFrame:
    """Rows of one allocator and/or host; a name the capture lacks is a usage error."""
    mask = np.ones(len(frame), dtype=bool)
    for column, wanted in (("allocator", allocator), ("host", host)):
        if wanted is None:
            continue
        names = sorted(str(v) for v in known[column].dropna().unique())
        if wanted not in names:
            raise UsageError(
                f"no {column} named {wanted!r} in this capture; "
                f"its {column}s are: {', '.join(names) or 'none (no memory events)'}"
            )
        # Categoricals compare with a name as they are (NA is never equal).
        mask &= (frame[column] == wanted).to_numpy(dtype=bool, na_value=False)
    return frame[mask]


def _empty() -> pd.DataFrame:
    return PEAK.empty()
