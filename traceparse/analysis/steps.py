"""One row per (host, allocator, step): what each step allocated, freed, peaked at and kept.

Steps come from the step markers (``Trace(name, step_num=n, _r=1)``, which
``cap.step(n)`` and Keras' TensorBoard callback write): a step spans its
markers' first start to last end. A host without markers falls back to the
allocator's step ids (executions, numbered in time order for a raw capture):
a step then spans its events' first and last times. Rows are in time order.
``Profile.allocations.step`` and ``Profile.timeline.step`` use the same rule,
so a step's counts here are those rows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import (
    BLOCK_ROWS,
    STILL_LIVE,
    end_events,
    group_sums,
    held_bytes,
    owner_groups,
)
from traceparse.analysis.peak import in_use
from traceparse.tables.contracts import declare
from traceparse.tables.select import row_index_type

STEPS = declare(
    "steps",
    [
        "host",
        "allocator",
        "step",
        "name",
        "source",
        "start_ps",
        "end_ps",
        "duration_ps",
        "allocations",
        "requested_bytes",
        "allocated_bytes",
        "frees",
        "freed_bytes",
        "peak_in_use_bytes",
        "peak_time_ps",
        "in_use_start_bytes",
        "in_use_end_bytes",
        "growth_bytes",
        "retained_bytes",
    ],
    nullable=["allocator", "name"],
)
STEP_COLUMNS = STEPS.dtypes

# Where a step comes from: step markers; xprof's step numbers (pre-converted
# profiles); or the allocator's own step ids, which in a raw capture number
# single executions (one eager op, one tf.function call), not training steps:
# those "steps" are executions numbered 1, 2, ... in time order (tables.build).
MARKER, XPROF_STEP, STEP_ID = "marker", "xprof_step", "execution"
# The steps in time order per allocator (the steps table's and the leak check's).
STEP_ORDER = ["host", "allocator", "start_ps", "step"]
_NO_STEP = np.iinfo(np.int64).min  # an event's step where it has none


def step_windows(
    timeline: pd.DataFrame, markers: pd.DataFrame, numbered_hosts: Collection[str] = ()
) -> pd.DataFrame:
    """Per host and step: ``name, source, start_ps, end_ps``, from markers or step ids."""
    frames: list[pd.DataFrame] = []
    marked_hosts: set[str] = set()
    if not markers.empty:
        marked = markers.assign(host=markers["host"].astype(object))
        grouped = marked.groupby(["host", "step"], as_index=False, sort=True)
        windows = grouped.agg(
            name=("name", "first"), start_ps=("start_ps", "min"), end_ps=("end_ps", "max")
        )
        # Names as objects, as the step-id windows' (all NA) are: one dtype to concatenate.
        frames.append(windows.assign(name=windows["name"].astype(object), source=MARKER))
        marked_hosts = set(windows["host"])
    # The timeline can have millions of rows: its columns are read as arrays (views
    # where they can be) and grouped per host code, never copied into a frame.
    host = timeline["host"]
    codes = host.cat.codes.to_numpy()  # int8/int16; -1 (no host) never has a window
    marked_codes = np.flatnonzero(host.cat.categories.isin(marked_hosts))
    step_column = timeline["step"].array
    has_step = ~step_column.isna()
    step = step_column.to_numpy(dtype=np.int64, na_value=_NO_STEP)
    times = timeline["time_ps"].to_numpy(dtype=np.int64)
    found = [
        _id_windows(code, step, times, has_step & (codes == code))
        for code in range(len(host.cat.categories))
        if code not in marked_codes
    ]
    if any(len(w) for w in found):
        windows = pd.concat(found, ignore_index=True)
        windows["host"] = np.asarray(host.cat.categories, dtype=object)[windows["host"]]
        numbered = windows["host"].isin(set(numbered_hosts)).to_numpy()
        source = np.where(numbered, XPROF_STEP, STEP_ID)
        frames.append(windows.assign(name=np.full(len(windows), None, dtype=object), source=source))
    if not frames:
        return pd.DataFrame(
            {
                "host": pd.Series(dtype=object),
                "step": pd.Series(dtype="int64"),
                "name": pd.Series(dtype=object),
                "source": pd.Series(dtype=object),
                "start_ps": pd.Series(dtype="int64"),
                "end_ps": pd.Series(dtype="int64"),
            }
        )
    return pd.concat(frames, ignore_index=True)


def _id_windows(code: int, step: np.ndarray, times: np.ndarray, mine: np.ndarray) -> pd.DataFrame:
    """One host's windows from its step ids: per step (ascending), its events' first
    and last times; ``mine`` marks the host's rows that have a step."""
    if mine.all():
        own_step, own_time = step, times
    else:
        own_step, own_time = step[mine], times[mine]
    if own_step.size and not (own_step[1:] >= own_step[:-1]).all():
        # Steps out of order: reduced per number a block of rows at a time (the
        # numbering of millions of rows at once is a hash table as large as them),
        # then the blocks' few rows per step are reduced again.
        blocks = []
        for begin in range(0, own_step.size, BLOCK_ROWS):
            number, values = pd.factorize(own_step[begin : begin + BLOCK_ROWS])
            block_start = np.full(values.size, np.iinfo(np.int64).max, dtype=np.int64)
            block_end = np.full(values.size, np.iinfo(np.int64).min, dtype=np.int64)
            np.minimum.at(block_start, number, own_time[begin : begin + BLOCK_ROWS])
            np.maximum.at(block_end, number, own_time[begin : begin + BLOCK_ROWS])
            blocks.append(pd.DataFrame({"step": values, "start": block_start, "end": block_end}))
        per_step = pd.concat(blocks).groupby("step", sort=True).agg({"start": "min", "end": "max"})
        first = per_step.index.to_numpy(dtype=np.int64)
        start = per_step["start"].to_numpy(dtype=np.int64)
        end = per_step["end"].to_numpy(dtype=np.int64)
    else:
        # Steps rising with time (the usual case): each step is one run of rows.
        starts = np.flatnonzero(np.append(True, own_step[1:] != own_step[:-1]))
        if not own_step.size:
            starts = starts[:0]
        start = np.minimum.reduceat(own_time, starts) if starts.size else starts
        end = np.maximum.reduceat(own_time, starts) if starts.size else starts
        first = own_step[starts]
    return pd.DataFrame(
        {"host": np.full(first.size, code), "step": first, "start_ps": start, "end_ps": end}
    )


