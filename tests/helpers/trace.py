"""Hand-built memory traces for the analysis unit tests (no TensorFlow, no files).

``alloc`` and ``free`` describe events; ``profile_of`` turns them into a
``Profile`` whose allocator counters are what the BFC allocator would report:
``bytes_allocated`` is the running sum of chunk bytes (starting from what was
allocated before the capture), ``bytes_reserved`` and ``bytes_available`` as
given.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from traceparse import Profile
from traceparse.decode.trace import EVENT_COLUMNS, STEP_MARKER_COLUMNS, MemoryTrace, empty_frame

GPU = "GPU_0_bfc"
CAPACITY = 1 << 30


def alloc(
    t: int,
    address: int,
    nbytes: int,
    *,
    op: str | None = "op",
    requested: int | None = None,
    shape: str | None = "[1]",
    dtype: int | None = 1,
    region: str | None = "output",
    allocator: str = GPU,
    step_id: int | None = 7,
    reserved: int = 0,
) -> dict[str, Any]:
    """A MemoryAllocation event at ``t`` ps."""
    return {
        "is_allocation": True,
        "time_ps": t,
        "allocator": allocator,
        "address": address,
        "allocation_bytes": nbytes,
        "requested_bytes": nbytes if requested is None else requested,
        "tf_op": op,
        "shape": shape,
        "data_type": dtype,
        "region_type": region,
        "step_id": step_id,
        "bytes_reserved": reserved,
    }


def free(
    t: int, address: int, nbytes: int, *, allocator: str = GPU, reserved: int = 0
) -> dict[str, Any]:
    """A MemoryDeallocation event at ``t`` ps (no op, step id 0, as TensorFlow writes)."""
    return {
        "is_allocation": False,
        "time_ps": t,
        "allocator": allocator,
        "address": address,
        "allocation_bytes": nbytes,
        "requested_bytes": 0,
        "step_id": 0,
        "bytes_reserved": reserved,
    }


def trace_of(
    events: list[dict[str, Any]],
    *,
    host: str = "host0",
    before: dict[str, int] | None = None,
    markers: list[tuple[int, int, int]] | None = None,
    op_types: dict[str, str] | None = None,
    op_time: list[tuple[str, int, int]] | None = None,
    fmt: str = "xplane",
) -> MemoryTrace:
    """A ``MemoryTrace`` of ``events`` (sorted by time here, ties kept in list order).

    ``before`` gives each allocator's bytes allocated before the capture;
    ``markers`` are (step, start_ps, end_ps); ``op_time`` (op, count, total_ps).
    """
    heap = dict(before or {})
    lifetime_peak = dict(heap)
    rows = []
    for event in sorted(events, key=lambda e: e["time_ps"]):
        name = event["allocator"]
        sign = 1 if event["is_allocation"] else -1
        heap[name] = heap.get(name, 0) + sign * event["allocation_bytes"]
        lifetime_peak[name] = max(lifetime_peak.get(name, 0), heap[name])
        row = {column: None for column in EVENT_COLUMNS}
        row.update(
            plane="/host:CPU",
            bytes_allocated=heap[name],
            bytes_available=CAPACITY - heap[name] - event["bytes_reserved"],
            peak_bytes_in_use=lifetime_peak[name],
            fragmentation=0.0,
        )
        row.update(event)
        rows.append(row)
    frame = (
        pd.DataFrame(rows, columns=list(EVENT_COLUMNS)).astype(EVENT_COLUMNS)
        if rows
        else empty_frame(EVENT_COLUMNS)
    )
    marker_frame = empty_frame(STEP_MARKER_COLUMNS)
    if markers:
        marker_frame = pd.DataFrame(
            {
                "name": ["train"] * len(markers),
                "step": [m[0] for m in markers],
                "start_ps": [m[1] for m in markers],
                "end_ps": [m[2] for m in markers],
            }
        ).astype(STEP_MARKER_COLUMNS)
    timing = pd.DataFrame(op_time or [], columns=["op", "count", "total_ps"])
    return MemoryTrace(
        path=f"{host}.xplane.pb",
        host=host,
        format=fmt,
        events=frame,
        step_markers=marker_frame,
        op_types=dict(op_types or {}),
        op_time=timing.astype({"op": "object", "count": "int64", "total_ps": "int64"}),
    )


def profile_of(events: list[dict[str, Any]], **kwargs: Any) -> Profile:
    """A one-host ``Profile`` of ``events``; keyword arguments go to ``trace_of``."""
    return Profile([trace_of(events, **kwargs)])
