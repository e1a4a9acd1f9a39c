"""Decode an ``XSpace`` (``*.xplane.pb``) into a ``MemoryTrace``: the hot path.

upb parses the file with the lean ``xplane_skim`` schema, which leaves each
event as raw bytes. Per line, every event's metadata id is read at once with
numpy (``wire.leading_varints``); only memory events, TF op events and step
markers are decoded further, again column-wise. No Python object is built for
the events that are skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError, Message

from traceparse import wire
from traceparse._proto import xplane_skim_pb2
from traceparse.discover import MAX_PROTOBUF_BYTES
from traceparse.errors import CaptureTooLargeError, CorruptCaptureError
from traceparse.trace import (
    EVENT_COLUMNS,
    OP_TIME_COLUMNS,
    STEP_MARKER_COLUMNS,
    MemoryTrace,
    empty_frame,
)

# protobuf cannot parse a message of 2 GiB or more.
MAX_XSPACE_BYTES = MAX_PROTOBUF_BYTES
# Values no real capture holds (docs/robustness.md). A byte count below 0 or
# above 256 TiB (no allocator manages that much) is read as unknown. An event
# more than 2**62 ps (53 days) from the capture start is skipped: times stay
# far enough inside int64 that sums and differences of them cannot overflow.
MAX_BYTES = 2**48
MAX_TIME_PS = 2**62
BYTE_STATS = (
    "requested_bytes",
    "allocation_bytes",
    "bytes_allocated",
    "bytes_reserved",
    "bytes_available",
    "peak_bytes_in_use",
)
# A host has a few allocators per device (GPU_0_bfc, gpu_host_bfc, ...): a few
# dozen on the largest. A file naming more is damaged or made up, and every
# analysis and report section costs time per allocator, so it is refused.
MAX_ALLOCATORS = 128
# A line timestamp is clamped to this before it becomes picoseconds, so the
# product fits in int64 (and a clamped line is out of range).
_MAX_LINE_NS = MAX_TIME_PS // 1000 + 1

_ALLOCATION, _DEALLOCATION = "MemoryAllocation", "MemoryDeallocation"
# Host events of TF ops are named "<op name>:<op type>".
_EAGER_PREFIX = "EagerLocalExecute: "
_PLANE_LINES = 3  # XPlane.lines
# Events decoded per slice of a line: bounds the Python objects alive at once.
_EVENTS_PER_SLICE = 1 << 16
# Memory events decoded with their stats at once: bounds the temporaries.
_EVENTS_PER_BATCH = 1 << 13
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
        planes = _split_planes(memoryview(data))
        if not planes:
            raise CorruptCaptureError(
                f"{path}: no profiler planes in this file, so it is not a profiler capture; "
                "point traceparse at the .xplane.pb files that tf.profiler writes",
                path,
            )
        return _Decoder(planes, path, host).run()
    except (DecodeError, wire.WireError) as exc:
        raise CorruptCaptureError(
            f"{path}: not a readable XSpace (truncated or corrupt: {exc}); "
            "copy the file again or capture the profile again",
            path,
        ) from exc


_Message = TypeVar("_Message", bound=Message)


def _merge(message: _Message, data: memoryview) -> _Message:
    """Parse a slice of the file into ``message`` (upb reads any buffer; the
    stubs only admit bytes)."""
    message.MergeFromString(data)  # type: ignore[arg-type]
    return message


@dataclass
class _Plane:
    """A plane's metadata, parsed, and its lines, left as bytes until read."""

    meta: xplane_skim_pb2.SkimPlane
    line_bytes: list[memoryview]

    def lines(self) -> Iterator[xplane_skim_pb2.SkimLine]:
        """Each line parsed in turn, so one line's events are in memory at a time."""
        for raw in self.line_bytes:
            yield _merge(xplane_skim_pb2.SkimLine(), raw)
        yield from self.meta.lines  # lines written after the metadata (unusual)


