"""Decode an ``XSpace`` (``*.xplane.pb``) into a ``MemoryTrace``: the hot path.

upb parses the file with the lean ``xplane_skim`` schema, which leaves each
event as raw bytes. Per line, every event's metadata id is read at once with
numpy (``wire.leading_varint``); only memory events, TF op events and step
markers are decoded further, again column-wise. No Python object is built for
the events that are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from traceparse import wire
from traceparse._proto import xplane_skim_pb2
from traceparse.errors import CaptureTooLargeError, CorruptCaptureError
from traceparse.trace import (
    EVENT_COLUMNS,
    OP_TIME_COLUMNS,
    STEP_MARKER_COLUMNS,
    MemoryTrace,
    empty_frame,
)

# protobuf cannot parse a message of 2 GiB or more.
MAX_XSPACE_BYTES = 2**31 - 1

_ALLOCATION, _DEALLOCATION = "MemoryAllocation", "MemoryDeallocation"
# Host events of TF ops are named "<op name>:<op type>".
_EAGER_PREFIX = "EagerLocalExecute: "
_OP_EVENT = re.compile(r"^([A-Za-z0-9._][\w.\-/>]*):([A-Za-z_]\w*)$")
_INT_STATS = {
    "addr": "address",
    "requested_bytes": "requested_bytes",
    "allocation_bytes": "allocation_bytes",
    "bytes_allocated": "bytes_allocated",
    "bytes_reserved": "bytes_reserved",
    "bytes_available": "bytes_available",
    "peak_bytes_in_use": "peak_bytes_in_use",
    "data_type": "data_type",
    "id": "step_id",
}
_STR_STATS = {
    "allocator_name": "allocator",
    "tf_op": "tf_op",
    "region_type": "region_type",
    "shape": "shape",
}
# Stat value kinds: the XStat oneof field numbers.
_DOUBLE, _UINT64, _INT64, _STR, _BYTES, _REF = 2, 3, 4, 5, 6, 7
_VALUE_WIRE = {_DOUBLE: 1, _UINT64: 0, _INT64: 0, _STR: 2, _BYTES: 2, _REF: 0}


def decode_xspace(data: bytes, *, path: str, host: str) -> MemoryTrace:
    """Decode one host's XSpace bytes. Raises ``CorruptCaptureError`` for bad bytes."""
    if len(data) > MAX_XSPACE_BYTES:
        raise CaptureTooLargeError(
            f"{path}: {len(data) / 2**30:.1f} GiB is past protobuf's 2 GiB message limit; "
            "capture fewer steps (shorter profiling window) and analyse those",
            path,
        )
    if not data:
        raise CorruptCaptureError(f"{path}: the file is empty; capture the profile again", path)
    try:
        space = xplane_skim_pb2.SkimSpace.FromString(data)
    except DecodeError as exc:
        raise CorruptCaptureError(
            f"{path}: not a readable XSpace (truncated or corrupt: {exc}); "
            "copy the file again or capture the profile again",
            path,
        ) from exc
    if not space.planes:
        raise CorruptCaptureError(
            f"{path}: no profiler planes in this file, so it is not a profiler capture; "
            "point traceparse at the .xplane.pb files that tf.profiler writes",
            path,
        )
    try:
        return _Decoder(space, path, host).run()
    except wire.WireError as exc:
        raise CorruptCaptureError(
            f"{path}: malformed event data ({exc}); the file is corrupt, capture it again",
            path,
        ) from exc


@dataclass
class _Selected:
    """Events picked from one plane, with the facts known before decoding them."""

    chunks: list[bytes]
    metadata_ids: np.ndarray
    line_ts_ns: np.ndarray
    order: np.ndarray  # (line index, event index) folded into one sortable key


