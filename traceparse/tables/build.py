"""Build the core tables from a ``MemoryTrace``: allocations, frees, timeline.

Allocations pair with deallocations by (allocator, address) in time order:
after sorting the events by those keys, an allocation's free is the very next
event at the same address, if that is a deallocation. This is done with array
operations, so millions of events cost no Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceparse.decode import native
from traceparse.decode.trace import (
    MemoryTrace,
    categorical_from_distinct,
    categorical_take,
    codes_used,
)
from traceparse.tables.contracts import concat
from traceparse.tables.dtypes import estimate_columns, estimate_status

_KIND_DTYPE = pd.CategoricalDtype(["allocation", "deallocation"])


def pair_events(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair allocations with their frees.

    Returns (allocation event indices, their free event indices or -1, event
    indices of frees with no allocation in the capture). Indices are positions
    in ``events``, which is in time order.
    """
    n = len(events)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    # An address is an opaque 64-bit id: one past 2**63 is negative here, and
    # only a missing one (NA) pairs with nothing.
    address = events["address"].to_numpy(dtype=np.int64, na_value=0)
    known = events["address"].notna().to_numpy(dtype=bool)
    is_alloc = events["is_allocation"].to_numpy(dtype=bool)
    allocator = events["allocator"].cat.codes.to_numpy(dtype=np.int32)
    if native.available():
        # One pass in time order, with a table of the addresses: no sort, and
        # no gathers over millions of rows.
        return native.pair_events(allocator, address, known, is_alloc)
    return _pair_by_sorting(allocator, address, known, is_alloc)


