"""A deliberately plain reference decoder for memory events, used to check the
fast decoder: walks every event with ordinary protobuf objects, no numpy."""

from __future__ import annotations

from typing import Any

ALLOCATION, DEALLOCATION = "MemoryAllocation", "MemoryDeallocation"


def stat_value(plane: Any, stat: Any) -> Any:
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return plane.stat_metadata[value].name
    if kind == "bytes_value":
        return value.decode("utf-8", "replace")
    return value


def memory_events(space: Any) -> list[dict[str, Any]]:
    """Every memory event of an XSpace as a dict of its stats, in time order."""
    start_ns = None
    for plane in space.planes:
        if plane.name == "Task Environment":
            for stat in plane.stats:
                if plane.stat_metadata[stat.metadata_id].name == "profile_start_time":
                    start_ns = stat_value(plane, stat)
    out = []
    for plane_index, plane in enumerate(space.planes):
        for line_index, line in enumerate(plane.lines):
            line_ns = line.timestamp_ns
            if start_ns and line_ns >= start_ns // 2:
                line_ns -= start_ns
            for event_index, event in enumerate(line.events):
                name = plane.event_metadata[event.metadata_id].name
                if name not in (ALLOCATION, DEALLOCATION):
                    continue
                row: dict[str, Any] = {
                    "is_allocation": name == ALLOCATION,
                    "time_ps": line_ns * 1000 + event.offset_ps,
                    "_key": (plane_index, line_index, event_index),
                }
                for stat in event.stats:
                    row[plane.stat_metadata[stat.metadata_id].name] = stat_value(plane, stat)
                out.append(row)
    out.sort(key=lambda r: (r["time_ps"], r["_key"]))
    return out


def replay(events: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per allocator: allocation count, bytes allocated, frees, frees without allocation."""
    result: dict[str, dict[str, int]] = {}
    live: dict[tuple[str, int], int] = {}
    for event in events:
        allocator = event.get("allocator_name")
        totals = result.setdefault(
            allocator, {"allocations": 0, "allocated_bytes": 0, "frees": 0, "orphan_frees": 0}
        )
        key = (allocator, event.get("addr"))
        if event["is_allocation"]:
            totals["allocations"] += 1
            totals["allocated_bytes"] += event.get("allocation_bytes", 0)
            live[key] = event.get("allocation_bytes", 0)
        elif key in live:
            totals["frees"] += 1
            del live[key]
        else:
            totals["orphan_frees"] += 1
    return result