class _Decoder:
    def __init__(self, space: xplane_skim_pb2.SkimSpace, path: str, host: str) -> None:
        self.space = space
        self.path = path
        self.host = host
        self.start_ns, self.stop_ns = _capture_window(space)
        self.diagnostics: list[str] = []

    def run(self) -> MemoryTrace:
        events: list[pd.DataFrame] = []
        markers: list[pd.DataFrame] = []
        op_time: list[pd.DataFrame] = []
        op_types: dict[str, str] = {}
        for plane_index, plane in enumerate(self.space.planes):
            names = {key: _text(meta.name) for key, meta in plane.event_metadata.items()}
            stat_names = {key: _text(meta.name) for key, meta in plane.stat_metadata.items()}
            memory_ids = {k for k, n in names.items() if n in (_ALLOCATION, _DEALLOCATION)}
            is_host = _text(plane.name).startswith("/host:")
            op_ids: dict[int, str] = {}
            if is_host:
                for key, name in names.items():
                    match = _OP_EVENT.match(name)
                    if match:
                        op_ids[key] = match.group(1)
                        op_types.setdefault(match.group(1), match.group(2))
                    elif name.startswith(_EAGER_PREFIX):
                        # An eager op is named after its type ("Fill").
                        op_type = name[len(_EAGER_PREFIX) :]
                        op_types.setdefault(op_type, op_type)
            step_stat_ids = [k for k, n in stat_names.items() if n == "step_num"] if is_host else []
            wanted = np.fromiter(memory_ids | op_ids.keys(), dtype=np.uint64)
            selected = _select(plane.lines, wanted, step_stat_ids, self._relative_ns)
            if not selected.chunks:
                continue
            decoded = _decode_events(selected, stat_names)
            mids = selected.metadata_ids
            plane_name = _text(plane.name)
            is_mem = np.isin(mids, np.fromiter(memory_ids, dtype=np.uint64))
            if is_mem.any():
                alloc_ids = np.fromiter(
                    (k for k in memory_ids if names[k] == _ALLOCATION), dtype=np.uint64
                )
                frame = decoded.memory_frame(is_mem, np.isin(mids, alloc_ids), plane_name)
                frame["_plane"] = plane_index
                events.append(frame)
            if op_ids:
                op_time.append(decoded.op_frame(mids, op_ids))
            if step_stat_ids:
                markers.append(decoded.marker_frame(names, mids))
        return MemoryTrace(
            path=self.path,
            host=self.host,
            format="xplane",
            events=_finish_events(events),
            step_markers=_finish_markers(markers),
            op_types=op_types,
            op_time=_finish_op_time(op_time),
            start_ns=self.start_ns,
            duration_ps=None
            if self.start_ns is None or self.stop_ns is None
            else (self.stop_ns - self.start_ns) * 1000,
            diagnostics=self.diagnostics,
        )

    def _relative_ns(self, timestamp_ns: int) -> int:
        # Host lines count from the capture start; device lines may carry
        # nanoseconds since the epoch. Put both on the capture's clock.
        if self.start_ns and timestamp_ns >= self.start_ns // 2:
            return timestamp_ns - self.start_ns
        return timestamp_ns


def _select(
    lines: Iterable[xplane_skim_pb2.SkimLine],
    wanted: np.ndarray,
    step_stat_ids: list[int],
    relative_ns: object,
) -> _Selected:
    """Pick the events worth decoding from every line, without decoding the rest."""
    chunks: list[bytes] = []
    ids: list[np.ndarray] = []
    stamps: list[np.ndarray] = []
    orders: list[np.ndarray] = []
    # A step marker carries a stat whose metadata id is that of "step_num"; every
    # serializer writes an XStat's metadata_id first, so its bytes contain
    # 0x08 <varint id>. Byte search finds candidates; decoding confirms them.
    patterns = [re.compile(re.escape(b"\x08" + _varint(sid))) for sid in step_stat_ids]
    for line_index, line in enumerate(lines):
        events = list(line.events)
        if not events:
            continue
        joined = wire.join(events)
        mids = wire.leading_varint(joined, 1)
        keep = np.isin(mids, wanted)
        for pattern in patterns:
            hits = np.fromiter((m.start() for m in pattern.finditer(joined.raw)), dtype=np.int64)
            if hits.size:
                keep[np.searchsorted(joined.ends, hits, side="right")] = True
        rows = np.flatnonzero(keep)
        if not rows.size:
            continue
        chunks.extend(events[i] for i in rows)
        ids.append(mids[rows])
        stamps.append(np.full(rows.size, relative_ns(line.timestamp_ns), dtype=np.int64))  # type: ignore[operator]
        orders.append(line_index * (1 << 32) + rows)
    if not chunks:
        empty = np.zeros(0, dtype=np.int64)
        return _Selected([], empty.astype(np.uint64), empty, empty)
    return _Selected(chunks, np.concatenate(ids), np.concatenate(stamps), np.concatenate(orders))