def _pair_by_sorting(
    allocator: np.ndarray, address: np.ndarray, known: np.ndarray, is_alloc: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``pair_events`` on the numpy path: an allocation pairs with the next event
    of its allocator and address, if that is a free."""
    n = len(address)
    # The allocator and whether the address is known, in one key: one sort pass
    # fewer over millions of events (np.lexsort is stable: equal keys stay in time
    # order), and a missing address sorts apart from every real one.
    owner = allocator * 2 + known
    order = np.lexsort((address, owner))
    owner, address = owner[order], address[order]
    same_next = np.zeros(n, dtype=bool)
    same_next[:-1] = (owner[1:] == owner[:-1]) & (address[1:] == address[:-1])
    same_next &= known[order]
    sorted_alloc = is_alloc[order]
    next_is_free = np.zeros(n, dtype=bool)
    next_is_free[:-1] = ~sorted_alloc[1:]
    paired = sorted_alloc & same_next & next_is_free  # allocation followed by its free
    alloc_positions = np.flatnonzero(sorted_alloc)
    free_of = np.full(n, -1, dtype=np.int64)
    free_of[np.flatnonzero(paired)] = order[np.flatnonzero(paired) + 1]
    matched_free = np.zeros(n, dtype=bool)
    matched_free[np.flatnonzero(paired) + 1] = True
    orphan_positions = np.flatnonzero(~sorted_alloc & ~matched_free)
    allocs = order[alloc_positions]
    frees = free_of[alloc_positions]
    by_time = np.argsort(allocs, kind="stable")
    return allocs[by_time], frees[by_time], np.sort(order[orphan_positions])


def step_of(times: np.ndarray, markers: pd.DataFrame) -> np.ndarray:
    """The marked step containing each time (-1 where none does)."""
    if markers.empty or not times.size:
        return np.full(times.size, -1, dtype=np.int64)
    starts = markers["start_ps"].to_numpy(dtype=np.int64)
    ends = markers["end_ps"].to_numpy(dtype=np.int64)
    steps = markers["step"].to_numpy(dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends, steps = starts[order], ends[order], steps[order]
    slot = np.searchsorted(starts, times, side="right") - 1
    inside = (slot >= 0) & (times <= ends[np.maximum(slot, 0)])
    return np.where(inside, steps[np.maximum(slot, 0)], -1)


def executions_in_time_order(
    ids: pd.arrays.IntegerArray, times: np.ndarray
) -> pd.arrays.IntegerArray:
    """Raw step ids renumbered 1, 2, ... in the order of each id's first event.

    Without step markers TensorFlow's step ids number single executions (one
    eager op, one function call) with large arbitrary values, often negative:
    meaningless to a person and out of time order. The raw id stays in ``step_id``.
    """
    known = ~np.asarray(ids.isna(), dtype=bool)
    # Hashed, not sorted: the ids are few, the events millions; the ranks below
    # order the ids by value where first times tie, whatever order they come in.
    inverse, unique = pd.factorize(ids[known].to_numpy(dtype=np.int64))
    first = np.full(len(unique), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inverse, times[known])
    rank = np.empty(len(unique), dtype=np.int64)
    rank[np.lexsort((unique, first))] = np.arange(1, len(unique) + 1)
    out = np.zeros(len(ids), dtype=np.int64)
    out[known] = rank[inverse]
    return pd.arrays.IntegerArray(out, ~known)


def event_steps(trace: MemoryTrace) -> pd.arrays.IntegerArray:
    """Each event's step: from the step markers, else the allocator's step id.

    In a raw capture the step ids become execution numbers in time order, and
    a step id of 0 is TensorFlow's "no step" (every deallocation has it): that
    is unknown, not step 0. Pre-converted profiles
    carry xprof's step numbers, where 0 is a real step.
    """
    events = trace.events
    if trace.step_markers.empty:
        ids = pd.array(events["step_id"], dtype="Int64")
        if trace.format == "xplane":
            ids[(ids == 0).fillna(False).to_numpy(dtype=bool)] = pd.NA
            return executions_in_time_order(ids, events["time_ps"].to_numpy(dtype=np.int64))
        return ids
    found = step_of(events["time_ps"].to_numpy(dtype=np.int64), trace.step_markers)
    return pd.arrays.IntegerArray(found, found < 0)


def build_tables(trace: MemoryTrace) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(allocations, frees_without_allocation, timeline) for one host."""
    events = trace.events
    if not events.index.equals(pd.RangeIndex(len(events))):
        # Rows are positions; the timeline takes event columns as Series, which align.
        events = events.reset_index(drop=True)
    allocs, frees, orphans = pair_events(events)
    steps = event_steps(trace)
    if trace.format == "xplane" and trace.step_markers.empty and len(frees):
        # Step ids: a free has none of its own; it belongs to its allocation's step.
        released = frees >= 0
        steps[frees[released]] = steps[allocs[released]]
    # Every event is the trace's host: one category (none without events), codes of 0.
    host_dtype = pd.CategoricalDtype([trace.host] if len(events) else [])
    host = pd.Categorical.from_codes(np.zeros(len(events), np.int8), dtype=host_dtype)
    times = events["time_ps"].to_numpy(dtype=np.int64)

    def at_allocations(column: str) -> pd.Series:
        return pd.Series(events[column].array.take(allocs), copy=False)  # a new array

    freed = frees >= 0
    free_ps = pd.arrays.IntegerArray(np.where(freed, times[np.maximum(frees, 0)], 0), ~freed)
    shapes = at_allocations("shape")
    dtype, elements, estimated = estimate_columns(at_allocations("data_type"), shapes)
    requested = at_allocations("requested_bytes")
    allocated = at_allocations("allocation_bytes")
    op = no_op_names(at_allocations("tf_op"))
    op_codes = op.cat.codes.to_numpy(dtype=np.int64)
    # Map each op name used once, not once per row.
    used, by_row = codes_used(op_codes, len(op.cat.categories))
    used_ops = np.asarray(op.cat.categories, dtype=object)[used[used >= 0]]
    op_types = [trace.op_types.get(name) for name in used_ops]
    if used.size and used[0] < 0:
        op_types.insert(0, None)
    op_type = categorical_from_distinct(np.array(op_types, dtype=object), by_row)
    alloc_ps = times[allocs]
    # Built in contracts.ALLOCATIONS order, from arrays: Series would be aligned.
    allocations = pd.DataFrame(
        {
            "host": host[allocs],
            "allocator": at_allocations("allocator").array,
            "address": at_allocations("address").array,
            "op": op.array,
            "op_type": op_type,
            "region": at_allocations("region_type").array,
            "dtype": dtype.array,
            "shape": shapes.array,
            "num_elements": elements.array,
            "estimated_bytes": estimated.array,
            "requested_bytes": requested.array,
            "allocated_bytes": allocated.array,
            "padding_bytes": (allocated - requested).array,
            "estimate_status": estimate_status(estimated, requested).array,
            "alloc_ps": alloc_ps,
            "free_ps": free_ps,
            "lifetime_ps": free_ps - alloc_ps,
            "step": steps[allocs],
            "step_id": at_allocations("step_id").array,
            "alloc_event": allocs,
            "free_event": pd.arrays.IntegerArray(np.maximum(frees, 0), ~freed),
        },
        copy=False,
    )

    frees_without_allocation = pd.DataFrame(
        {
            "host": host[orphans],
            "allocator": events["allocator"].array.take(orphans),
            "address": events["address"].array.take(orphans),
            "allocated_bytes": events["allocation_bytes"].array.take(orphans),
            "free_ps": times[orphans],
            "free_event": orphans,
            "step": steps[orphans],
        }
    )

    # A free carries no op: name it after the allocation it releases.
    # int32 holds any op code, in half the bytes of a row each.
    op_by_event = np.full(len(events), -1, dtype=np.int32)
    op_by_event[allocs] = op_codes
    op_by_event[frees[freed]] = op_codes[freed]
    # Arrays of an allocation each that no table keeps: gone before the timeline's
    # new columns are made (each is tens of MB on millions of events).
    del frees, freed, op_codes, by_row
    op_names = np.asarray(op.cat.categories, dtype=object)
    is_free = ~events["is_allocation"].to_numpy(dtype=bool)
    sign = np.where(is_free, np.int8(-1), np.int8(1))  # int8: the products stay int64
    # The event columns the timeline repeats are shared, not copied (copy=False):
    # passed as Series, so pandas' copy-on-write knows that two frames hold them.
    timeline = pd.DataFrame(
        {
            "host": host,
            "allocator": events["allocator"],
            "time_ps": events["time_ps"],
            "kind": pd.Categorical.from_codes(
                is_free.view(np.int8), dtype=_KIND_DTYPE, validate=False
            ),
            "in_use_bytes": events["bytes_reserved"].array + events["bytes_allocated"].array,
            "heap_bytes": events["bytes_allocated"],
            "reserved_bytes": events["bytes_reserved"],
            "available_bytes": events["bytes_available"],
            "fragmentation": events["fragmentation"],
            "delta_bytes": events["allocation_bytes"].array * sign,
            "address": events["address"],
            "requested_bytes": events["requested_bytes"],
            "allocation_bytes": events["allocation_bytes"],
            "peak_bytes_in_use": events["peak_bytes_in_use"],
            "op": categorical_take(op_names, op_by_event),
            "step": steps,
        },
        copy=False,
    )
    # Columns in the order of contracts.ALLOCATIONS, FREES_WITHOUT_ALLOCATION and
    # TIMELINE; Profile applies those contracts, with the categories all hosts share.
    return allocations, frees_without_allocation, timeline


# What older runtimes write where an allocation has no op: no op, not an op's name.
NO_OP_NAMES = ("", "(null)")


def no_op_names(op: pd.Series) -> pd.Series:
    """``op`` (categorical) with the spellings of "no op" (``NO_OP_NAMES``) missing,
    so every table and output shows them as the allocations with no op recorded."""
    gone = [name for name in NO_OP_NAMES if name in op.cat.categories]
    return op.cat.remove_categories(gone) if gone else op


def build_run_tables(
    traces: Sequence[MemoryTrace],
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``build_tables`` of every host of a run, each table concatenated in host
    order; the event indices (``alloc_event``, ``free_event``) point into the
    run's concatenated timeline."""
    allocations, frees, timelines = [], [], []
    offset = 0
    for trace in traces:
        a, f, t = build_tables(trace)
        if offset:
            a["alloc_event"] += offset
            a["free_event"] += offset
            f["free_event"] += offset
        offset += len(t)
        allocations.append(a)
        frees.append(f)
        timelines.append(t)
    return concat(allocations), concat(frees), concat(timelines)
