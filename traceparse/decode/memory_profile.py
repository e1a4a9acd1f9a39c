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
from google.protobuf.message import DecodeError

from traceparse._proto import memory_profile_pb2
from traceparse.decode.datatypes import dtype_code
from traceparse.decode.legacy_json import LegacyError, Profile, Snapshot, read_json
from traceparse.decode.limits import MAX_TIME_PS, check_allocators, checked_bytes, out_of_range_note
from traceparse.decode.trace import EVENT_COLUMNS, MemoryTrace, empty_frame
from traceparse.errors import CorruptCaptureError

# xprof downsamples its timeline to this many points.
_TIMELINE_POINTS = 1000
_ALLOCATION, _DEALLOCATION = memory_profile_pb2.ALLOCATION, memory_profile_pb2.DEALLOCATION


def parse_memory_profile(data: bytes, *, path: str, binary: bool) -> Profile:
    """The snapshots of a MemoryProfile in a JSON or binary file. JSON is read
    without protobuf messages (``legacy_json``); binary by upb."""
    try:
        profile = read_json(data) if not binary else _from_binary(data)
    except (DecodeError, LegacyError, ValueError, RecursionError) as exc:
        kind = "binary MemoryProfile" if binary else "memory_profile JSON"
        raise CorruptCaptureError(
            f"{path}: not a readable {kind} ({exc}); copy the file again", path
        ) from exc
    # xprof writes a profile with no allocators when the capture had no memory
    # events (``{"memoryProfilePerAllocator":{},"numHosts":1,...}``): valid and
    # empty. Without even a host count, the bytes are something else.
    empty = not profile.allocators and not profile.memory_ids
    if empty and profile.num_hosts <= 0:
        raise CorruptCaptureError(
            f"{path}: no allocator and no host in this memory_profile, so it is not a "
            "memory profile",
            path,
        )
    return profile


def _from_binary(data: bytes) -> Profile:
    message = memory_profile_pb2.MemoryProfile.FromString(data)
    allocators = {
        name: (
            [_snapshot(s) for s in per.sampled_timeline_snapshots],
            [_snapshot(s) for s in per.memory_profile_snapshots],
        )
        for name, per in message.memory_profile_per_allocator.items()
    }
    return Profile(allocators, message.num_hosts, len(message.memory_ids))


def _snapshot(snapshot: memory_profile_pb2.MemoryProfileSnapshot) -> Snapshot:
    stats = snapshot.aggregation_stats
    meta = snapshot.activity_metadata
    return Snapshot(
        snapshot.time_offset_ps,
        meta.memory_activity,
        meta.requested_bytes,
        meta.allocation_bytes,
        meta.address,
        meta.tf_op_name,
        meta.step_id,
        meta.region_type,
        meta.data_type,
        meta.tensor_shape,
        stats.stack_reserved_bytes,
        stats.heap_allocated_bytes,
        stats.free_memory_bytes,
        stats.fragmentation,
        stats.peak_bytes_in_use,
    )


def decode_memory_profile(data: bytes, *, path: str, host: str, binary: bool) -> MemoryTrace:
    """Decode a pre-converted memory profile (JSON text or binary proto)."""
    profile = parse_memory_profile(data, path=path, binary=binary)
    rows: list[tuple[str, Snapshot]] = []
    incomplete: list[str] = []
    out_of_range = 0
    for allocator in sorted(profile.allocators):
        timeline, detailed = profile.allocators[allocator]
        if len(timeline) >= _TIMELINE_POINTS:
            incomplete.append(allocator)
        seen: set[tuple[int, int, int]] = set()
        # The timeline covers the whole capture (maybe downsampled); the detailed
        # snapshots cover the peak step. Their union is everything the file has.
        for snapshot in [*timeline, *detailed]:
            if snapshot.memory_activity not in (_ALLOCATION, _DEALLOCATION):
                continue
            key = (snapshot.time_offset_ps, snapshot.memory_activity, snapshot.address)
            if key in seen:
                continue
            if not -MAX_TIME_PS < snapshot.time_offset_ps < MAX_TIME_PS:
                out_of_range += 1  # same rule as for raw captures
                continue
            seen.add(key)
            rows.append((allocator, snapshot))
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


def _columns(rows: list[tuple[str, Snapshot]]) -> dict[str, list[object]]:
    """The events' columns, a list each (no dict per row)."""
    snaps = [s for _, s in rows]
    codes = [dtype_code(s.data_type) if s.data_type else None for s in snaps]
    return {
        "plane": ["memory_profile"] * len(rows),
        "is_allocation": [s.memory_activity == _ALLOCATION for s in snaps],
        "time_ps": [s.time_offset_ps for s in snaps],
        "allocator": [a for a, _ in rows],
        # The same opaque 64-bit id as a raw capture's addr stat read as int64.
        "address": [s.address - 2**64 if s.address >= 2**63 else s.address for s in snaps],
        "requested_bytes": [s.requested_bytes for s in snaps],
        "allocation_bytes": [s.allocation_bytes for s in snaps],
        "bytes_allocated": [s.heap_allocated_bytes for s in snaps],
        "bytes_reserved": [s.stack_reserved_bytes for s in snaps],
        "bytes_available": [s.free_memory_bytes for s in snaps],
        "peak_bytes_in_use": [s.peak_bytes_in_use for s in snaps],
        "fragmentation": [
            s.fragmentation if np.isfinite(s.fragmentation) else pd.NA for s in snaps
        ],
        "tf_op": [s.tf_op_name or None for s in snaps],
        "region_type": [s.region_type or None for s in snaps],
        "data_type": [c if c is not None else pd.NA for c in codes],
        "shape": [s.tensor_shape or None for s in snaps],
        "step_id": [s.step_id for s in snaps],
    }


def _frame(rows: list[tuple[str, Snapshot]]) -> pd.DataFrame:
    if not rows:
        return empty_frame(EVENT_COLUMNS)
    columns = _columns(rows)
    events = pd.DataFrame({name: columns[name] for name in EVENT_COLUMNS})
    events = events.sort_values("time_ps", kind="stable").reset_index(drop=True)
    return events.astype(EVENT_COLUMNS)