class _DecodedEvents:
    """The fields and stats of the selected events, as columns."""

    def __init__(self, selected: _Selected, stat_names: dict[int, str]) -> None:
        joined = wire.join(selected.chunks)
        self.raw = joined.raw
        self.count = len(joined)
        self.stat_names = stat_names
        fields = wire.scan_fields(joined.buf, joined.starts, joined.ends)
        offset = fields.last_value(2, 0, self.count).view(np.int64)
        self.duration_ps = fields.last_value(3, 0, self.count).view(np.int64)
        self.time_ps = selected.line_ts_ns * 1000 + offset
        self.order = selected.order
        stat_rows = fields.select(4, 2)
        self.stat_event = fields.message[stat_rows]
        payload = fields.start[stat_rows]
        stats = wire.scan_fields(joined.buf, payload, payload + fields.length[stat_rows])
        n = len(stat_rows)
        self.stat_id = stats.last_value(1, 0, n).view(np.int64)
        self.kind = np.zeros(n, dtype=np.int8)
        self.value = np.zeros(n, dtype=np.uint64)
        self.start = np.zeros(n, dtype=np.int64)
        self.length = np.zeros(n, dtype=np.int64)
        for kind, wire_type in _VALUE_WIRE.items():
            rows = stats.select(kind, wire_type)
            # Rows are in wire order, so a later oneof member overwrites an earlier one.
            owner = stats.message[rows]
            self.kind[owner] = kind
            self.value[owner] = stats.value[rows]
            self.start[owner] = stats.start[rows]
            self.length[owner] = stats.length[rows]

    def _stat_rows(self, name: str) -> np.ndarray:
        ids = [k for k, n in self.stat_names.items() if n == name]
        return np.flatnonzero(np.isin(self.stat_id, ids) & (self.kind > 0))

    def int_stat(self, name: str) -> pd.arrays.IntegerArray:
        """A stat as Int64 per event (NA where absent or not numeric)."""
        values = np.zeros(self.count, dtype=np.int64)
        present = np.zeros(self.count, dtype=bool)
        rows = self._stat_rows(name)
        kind = self.kind[rows]
        raw = self.value[rows]
        numbers = raw.view(np.int64).copy()
        doubles = raw.view(np.float64)
        # A count written as a double is used when it is a finite int64.
        finite = (kind == _DOUBLE) & np.isfinite(doubles) & (np.abs(doubles) < 2.0**63)
        numbers[finite] = doubles[finite].astype(np.int64)
        ok = np.isin(kind, (_UINT64, _INT64)) | finite
        values[self.stat_event[rows[ok]]] = numbers[ok]
        present[self.stat_event[rows[ok]]] = True
        return pd.arrays.IntegerArray(values, ~present)

    def float_stat(self, name: str) -> pd.arrays.FloatingArray:
        values = np.full(self.count, np.nan)
        rows = self._stat_rows(name)
        kind = self.kind[rows]
        raw = self.value[rows]
        numbers = np.where(
            kind == _DOUBLE,
            raw.view(np.float64),
            np.where(kind == _INT64, raw.view(np.int64), raw).astype(np.float64),
        )
        # xprof writes NaN fragmentation when nothing is free: that is "unknown".
        ok = np.isin(kind, (_DOUBLE, _UINT64, _INT64)) & np.isfinite(numbers)
        values[self.stat_event[rows[ok]]] = numbers[ok]
        present = np.zeros(self.count, dtype=bool)
        present[self.stat_event[rows[ok]]] = True
        return pd.arrays.FloatingArray(np.nan_to_num(values), ~present)

    def str_stat(self, name: str) -> np.ndarray:
        """A stat as text per event (None where absent); refs resolve to names."""
        out = np.full(self.count, None, dtype=object)
        for row in self._stat_rows(name):
            kind = self.kind[row]
            if kind == _REF:
                text: str | None = self.stat_names.get(int(self.value[row]))
            elif kind in (_STR, _BYTES):
                text = _text(self.raw[self.start[row] : self.start[row] + self.length[row]])
            elif kind == _INT64:
                text = str(int(self.value[row].view(np.int64)))
            elif kind == _UINT64:
                text = str(int(self.value[row]))
            else:
                text = repr(float(self.value[row].view(np.float64)))
            out[self.stat_event[row]] = text
        return out

    def memory_frame(self, rows: np.ndarray, is_alloc: np.ndarray, plane: str) -> pd.DataFrame:
        columns: dict[str, object] = {
            "plane": np.full(self.count, plane, dtype=object),
            "is_allocation": is_alloc,
            "time_ps": self.time_ps,
        }
        for stat, column in _INT_STATS.items():
            columns[column] = self.int_stat(stat)
        columns["fragmentation"] = self.float_stat("fragmentation")
        for stat, column in _STR_STATS.items():
            columns[column] = self.str_stat(stat)
        allocator = columns["allocator"]
        assert isinstance(allocator, np.ndarray)
        missing = pd.isna(allocator)
        if missing.any():
            # TPU memory events name no allocator; xprof uses the device index.
            for stat in ("index_on_host", "device_ordinal"):
                index = self.int_stat(stat)
                fill = missing & ~np.asarray(index.isna())
                allocator[fill] = [str(v) for v in np.asarray(index[fill], dtype=np.int64)]
                missing &= ~fill
        frame = pd.DataFrame(columns)
        frame["_order"] = self.order
        return frame.loc[rows].reset_index(drop=True)

    def op_frame(self, mids: np.ndarray, op_ids: dict[int, str]) -> pd.DataFrame:
        keys = np.fromiter(op_ids.keys(), dtype=np.uint64)
        rows = np.flatnonzero(np.isin(mids, keys))
        frame = pd.DataFrame(
            {"op": [op_ids[int(m)] for m in mids[rows]], "total_ps": self.duration_ps[rows]}
        )
        grouped = frame.groupby("op", sort=False)["total_ps"]
        return pd.DataFrame({"count": grouped.size(), "total_ps": grouped.sum()}).reset_index()

    def marker_frame(self, names: dict[int, str], mids: np.ndarray) -> pd.DataFrame:
        # Trace(name, step_num=n, _r=1) marks a root event; Keras' callback writes
        # "Profiled batch" events with step_num only. Prefer roots when there are any.
        has_step = ~np.asarray(self.int_stat("step_num").isna())
        is_root = has_step & ~np.asarray(self.int_stat("_r").isna())
        rows = np.flatnonzero(is_root if is_root.any() else has_step)
        step = self.int_stat("step_num")
        return pd.DataFrame(
            {
                "name": [names.get(int(m), "") for m in mids[rows]],
                "step": np.asarray(step[rows], dtype=np.int64),
                "start_ps": self.time_ps[rows],
                "end_ps": self.time_ps[rows] + self.duration_ps[rows],
            }
        )


