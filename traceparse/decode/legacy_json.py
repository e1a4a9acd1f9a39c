"""The older ``memory_profile.json.gz`` files read straight from ``json.loads``:
no protobuf message per value.

protobuf's ``json_format`` builds a message per snapshot in pure Python: 50 MB
of JSON took 42 s and 1 GB of memory (issue 37, item 5). Here each snapshot's
fields are read off the parsed JSON into one tuple (``Snapshot``), with the
rules ``json_format`` applies to these fields: a field by its JSON name or its
proto name, 64-bit integers as numbers or decimal strings, doubles also as
"NaN"/"Infinity"/"-Infinity", enums by name or number (an unknown name is
ignored, as ``ignore_unknown_fields`` does), ``null`` as the default, unknown
fields ignored. A value of the wrong type or out of range raises ``LegacyError``.
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_INT32 = (-(2**31), 2**31 - 1)
_ACTIVITIES = {
    "UNKNOWN_ACTIVITY": 0,
    "ALLOCATION": 1,
    "DEALLOCATION": 2,
    "RESERVATION": 3,
    "EXPANSION": 4,
}
_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class LegacyError(ValueError):
    """The JSON is not a MemoryProfile."""


class Snapshot(NamedTuple):
    """The fields of a MemoryProfileSnapshot the decoder uses."""

    time_offset_ps: int
    memory_activity: int
    requested_bytes: int
    allocation_bytes: int
    address: int
    tf_op_name: str
    step_id: int
    region_type: str
    data_type: str
    tensor_shape: str
    stack_reserved_bytes: int
    heap_allocated_bytes: int
    free_memory_bytes: int
    fragmentation: float
    peak_bytes_in_use: int


class Profile(NamedTuple):
    """Per allocator, (sampled timeline snapshots, detailed snapshots); the host
    count and memory ids (to tell an empty profile from something else)."""

    allocators: dict[str, tuple[list[Snapshot], list[Snapshot]]]
    num_hosts: int
    memory_ids: int


def _get(obj: dict[str, Any], json_name: str, proto_name: str) -> Any:
    if json_name in obj:
        if proto_name != json_name and proto_name in obj:
            raise LegacyError(f"field {proto_name} given twice")
        return obj[json_name]
    return obj.get(proto_name)


def _int(value: Any, name: str, bounds: tuple[int, int] = _INT64) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise LegacyError(f"{name}: not an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise LegacyError(f"{name}: not an integer")
        number = int(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.isascii() and value.lstrip("-").isdigit():
        number = int(value)
    else:
        raise LegacyError(f"{name}: not an integer")
    if not bounds[0] <= number <= bounds[1]:
        raise LegacyError(f"{name}: {number} is out of range")
    return number


def _float(value: Any, name: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        raise LegacyError(f"{name}: not a number")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and value in _FLOAT_WORDS:
        return _FLOAT_WORDS[value]
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise LegacyError(f"{name}: not a number") from None
    else:
        raise LegacyError(f"{name}: not a number")
    if math.isinf(number) and not (isinstance(value, str) and value in _FLOAT_WORDS):
        raise LegacyError(f"{name}: out of range")
    return number


def _str(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise LegacyError(f"{name}: not a string")
    return value


def _object(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise LegacyError(f"{name}: not an object")
    return value


def _list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise LegacyError(f"{name}: not a list")
    return value


def _activity(value: Any) -> int:
    if isinstance(value, str):
        return _ACTIVITIES.get(value, 0)  # an unknown name is ignored
    return _int(value, "memoryActivity", _INT32)


def _snapshot(raw: Any) -> Snapshot:
    obj = _object(raw, "snapshot")
    stats = _object(_get(obj, "aggregationStats", "aggregation_stats"), "aggregationStats")
    meta = _object(_get(obj, "activityMetadata", "activity_metadata"), "activityMetadata")
    return Snapshot(
        time_offset_ps=_int(_get(obj, "timeOffsetPs", "time_offset_ps"), "timeOffsetPs"),
        memory_activity=_activity(_get(meta, "memoryActivity", "memory_activity")),
        requested_bytes=_int(_get(meta, "requestedBytes", "requested_bytes"), "requestedBytes"),
        allocation_bytes=_int(_get(meta, "allocationBytes", "allocation_bytes"), "allocationBytes"),
        address=_int(_get(meta, "address", "address"), "address", _UINT64),
        tf_op_name=_str(_get(meta, "tfOpName", "tf_op_name"), "tfOpName"),
        step_id=_int(_get(meta, "stepId", "step_id"), "stepId"),
        region_type=_str(_get(meta, "regionType", "region_type"), "regionType"),
        data_type=_str(_get(meta, "dataType", "data_type"), "dataType"),
        tensor_shape=_str(_get(meta, "tensorShape", "tensor_shape"), "tensorShape"),
        stack_reserved_bytes=_int(
            _get(stats, "stackReservedBytes", "stack_reserved_bytes"), "stackReservedBytes"
        ),
        heap_allocated_bytes=_int(
            _get(stats, "heapAllocatedBytes", "heap_allocated_bytes"), "heapAllocatedBytes"
        ),
        free_memory_bytes=_int(
            _get(stats, "freeMemoryBytes", "free_memory_bytes"), "freeMemoryBytes"
        ),
        fragmentation=_float(_get(stats, "fragmentation", "fragmentation"), "fragmentation"),
        peak_bytes_in_use=_int(
            _get(stats, "peakBytesInUse", "peak_bytes_in_use"), "peakBytesInUse"
        ),
    )


def read_json(data: bytes) -> Profile:
    """The snapshots of a memory_profile JSON document (UTF-8). Raises
    ``LegacyError`` (or ``ValueError``/``RecursionError`` from decoding and
    ``json.loads``) for anything else."""
    top = _object(json.loads(data.decode("utf-8")), "the document")
    per = _object(
        _get(top, "memoryProfilePerAllocator", "memory_profile_per_allocator"),
        "memoryProfilePerAllocator",
    )
    allocators = {}
    for name in list(per):
        body = _object(per.pop(name), name)  # each allocator's JSON goes once read
        timeline = _list(
            _get(body, "sampledTimelineSnapshots", "sampled_timeline_snapshots"),
            "sampledTimelineSnapshots",
        )
        detailed = _list(
            _get(body, "memoryProfileSnapshots", "memory_profile_snapshots"),
            "memoryProfileSnapshots",
        )
        allocators[name] = ([_snapshot(s) for s in timeline], [_snapshot(s) for s in detailed])
    ids = _list(_get(top, "memoryIds", "memory_ids"), "memoryIds")
    for value in ids:
        _str(value, "memoryIds")
    hosts = _int(_get(top, "numHosts", "num_hosts"), "numHosts", _INT32)
    return Profile(allocators, hosts, len(ids))