def _split_planes(data: memoryview) -> list[_Plane]:
    """Find the planes and their lines without parsing the lines.

    Serializers write a plane's id and name, then its lines, then the metadata
    maps. The walk over a plane's fields stops at the first field numbered past
    the lines, and upb parses from there to the end in one go (lines found
    there, in an unusual file, are parsed with it).
    """
    planes = []
    for number, _, end, start in wire.iter_fields(data, 0, len(data)):
        if number != 1:  # XSpace.planes; errors, warnings and hostnames are not needed
            continue
        meta = xplane_skim_pb2.SkimPlane()
        lines: list[memoryview] = []
        rest = start
        for field, field_start, field_end, value in wire.iter_fields(data, start, end):
            rest = field_end
            if field == _PLANE_LINES:
                lines.append(data[value:field_end])
            elif field > _PLANE_LINES:
                rest = field_start
                break
            else:
                _merge(meta, data[field_start:field_end])  # id, name
        _merge(meta, data[rest:end])
        planes.append(_Plane(meta, lines))
    return planes


@dataclass
class _Selected:
    """Events picked from one plane, with the facts known before decoding them."""

    chunks: list[bytes]
    metadata_ids: np.ndarray
    line_ts_ns: np.ndarray
    order: np.ndarray  # (line index, event index) folded into one sortable key

    def batches(self, size: int) -> Iterator[_Selected]:
        for lo in range(0, len(self.chunks), size):
            hi = lo + size
            yield _Selected(
                self.chunks[lo:hi],
                self.metadata_ids[lo:hi],
                self.line_ts_ns[lo:hi],
                self.order[lo:hi],
            )


class _Decoder:
    def __init__(self, planes: list[_Plane], path: str, host: str) -> None:
        self.planes = planes
        self.path = path
        self.host = host
        self.start_ns, self.stop_ns = _capture_window([p.meta for p in planes])
        self.diagnostics: list[str] = []
        # (stat, problem) -> memory events with it; said once per kind at the end.
        self.problems: Counter[tuple[str, str]] = Counter()

    def run(self) -> MemoryTrace:
        events: list[pd.DataFrame] = []
        markers: list[pd.DataFrame] = []
        op_time: list[pd.DataFrame] = []
        op_types: dict[str, str] = {}
        for plane_index, parts in enumerate(self.planes):
            plane = parts.meta
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
            memory = np.fromiter(memory_ids, dtype=np.uint64)
            ops = np.fromiter(op_ids, dtype=np.uint64)
            detailed, timing = _select(parts.lines(), memory, ops, step_stat_ids, self._relative_ns)
            alloc_ids = np.fromiter(
                (k for k in memory_ids if names[k] == _ALLOCATION), dtype=np.uint64
            )
            # In batches: the column-wise decode makes temporaries per field.
            for batch in detailed.batches(_EVENTS_PER_BATCH):
                decoded = _DecodedEvents(batch, stat_names)
                mids = batch.metadata_ids
                is_mem = np.isin(mids, memory)
                if is_mem.any():
                    frame = decoded.memory_frame(
                        is_mem, np.isin(mids, alloc_ids), _text(plane.name), self.problems
                    )
                    frame["_plane"] = plane_index
                    events.append(frame)
                if step_stat_ids:
                    markers.append(decoded.marker_frame(names, mids))
            if timing[0].size:
                op_time.append(_op_frame(*timing, op_ids))
        finished = _finish_events(events)
        check_allocators(finished, self.path)
        self.diagnostics.extend(checked_bytes(finished, self.path))
        self.diagnostics.extend(_problem_notes(self.problems, self.path))
        return MemoryTrace(
            path=self.path,
            host=self.host,
            format="xplane",
            events=finished,
            step_markers=_finish_markers(markers),
            op_types=op_types,
            op_time=_finish_op_time(op_time),
            start_ns=self.start_ns,
            duration_ps=None
            if self.start_ns is None or self.stop_ns is None or self.stop_ns < self.start_ns
            else min((self.stop_ns - self.start_ns) * 1000, MAX_TIME_PS),
            diagnostics=self.diagnostics,
        )

    def _relative_ns(self, timestamp_ns: int) -> int:
        # Host lines count from the capture start; device lines may carry
        # nanoseconds since the epoch. Put both on the capture's clock.
        if self.start_ns and timestamp_ns >= self.start_ns // 2:
            timestamp_ns -= self.start_ns
        return max(-_MAX_LINE_NS, min(timestamp_ns, _MAX_LINE_NS))