def _decode_events(selected: _Selected, stat_names: dict[int, str]) -> _DecodedEvents:
    return _DecodedEvents(selected, stat_names)


def _finish_events(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return empty_frame(EVENT_COLUMNS)
    events = pd.concat(frames, ignore_index=True)
    # Time order; ties keep the file's order (plane, line, position in line).
    events = events.sort_values(["time_ps", "_plane", "_order"], kind="stable")
    events = events.drop(columns=["_plane", "_order"]).reset_index(drop=True)
    return events.astype(EVENT_COLUMNS)


def _finish_markers(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return empty_frame(STEP_MARKER_COLUMNS)
    markers = pd.concat(frames, ignore_index=True).sort_values(["start_ps", "step"])
    return markers.reset_index(drop=True).astype(STEP_MARKER_COLUMNS)


def _finish_op_time(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return empty_frame(OP_TIME_COLUMNS)
    merged = pd.concat(frames, ignore_index=True).groupby("op", sort=True).sum()
    return merged.reset_index().astype(OP_TIME_COLUMNS)


def _capture_window(space: xplane_skim_pb2.SkimSpace) -> tuple[int | None, int | None]:
    """profile_start_time / profile_stop_time (ns since epoch) from 'Task Environment'."""
    for plane in space.planes:
        if _text(plane.name) != "Task Environment":
            continue
        names = {key: _text(meta.name) for key, meta in plane.stat_metadata.items()}
        found: dict[str, int] = {}
        for stat in plane.stats:
            name = names.get(stat.metadata_id)
            if name in ("profile_start_time", "profile_stop_time"):
                kind = stat.WhichOneof("value")
                if kind in ("uint64_value", "int64_value"):
                    found[name] = int(getattr(stat, kind))
        return found.get("profile_start_time"), found.get("profile_stop_time")
    return None, None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
