"""Find the planes, the lines and the events worth decoding, without parsing
the rest.

A plane's lines stay raw bytes until read, one line at a time; within a line,
upb hands over each event as bytes and numpy reads every event's metadata id at
once (``wire.leading_varints``). Only memory events and step markers are kept
for a full decode; TF op events give up just their duration.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from google.protobuf.message import Message

from traceparse import wire
from traceparse._proto import xplane_skim_pb2

_PLANE_LINES = 3  # XPlane.lines
_LINE_TIMESTAMP = 3  # XLine.timestamp_ns
# Events decoded per slice of a line: bounds the Python objects alive at once.
_EVENTS_PER_SLICE = 1 << 16


_Message = TypeVar("_Message", bound=Message)


def _merge(message: _Message, data: memoryview) -> _Message:
    """Parse a slice of the file into ``message`` (upb reads any buffer; the
    stubs only admit bytes)."""
    message.MergeFromString(data)  # type: ignore[arg-type]
    return message


@dataclass
class Plane:
    """A plane's metadata, parsed, and its lines, left as bytes until read."""

    meta: xplane_skim_pb2.SkimPlane
    line_bytes: list[memoryview]

    def lines(self) -> Iterator[xplane_skim_pb2.SkimLine]:
        """Each line parsed in turn, so one line's events are in memory at a time."""
        for raw in self.line_bytes:
            yield _merge(xplane_skim_pb2.SkimLine(), raw)
        yield from self.meta.lines  # lines written after the metadata (unusual)

    def line_timestamps(self) -> Iterator[int]:
        """Each line's timestamp_ns, read off its first fields without parsing it
        (serializers write the timestamp before the events)."""
        for raw in self.line_bytes:
            for number, _, _, value in wire.iter_fields(raw, 0, len(raw)):
                if number == _LINE_TIMESTAMP:
                    yield value
                if number >= _LINE_TIMESTAMP:
                    break
        for line in self.meta.lines:
            yield line.timestamp_ns


def split_planes(data: memoryview) -> list[Plane]:
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
        planes.append(Plane(meta, lines))
    return planes


@dataclass
class Selected:
    """Events picked from one plane, with the facts known before decoding them."""

    chunks: list[bytes]
    metadata_ids: np.ndarray
    line_ts_ns: np.ndarray
    order: np.ndarray  # (line index, event index) folded into one sortable key

    def batches(self, size: int) -> Iterator[Selected]:
        for lo in range(0, len(self.chunks), size):
            hi = lo + size
            yield Selected(
                self.chunks[lo:hi],
                self.metadata_ids[lo:hi],
                self.line_ts_ns[lo:hi],
                self.order[lo:hi],
            )


def select(
    lines: Iterable[xplane_skim_pb2.SkimLine],
    memory: np.ndarray,
    ops: np.ndarray,
    step_stat_ids: list[int],
    relative_ns: Callable[[int], int],
) -> tuple[Selected, tuple[np.ndarray, np.ndarray]]:
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

    def done(self) -> Selected:
        if not self.chunks:
            empty = np.zeros(0, dtype=np.int64)
            return Selected([], empty.astype(np.uint64), empty, empty)
        return Selected(
            self.chunks,
            np.concatenate(self.ids),
            np.concatenate(self.stamps),
            np.concatenate(self.orders),
        )


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