def steps_table(
    timeline: pd.DataFrame,
    allocations: pd.DataFrame,
    markers: pd.DataFrame,
    numbered_hosts: Collection[str] = (),
    ends: np.ndarray | None = None,
) -> pd.DataFrame:
    """The steps of every allocator; empty when the capture has no memory events.

    ``numbered_hosts`` are hosts whose step ids are xprof's step numbers; ``ends``
    is ``end_events(allocations)`` where the caller has it already.
    """
    if timeline.empty:
        return _empty()
    windows = step_windows(timeline, markers, numbered_hosts)
    allocators = owner_groups(timeline)[1].astype(object)
    table = allocators.merge(windows, on="host", how="inner")
    if table.empty:
        return _empty()
    table = table.sort_values(STEP_ORDER, kind="stable")
    table = table.reset_index(drop=True)
    ends = end_events(allocations) if ends is None else ends
    event_owner = _owner_rows(timeline)
    event_steps = timeline["step"].to_numpy(dtype=np.int64, na_value=_NO_STEP)
    table = _add_counts(table, timeline, allocations, ends, event_owner, event_steps)
    table = _add_in_use(table, timeline, event_owner, event_steps)
    table["duration_ps"] = table["end_ps"] - table["start_ps"]
    table["growth_bytes"] = table["in_use_end_bytes"] - table["in_use_start_bytes"]
    return table[list(STEP_COLUMNS)].astype(STEP_COLUMNS)


# The timeline can have millions of rows, the steps are few: the functions below
# work per allocator on arrays, and make as few arrays of a row each as they can
# (each one is memory the kernel hands over page by page).


def _add_counts(
    table: pd.DataFrame,
    timeline: pd.DataFrame,
    allocations: pd.DataFrame,
    ends: np.ndarray,
    event_owner: dict[tuple[str, str], np.ndarray],
    event_steps: np.ndarray,
) -> pd.DataFrame:
    """Per step: its allocations and frees, counted and summed into its row."""
    held = held_bytes(allocations)
    requested = allocations["requested_bytes"].to_numpy(dtype=np.int64, na_value=0)
    made = _named(allocations, _owner_rows(allocations))
    steps = allocations["step"].to_numpy(dtype=np.int64, na_value=_NO_STEP)
    sums = {c: np.zeros(len(table), dtype=np.int64) for c in _COUNTS}
    for rows, at in _step_rows(table, steps, made):
        size = len(table)
        sums["allocations"] += np.bincount(at, minlength=size)
        mine = _rows_of(held, rows)
        sums["allocated_bytes"] += group_sums(at, mine, size)
        sums["requested_bytes"] += group_sums(at, _rows_of(requested, rows), size)
        # Retained: the few allocations still live at the end.
        kept = _rows_of(ends, rows) == STILL_LIVE
        sums["retained_bytes"] += group_sums(at[kept], mine[kept], size)
    del held, requested, made, steps  # a row each: gone before the frees' arrays come
    is_free = (timeline["kind"] == "deallocation").to_numpy(dtype=bool)
    frees = {o: rows[is_free[rows]] for o, rows in _named(timeline, event_owner).items()}
    freed = timeline["allocation_bytes"].array
    for rows, at in _step_rows(table, event_steps, frees):
        sums["frees"] += np.bincount(at, minlength=len(table))
        freed_bytes = freed.take(rows).to_numpy(dtype=np.int64, na_value=0)
        sums["freed_bytes"] += group_sums(at, freed_bytes, len(table))
    for column, values in sums.items():
        table[column] = values
    return table


