"""Vectorised reading of the protobuf wire format over many small messages.

upb splits a capture into lines and the raw bytes of each event in C. Touching
a million events one Python object at a time costs more than the whole parse,
so the fields of many events are decoded together here with numpy: one pass of
array operations per field position, not one Python call per event.

All positions index one padded ``uint8`` buffer (see ``join``); every read is
bounds-checked against its message's end and a malformed message raises
``WireError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Zero bytes after the data, so a read that runs past a message's end is caught
# by the bounds check instead of indexing outside the buffer.
_PAD = 32
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """The bytes are not well-formed protobuf wire format."""


@dataclass(frozen=True)
class Chunks:
    """Many messages joined in one buffer: message i is ``buf[starts[i]:ends[i]]``."""

    raw: bytes
    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)


def join(chunks: Sequence[bytes]) -> Chunks:
    """Concatenate messages into one padded buffer with their boundaries."""
    lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    ends = np.cumsum(lengths)
    raw = b"".join(chunks)
    buf = np.frombuffer(raw + bytes(_PAD), dtype=np.uint8)
    return Chunks(raw, buf, ends - lengths, ends)


def read_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position: (values as uint64, positions after them)."""
    values = buf[pos].astype(np.uint64)
    after = pos + 1
    more = np.flatnonzero(values >= 0x80)
    if more.size == 0:
        return values, after
    values[more] &= np.uint64(0x7F)
    shift = 7
    while more.size:
        if shift > 63:
            raise WireError("varint longer than 10 bytes")
        byte = buf[after[more]].astype(np.uint64)
        values[more] |= (byte & np.uint64(0x7F)) << np.uint64(shift)
        after[more] += 1
        more = more[byte >= 0x80]
        shift += 7
    return values, after


def read_fixed(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian fixed-width integers (4 or 8 bytes) at each position, as uint64."""
    gathered = buf[pos[:, None] + np.arange(width)]
    view = np.ascontiguousarray(gathered).view(f"<u{width}").ravel()
    return view.astype(np.uint64)


@dataclass(frozen=True)
class Fields:
    """Every field of a set of messages, one row per field occurrence, in wire order
    within each message. ``value`` holds varints and fixed-width bits;
    ``start``/``length`` locate length-delimited payloads in the buffer."""

    message: np.ndarray
    number: np.ndarray
    wire: np.ndarray
    value: np.ndarray
    start: np.ndarray
    length: np.ndarray

    def select(self, number: int, wire: int) -> np.ndarray:
        """Row indices of the occurrences of one field with the expected wire type."""
        return np.flatnonzero((self.number == number) & (self.wire == wire))

    def last_value(self, number: int, wire: int, count: int, default: int = 0) -> np.ndarray:
        """Per message, the last value of a scalar field (protobuf's merge rule)."""
        rows = self.select(number, wire)
        out = np.full(count, default, dtype=np.uint64)
        out[self.message[rows]] = self.value[rows]  # later rows overwrite earlier ones
        return out


def scan_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Decode the top-level fields of every message ``buf[starts[i]:ends[i]]``.

    Each loop iteration reads the next field of every message that still has
    bytes left, so the cost is (fields per message) x (numpy calls), not
    (messages) x (Python calls).
    """
    parts: list[tuple[np.ndarray, ...]] = []
    message = np.flatnonzero(starts < ends)
    pos = starts[message].astype(np.int64)
    limit = ends[message].astype(np.int64)
    while message.size:
        tag, after = read_varints(buf, pos)
        _check(after <= limit, "field tag runs past the end of its message")
        number = (tag >> np.uint64(3)).astype(np.int64)
        wire = (tag & np.uint64(7)).astype(np.int8)
        value = np.zeros(message.size, dtype=np.uint64)
        start = np.zeros(message.size, dtype=np.int64)
        length = np.zeros(message.size, dtype=np.int64)

        rows = np.flatnonzero(wire == _VARINT)
        if rows.size:
            value[rows], after[rows] = read_varints(buf, after[rows])
        for kind, width in ((_FIXED64, 8), (_FIXED32, 4)):
            rows = np.flatnonzero(wire == kind)
            if rows.size:
                value[rows] = read_fixed(buf, after[rows], width)
                after[rows] += width
        rows = np.flatnonzero(wire == _LEN)
        if rows.size:
            size, payload = read_varints(buf, after[rows])
            room = np.maximum(limit[rows] - payload, 0).astype(np.uint64)
            _check(size <= room, "length-delimited field runs past the end of its message")
            start[rows] = payload
            length[rows] = size.astype(np.int64)
            after[rows] = payload + length[rows]

        _check(np.isin(wire, (_VARINT, _FIXED64, _LEN, _FIXED32)), "unsupported wire type")
        _check(number > 0, "field number 0")
        _check(after <= limit, "field runs past the end of its message")
        parts.append((message, number, wire, value, start, length))
        alive = after < limit
        message, pos, limit = message[alive], after[alive], limit[alive]

    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Fields(empty, empty, empty.astype(np.int8), empty.astype(np.uint64), empty, empty)
    columns = [np.concatenate(column) for column in zip(*parts, strict=True)]
    # Stable sort by message keeps each message's fields in wire order.
    order = np.argsort(columns[0], kind="stable")
    return Fields(*(column[order] for column in columns))


def leading_varint(chunks: Chunks, number: int) -> np.ndarray:
    """The value of varint field ``number`` in each message. Absent fields give 0.

    Serializers write fields in number order, so field 1 comes first and is read
    straight off the first bytes; messages where it is not first are decoded in
    full. One deviation from protobuf's merge rule: a message that repeats the
    field (no serializer does) reads as its first value, not its last.
    """
    buf, starts, ends = chunks.buf, chunks.starts, chunks.ends
    tag = number << 3
    fast = (ends > starts) & (buf[starts] == tag)
    fast_rows = np.flatnonzero(fast)
    values = np.zeros(len(starts), dtype=np.uint64)
    decoded, after = read_varints(buf, starts[fast_rows] + 1)
    ok = after <= ends[fast_rows]
    values[fast_rows[ok]] = decoded[ok]
    slow_rows = np.concatenate([np.flatnonzero(~fast & (ends > starts)), fast_rows[~ok]])
    if slow_rows.size:
        fields = scan_fields(buf, starts[slow_rows], ends[slow_rows])
        values[slow_rows] = fields.last_value(number, _VARINT, slow_rows.size)
    return values


def _check(ok: np.ndarray, what: str) -> None:
    if not bool(np.all(ok)):
        raise WireError(what)
