"""Read the older pre-converted ``memory_profile`` files into a ``MemoryTrace``.

These are xprof's own summaries (``<host>.memory_profile.json.gz``, or a binary
``MemoryProfile``). They are lossy: xprof keeps the snapshots of the peak step
plus a timeline downsampled to at most 1000 points, and no step markers or op
types. What they carry is read into the same tables; what they lack is said in
the diagnostics.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from traceparse._proto import memory_profile_pb2
from traceparse.decode.datatypes import dtype_code
from traceparse.decode.limits import MAX_TIME_PS, check_allocators, checked_bytes, out_of_range_note
from traceparse.decode.trace import EVENT_COLUMNS, MemoryTrace, empty_frame
from traceparse.errors import CorruptCaptureError

# xprof downsamples its timeline to this many points.
_TIMELINE_POINTS = 1000


def parse_memory_profile(
    data: bytes, *, path: str, binary: bool
) -> memory_profile_pb2.MemoryProfile:
    """The MemoryProfile message in a JSON or binary file."""
    profile = memory_profile_pb2.MemoryProfile()
    try:
        if binary:
            profile.ParseFromString(data)
        else:
            json_format.Parse(data.decode("utf-8"), profile, ignore_unknown_fields=True)
    except (DecodeError, json_format.ParseError, UnicodeDecodeError, RecursionError) as exc:
        kind = "binary MemoryProfile" if binary else "memory_profile JSON"
        raise CorruptCaptureError(
            f"{path}: not a readable {kind} ({exc}); copy the file again", path
        ) from exc
    # xprof writes a profile with no allocators when the capture had no memory
    # events (``{"memoryProfilePerAllocator":{},"numHosts":1,...}``): valid and
    # empty. Without even a host count, the bytes are something else.
    empty = not profile.memory_profile_per_allocator and not profile.memory_ids
    if empty and profile.num_hosts <= 0:
        raise CorruptCaptureError(
            f"{path}: no allocator and no host in this memory_profile, so it is not a "
            "memory profile",
            path,
        )
    return profile


def decode_memory_profile(data: bytes, *, path: str, host: str, binary: bool) -> MemoryTrace:
    """Decode a pre-converted memory profile (JSON text or binary proto)."""
    profile = parse_memory_profile(data, path=path, binary=binary)
    rows: list[dict[str, object]] = []
    incomplete: list[str] = []
    out_of_range = 0
    for allocator in sorted(profile.memory_profile_per_allocator):
        per = profile.memory_profile_per_allocator[allocator]
        if len(per.sampled_timeline_snapshots) >= _TIMELINE_POINTS:
            incomplete.append(allocator)
        seen: set[tuple[int, int, int]] = set()
        # The timeline covers the whole capture (maybe downsampled); the detailed
        # snapshots cover the peak step. Their union is everything the file has.
        for snapshot in [*per.sampled_timeline_snapshots, *per.memory_profile_snapshots]:
            meta = snapshot.activity_metadata
            if meta.memory_activity not in (
                memory_profile_pb2.ALLOCATION,
                memory_profile_pb2.DEALLOCATION,
            ):
                continue
            key = (snapshot.time_offset_ps, meta.memory_activity, meta.address)
            if key in seen:
                continue
            if not -MAX_TIME_PS < snapshot.time_offset_ps < MAX_TIME_PS:
                out_of_range += 1  # same rule as for raw captures
                continue
            seen.add(key)
            rows.append(_row(allocator, snapshot))
    events = _frame(rows)
    check_allocators(events, path)
    fmt = "memory_profile" if binary else "memory_profile.json"
    diagnostics = [
        f"{path} is a pre-converted memory profile, not a raw capture: it has no step "
        "markers, no op types and no op timings, times count from xprof's first event, "
        "and frees repeat their allocation's op. Capture again for the full picture.",
    ]
    diagnostics.extend(checked_bytes(events, path))
    if out_of_range:
        diagnostics.append(out_of_range_note(path, out_of_range, "the first event"))
    if incomplete:
        diagnostics.append(
            f"The timeline of {', '.join(incomplete)} was downsampled to "
            f"{_TIMELINE_POINTS} points by xprof, so some allocations and frees are missing."
        )
    return MemoryTrace(path=path, host=host, format=fmt, events=events, diagnostics=diagnostics)


def _row(allocator: str, snapshot: memory_profile_pb2.MemoryProfileSnapshot) -> dict[str, object]:
    stats = snapshot.aggregation_stats
    meta = snapshot.activity_metadata
    code = dtype_code(meta.data_type) if meta.data_type else None
    return {
        "plane": "memory_profile",
        "is_allocation": meta.memory_activity == memory_profile_pb2.ALLOCATION,
        "time_ps": snapshot.time_offset_ps,
        "allocator": allocator,
        # The same opaque 64-bit id as a raw capture's addr stat read as int64.
        "address": meta.address - 2**64 if meta.address >= 2**63 else meta.address,
        "requested_bytes": meta.requested_bytes,
        "allocation_bytes": meta.allocation_bytes,
        "bytes_allocated": stats.heap_allocated_bytes,
        "bytes_reserved": stats.stack_reserved_bytes,
        "bytes_available": stats.free_memory_bytes,
        "peak_bytes_in_use": stats.peak_bytes_in_use,
        "fragmentation": stats.fragmentation if np.isfinite(stats.fragmentation) else pd.NA,
        "tf_op": meta.tf_op_name or None,
        "region_type": meta.region_type or None,
        "data_type": code if code is not None else pd.NA,
        "shape": meta.tensor_shape or None,
        "step_id": meta.step_id,
    }


def _frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    if not rows:
        return empty_frame(EVENT_COLUMNS)
    events = pd.DataFrame(rows, columns=list(EVENT_COLUMNS))
    events = events.sort_values("time_ps", kind="stable").reset_index(drop=True)
    return events.astype(EVENT_COLUMNS)