def _select(
    lines: Iterable[xplane_skim_pb2.SkimLine],
    memory: np.ndarray,
    ops: np.ndarray,
    step_stat_ids: list[int],
    relative_ns: Callable[[int], int],
) -> tuple[_Selected, tuple[np.ndarray, np.ndarray]]:
    """One pass over every line: picks memory events and step markers (decoded
    later with their stats) and sums the duration of TF op events per metadata
    id, without building a Python object per skipped event."""
    detailed = _Picker()
    op_ids: list[np.ndarray] = []
    op_durations: list[np.ndarray] = []
    # A step marker carries an integer stat whose metadata id is that of
    # "step_num". Serializers write an XStat's metadata_id first, so its bytes
    # read 0x08 <varint id> then an int tag (0x18 or 0x20). A regex with that
    # literal prefix scans fast; decoding the events confirms the candidates.
    patterns = [
        re.compile(re.escape(b"\x08" + _varint(sid)) + b"[\x18\x20]") for sid in step_stat_ids
    ]
    for line_index, line in enumerate(lines):
        stamp = relative_ns(line.timestamp_ns)
        # Slices of a line bound the memory held at once on huge lines.
        for first in range(0, len(line.events), _EVENTS_PER_SLICE):
            events = line.events[first : first + _EVENTS_PER_SLICE]
            joined = wire.join(events)
            (mids,) = wire.leading_varints(joined, (1,))
            keep = _member(mids, memory)
            hits = _find_all(joined.raw, patterns)
            if hits.size:
                keep[np.searchsorted(joined.ends, hits, side="right")] = True
            order_base = line_index * (1 << 32) + first
            detailed.add(events, mids, np.flatnonzero(keep), stamp, order_base)
            if ops.size:
                rows = np.flatnonzero(~keep & _member(mids, ops))
                if rows.size:
                    _, _, duration = wire.leading_varints(joined, (1, 2, 3), rows)
                    op_ids.append(mids[rows])
                    op_durations.append(duration.view(np.int64))
    empty = np.zeros(0, dtype=np.int64)
    timing = (
        (np.concatenate(op_ids), np.concatenate(op_durations))
        if op_ids
        else (empty.astype(np.uint64), empty)
    )
    return detailed.done(), timing


def _find_all(data: bytes, patterns: list[re.Pattern[bytes]]) -> np.ndarray:
    """Every position where any of the patterns matches."""
    found = [match.start() for pattern in patterns for match in pattern.finditer(data)]
    return np.array(found, dtype=np.int64)