_COUNTS = (
    "allocations",
    "allocated_bytes",
    "requested_bytes",
    "retained_bytes",
    "frees",
    "freed_bytes",
)


def _named(
    frame: pd.DataFrame, owner_rows: dict[tuple[str, str], np.ndarray]
) -> dict[tuple[str, str], np.ndarray]:
    """The owners that name a host and an allocator (the others count in no step's sums,
    as they never have)."""
    unnamed = (frame["host"].isna() | frame["allocator"].isna()).to_numpy(dtype=bool)
    return {owner: rows for owner, rows in owner_rows.items() if not unnamed[rows[0]]}


def _step_rows(
    table: pd.DataFrame, steps: np.ndarray, owner_rows: dict[tuple[str, str], np.ndarray]
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per owner, a block of rows at a time: its rows (of ``owner_rows``) whose step
    (``steps``) has a row in ``table``, and that row of ``table``.

    Blocks of ``BLOCK_ROWS`` rows: what is found for them is several arrays of a row
    each, and the callers only add up per block.
    """
    table_steps = table["step"].to_numpy(dtype=np.int64)
    table_owner = _owner_rows(table)
    for owner, rows in owner_rows.items():
        if owner not in table_owner or not rows.size:
            continue
        mine = table_owner[owner]
        order = np.argsort(table_steps[mine], kind="stable")
        known, mine = table_steps[mine][order], mine[order]
        for start in range(0, rows.size, BLOCK_ROWS):
            block = rows[start : start + BLOCK_ROWS]
            wanted = steps[block]
            slot = np.searchsorted(known, wanted)
            np.minimum(slot, known.size - 1, out=slot)  # in place
            hit = known[slot] == wanted
            at = mine[slot]
            yield (block, at) if hit.all() else (block[hit], at[hit])


def _add_in_use(
    table: pd.DataFrame,
    timeline: pd.DataFrame,
    event_owner: dict[tuple[str, str], np.ndarray],
    event_steps: np.ndarray,
) -> pd.DataFrame:
    """In use at each step's start and end, and its peak (within the step's own events);
    ``event_owner`` is ``_owner_rows(timeline)``, ``event_steps`` the timeline's steps."""
    values = in_use(timeline)
    times = timeline["time_ps"].to_numpy(dtype=np.int64)
    delta = timeline["delta_bytes"]
    start_bytes = np.zeros(len(table), dtype=np.int64)
    end_bytes = np.zeros(len(table), dtype=np.int64)
    peak_bytes = np.zeros(len(table), dtype=np.int64)
    peak_time = np.zeros(len(table), dtype=np.int64)
    table_owner = _owner_rows(table)
    # One pass per allocator (a handful), each vectorised over its steps.
    for owner, rows in table_owner.items():
        events = event_owner[owner]
        t, v, own_step = (_rows_of(a, events) for a in (times, values, event_steps))
        first_delta = delta.iat[events[0]]
        before_first = v[0] - (0 if pd.isna(first_delta) else int(first_delta))
        start = table["start_ps"].to_numpy(dtype=np.int64)[rows]
        end = table["end_ps"].to_numpy(dtype=np.int64)[rows]
        # The counter before an event's position: before the first one, the value then.
        start_bytes[rows] = _counter_before(v, before_first, np.searchsorted(t, start, "left"))
        end_bytes[rows] = _counter_before(v, before_first, np.searchsorted(t, end, "right"))
        peak_bytes[rows] = start_bytes[rows]
        peak_time[rows] = start
        # The highest event of each step among its own events: the latest event at
        # its highest value, as for the allocator's peak.
        has_step = own_step != _NO_STEP
        if not has_step.all():
            own = np.flatnonzero(has_step)
            own_step, v, t = own_step[own], v[own], t[own]
        if not own_step.size:
            continue
        last = _highest_per_step(own_step, v, t)
        best_step = own_step[last]  # sorted, one per step
        wanted = table["step"].to_numpy(dtype=np.int64)[rows]
        slot = np.minimum(np.searchsorted(best_step, wanted), best_step.size - 1)
        found = best_step[slot] == wanted
        value = np.where(found, v[last][slot], -1)
        higher = value > peak_bytes[rows]
        peak_bytes[rows[higher]] = value[higher]
        peak_time[rows[higher]] = t[last][slot][higher]
    table["in_use_start_bytes"] = start_bytes
    table["in_use_end_bytes"] = end_bytes
    table["peak_in_use_bytes"] = peak_bytes
    table["peak_time_ps"] = peak_time
    return table