def _member(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """np.isin for small non-negative ids: a lookup table instead of a sort."""
    if not wanted.size:
        return np.zeros(values.size, dtype=bool)
    top = int(wanted.max())
    if top > 16 * values.size + 1_000_000:
        return np.isin(values, wanted)
    table = np.zeros(top + 2, dtype=bool)
    table[wanted.astype(np.int64)] = True
    return table[np.minimum(values, top + 1).astype(np.int64)]


class _Picker:
    """Collects the chosen events of each line."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.ids: list[np.ndarray] = []
        self.stamps: list[np.ndarray] = []
        self.orders: list[np.ndarray] = []

    def add(
        self, events: list[bytes], mids: np.ndarray, rows: np.ndarray, stamp: int, base: int
    ) -> None:
        if not rows.size:
            return
        self.chunks.extend(map(events.__getitem__, rows.tolist()))
        self.ids.append(mids[rows])
        self.stamps.append(np.full(rows.size, stamp, dtype=np.int64))
        self.orders.append(base + rows)

    def done(self) -> _Selected:
        if not self.chunks:
            empty = np.zeros(0, dtype=np.int64)
            return _Selected([], empty.astype(np.uint64), empty, empty)
        return _Selected(
            self.chunks,
            np.concatenate(self.ids),
            np.concatenate(self.stamps),
            np.concatenate(self.orders),
        )


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
        line_ps = selected.line_ts_ns * 1000  # fits: line stamps are clamped
        # Both parts within 2**62, so their sum cannot overflow; then the sum too.
        self.in_range = _within(line_ps) & _within(offset)
        self.time_ps = line_ps + np.where(self.in_range, offset, 0)
        self.in_range &= _within(self.time_ps)
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
        is_value = np.zeros(len(stats.number), dtype=bool)
        for kind, wire_type in _VALUE_WIRE.items():
            is_value |= (stats.number == kind) & (stats.wire == wire_type)
        rows = np.flatnonzero(is_value)
        # Rows are in wire order, so a later oneof member overwrites an earlier one.
        owner = stats.message[rows]
        self.kind[owner] = stats.number[rows]
        self.value[owner] = stats.value[rows]
        self.start[owner] = stats.start[rows]
        self.length[owner] = stats.length[rows]
        self._rows: dict[str, np.ndarray] = {}

    def _stat_rows(self, name: str) -> np.ndarray:
        # Each stat is asked for more than once (its value, then whether it had one).
        if name not in self._rows:
            ids = [k for k, n in self.stat_names.items() if n == name]
            self._rows[name] = np.flatnonzero(np.isin(self.stat_id, ids) & (self.kind > 0))
        return self._rows[name]

    def int_stat(self, name: str) -> pd.arrays.IntegerArray:
        """A stat as Int64 per event (NA where absent or not numeric)."""
        values = np.zeros(self.count, dtype=np.int64)
        present = np.zeros(self.count, dtype=bool)
        rows = self._stat_rows(name)
        kind = self.kind[rows]
        raw = self.value[rows]
        numbers = raw.view(np.int64).copy()
        doubles = raw.view(np.float64)
        # A count written as a double is used when it is a whole number within int64.
        finite = (kind == _DOUBLE) & np.isfinite(doubles) & (np.abs(doubles) < 2.0**63)
        finite[finite] = doubles[finite] == np.trunc(doubles[finite])
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

    def str_stat(self, name: str) -> pd.Categorical:
        """A stat as text per event (NA where absent or not text); refs resolve to names."""
        out = np.full(self.count, None, dtype=object)
        rows = self._stat_rows(name)
        # Refs (how TensorFlow writes repeated strings) resolve once per distinct id.
        refs = rows[self.kind[rows] == _REF]
        if refs.size:
            ids, inverse = np.unique(self.value[refs], return_inverse=True)
            names = np.array([self.stat_names.get(int(i)) for i in ids], dtype=object)
            out[self.stat_event[refs]] = names[inverse]
        # A number where text belongs is the wrong type: it stays NA.
        for row in rows[np.isin(self.kind[rows], (_STR, _BYTES))]:
            start = self.start[row]
            out[self.stat_event[row]] = _text(self.raw[start : start + self.length[row]])
        return pd.Categorical(out)

    def present(self, name: str) -> np.ndarray:
        """Per event: whether it carries the stat at all (with any value)."""
        out = np.zeros(self.count, dtype=bool)
        out[self.stat_event[self._stat_rows(name)]] = True
        return out

    def memory_frame(
        self,
        rows: np.ndarray,
        is_alloc: np.ndarray,
        plane: str,
        problems: Counter[tuple[str, str]],
    ) -> pd.DataFrame:
        """The memory events among ``rows`` (a mask). A stat of the wrong type is NA,
        and an event out of time range is dropped; ``problems`` counts both."""
        columns: dict[str, object] = {
            "plane": pd.Categorical.from_codes(np.zeros(self.count, dtype=np.int8), [plane]),
            "is_allocation": is_alloc,
            "time_ps": self.time_ps,
        }
        for stat, column in _INT_STATS.items():
            columns[column] = self.int_stat(stat)
        columns["fragmentation"] = self.float_stat("fragmentation")
        for stat, column in _STR_STATS.items():
            columns[column] = self.str_stat(stat)
        for stat, column in [*_INT_STATS.items(), *_STR_STATS.items()]:
            values = columns[column]
            assert isinstance(values, pd.arrays.IntegerArray | pd.Categorical)
            wrong = rows & self.present(stat) & np.asarray(values.isna())
            if wrong.any():
                problems[stat, "type"] += int(wrong.sum())
        wrong = (
            rows & self.present("fragmentation") & ~np.isin(self._kind("fragmentation"), _NUMBERS)
        )
        if wrong.any():
            problems["fragmentation", "type"] += int(wrong.sum())
        if not self.in_range[rows].all():
            problems["time", "range"] += int((rows & ~self.in_range).sum())
            rows = rows & self.in_range
        allocator = columns["allocator"]
        assert isinstance(allocator, pd.Categorical)
        missing = np.asarray(allocator.isna())
        if missing.any():
            # TPU memory events name no allocator; xprof uses the device index.
            names = np.asarray(allocator, dtype=object)
            for stat in ("index_on_host", "device_ordinal"):
                index = self.int_stat(stat)
                fill = missing & ~np.asarray(index.isna())
                names[fill] = [str(v) for v in np.asarray(index[fill], dtype=np.int64)]
                missing &= ~fill
            columns["allocator"] = pd.Categorical(names)
        frame = pd.DataFrame(columns)
        frame["_order"] = self.order
        return frame.loc[rows].reset_index(drop=True)

    def _kind(self, name: str) -> np.ndarray:
        """Per event: the value kind of the stat (0 where absent; the last one wins)."""
        out = np.zeros(self.count, dtype=np.int8)
        rows = self._stat_rows(name)
        out[self.stat_event[rows]] = self.kind[rows]
        return out

    def marker_frame(self, names: dict[int, str], mids: np.ndarray) -> pd.DataFrame:
        # Trace(name, step_num=n, _r=1) marks a root event; Keras' callback writes
        # "Profiled batch" events with step_num only. Prefer roots when there are any.
        # A marker out of time range, or lasting less than nothing, is left out.
        has_step = ~np.asarray(self.int_stat("step_num").isna())
        has_step &= self.in_range & (self.duration_ps >= 0) & _within(self.duration_ps)
        has_step &= _within(self.time_ps + np.where(has_step, self.duration_ps, 0))
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


def _within(values: np.ndarray) -> np.ndarray:
    """Whether each int64 lies strictly between -MAX_TIME_PS and MAX_TIME_PS."""
    return (values > -MAX_TIME_PS) & (values < MAX_TIME_PS)


_NUMBERS = (_DOUBLE, _UINT64, _INT64)
_EXPECTED = {
    **dict.fromkeys(_INT_STATS, "a whole number"),
    **dict.fromkeys(_STR_STATS, "text"),
    "fragmentation": "a number",
}


def check_allocators(events: pd.DataFrame, path: str) -> None:
    """Raise ``CaptureTooLargeError`` when ``events`` name more than MAX_ALLOCATORS
    allocators. Shared with the pre-converted profile reader."""
    count = events["allocator"].nunique(dropna=False)
    if count > MAX_ALLOCATORS:
        raise CaptureTooLargeError(
            f"{path}: the memory events name {count} allocators, more than the "
            f"{MAX_ALLOCATORS} traceparse reads from one capture (a host has a few per "
            "device); the file is damaged or not a profiler capture",
            path,
        )


def checked_bytes(events: pd.DataFrame, path: str) -> list[str]:
    """Set the byte counts of ``events`` outside 0..MAX_BYTES to NA, in place; a
    sentence per stat that had any. Shared with the pre-converted profile reader."""
    notes: list[str] = []
    for column in BYTE_STATS:
        values = events[column]
        bad = ((values < 0) | (values > MAX_BYTES)).fillna(False).to_numpy(dtype=bool)
        if bad.any():
            events.loc[bad, column] = pd.NA
            notes.append(
                f"{path}: {int(bad.sum())} memory events carry {column} below 0 or above "
                f"{MAX_BYTES // 2**40} TiB, which no allocator reports; it is read as unknown."
            )
    return notes


def _problem_notes(problems: Counter[tuple[str, str]], path: str) -> list[str]:
    notes: list[str] = []
    for (stat, problem), count in sorted(problems.items()):
        if problem == "range":
            notes.append(
                f"{path}: {count} memory events lie more than {MAX_TIME_PS / 1e12 / 86400:.0f} "
                "days from the capture start (corrupt timestamps) and were skipped."
            )
        else:
            notes.append(
                f"{path}: {count} memory events carry a {stat} stat that is not "
                f"{_EXPECTED[stat]} (or names nothing); it is read as unknown."
            )
    return notes


def _op_frame(ids: np.ndarray, durations: np.ndarray, op_ids: dict[int, str]) -> pd.DataFrame:
    """Count and total duration per op, from its events' metadata ids."""
    unique, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    total = np.zeros(unique.size, dtype=np.int64)
    np.add.at(total, inverse, durations)  # exact int64 sums
    return pd.DataFrame(
        {
            "op": [op_ids[int(i)] for i in unique],
            "count": counts.astype(np.int64),
            "total_ps": total,
        }
    )


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


def _capture_window(planes: list[xplane_skim_pb2.SkimPlane]) -> tuple[int | None, int | None]:
    """profile_start_time / profile_stop_time (ns since epoch) from 'Task Environment'."""
    for plane in planes:
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