def _rows_of(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[rows]``; the array itself where ``rows`` are all of them in order."""
    whole = rows.size == values.size and (rows.size == 0 or rows[-1] == rows.size - 1)
    return values if whole else values[rows]


def _counter_before(values: np.ndarray, before_first: int, position: np.ndarray) -> np.ndarray:
    """The counter just before each ``position`` of ``values`` (the counters after each
    event, in order): ``before_first`` at 0, else the value after the previous event."""
    return np.where(position == 0, before_first, values[np.maximum(position - 1, 0)])


def _highest_per_step(step: np.ndarray, value: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Per step, in step order, the position of its latest event at its highest value
    (of equal times, the last one)."""
    if time.size > 1 and not (time[1:] >= time[:-1]).all():
        order = np.lexsort((time, value, step))
        return order[np.append(step[order][1:] != step[order][:-1], True)]
    # Events in time order (the timeline's): each step's last event at its highest
    # value is the one wanted.
    if step.size < 2 or bool((step[1:] >= step[:-1]).all()):
        # Steps rising with time: each step is one run of rows, reduced in place
        # (no sort at all, where a three-key sort costs seconds on millions of events).
        starts = np.flatnonzero(np.append(True, step[1:] != step[:-1]))
        highest = np.maximum.reduceat(value, starts)
        lengths = np.diff(np.append(starts, step.size))
        at_highest = np.flatnonzero(value == np.repeat(highest, lengths))
        segment = np.searchsorted(starts, at_highest, side="right") - 1
        return at_highest[np.append(segment[1:] != segment[:-1], True)]
    # Steps that fall back: each event numbered by its step (in step order), and
    # the maximum and its last position found per number; a sort that regroups the
    # events would copy each column of millions of rows.
    # Numbered in order of first appearance (sorting the numbers would copy them
    # all); the few results are put in step order at the end.
    number, steps = pd.factorize(step)
    highest = np.full(steps.size, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(highest, number, value)
    # Compared a block at a time: ``highest[number]`` whole is another array of a row each.
    at_highest = np.concatenate(
        [
            start
            + np.flatnonzero(
                value[start : start + BLOCK_ROWS] == highest[number[start : start + BLOCK_ROWS]]
            )
            for start in range(0, step.size, BLOCK_ROWS)
        ]
    )
    last = np.full(steps.size, -1, dtype=np.int64)
    np.maximum.at(last, number[at_highest], at_highest)
    return last[np.argsort(steps, kind="stable")]


def _owner_rows(frame: pd.DataFrame) -> dict[tuple[str, str], np.ndarray]:
    """The rows of each (host, allocator), NA spelled as an empty name; grouped
    on the columns (categorical codes in the timeline), not a string per row."""
    if frame.empty:
        return {}
    group, owners = owner_groups(frame)
    # Row numbers in int32 where they fit: half the memory, held all along.
    kind = row_index_type(group.size)
    if len(owners) == 1:  # one owner (one allocator): every row, in order
        rows = [np.arange(group.size, dtype=kind)]
    else:
        # A stable sort keeps each owner's rows in order; few owners: small
        # integers, which numpy sorts by radix.
        order = np.argsort(group.astype(np.min_scalar_type(len(owners))), kind="stable")
        bounds = np.cumsum(np.bincount(group, minlength=len(owners)))[:-1]
        rows = np.split(order.astype(kind, copy=False), bounds)
    del group
    names = zip(owners["host"], owners["allocator"], strict=True)
    return {(_spelled(h), _spelled(a)): r for (h, a), r in zip(names, rows, strict=True)}


def _spelled(name: object) -> str:
    return "" if pd.isna(name) else str(name)


def _empty() -> pd.DataFrame:
    return STEPS.empty()
