"""Vectorised reading of the protobuf wire format over many small messages.

A capture holds about a million small messages (events and their stats).
Touching them one Python object at a time costs more than protobuf's whole
parse, so the fields of many messages are decoded together here with numpy:
one pass of array operations per field position, not one Python call per
message.

All positions index one ``uint8`` buffer with at least ``PAD`` bytes after the
last message (``join`` adds them); every read is bounds-checked against its
message's end and a malformed message raises ``WireError``.
"""

from __future__ import annotations

import itertools
import mmap
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

# A capture's bytes: a bytes object, or the mapping a large file is read into
# (files.discover.read_buffer); both index, slice (to bytes) and export a buffer.
Buffer = bytes | mmap.mmap

# Bytes after the last message, so a read that runs past a message's end (a
# varint is at most 10 bytes) is caught by the bounds check instead of indexing
# outside the buffer.
PAD = 32
VARINT, _FIXED64, LEN, _FIXED32 = 0, 1, 2, 5
_UINT64_MASK = (1 << 64) - 1
_HIGH_BITS = np.uint64(0x8080808080808080)
_LOW_BITS = ~_HIGH_BITS
_ONE = np.uint64(1)
# Byte counting without np.bitwise_count (NumPy 2 only): one 0/1 per byte,
# summed into the top byte by one multiplication.
_BYTE_ONES = np.uint64(0x0101010101010101)
_SEVEN = np.uint64(7)
_TOP_BYTE = np.uint64(56)
# Packing a word's eight 7-bit groups into 56 bits: pairs of groups, then pairs
# of pairs, then the two halves.
_PACK_STEPS = [
    (np.uint64(0x007F007F007F007F), np.uint64(0x7F007F007F007F00), np.uint64(1)),
    (np.uint64(0x00003FFF00003FFF), np.uint64(0x3FFF00003FFF0000), np.uint64(2)),
    (np.uint64(0x000000000FFFFFFF), np.uint64(0x0FFFFFFF00000000), np.uint64(4)),
]


class WireError(ValueError):
    """The bytes are not well-formed protobuf wire format."""


@dataclass(frozen=True)
class Chunks:
    """Many messages in one buffer: message i is ``buf[starts[i]:ends[i]]``, and
    ``raw`` is the same bytes."""

    raw: Buffer
    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)


def join(chunks: Sequence[bytes]) -> Chunks:
    """Concatenate messages into one padded buffer with their boundaries."""
    lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    ends = np.cumsum(lengths)
    # One copy: the padding is joined in rather than appended afterwards.
    raw = b"".join(itertools.chain(chunks, (bytes(PAD),)))
    buf = np.frombuffer(raw, dtype=np.uint8)
    return Chunks(raw, buf, ends - lengths, ends)


def encode_varint(value: int) -> bytes:
    """``value``'s varint bytes (its low 64 bits, as protobuf writes them)."""
    out = bytearray()
    value &= _UINT64_MASK
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position: (values as uint64, positions after them).
    A varint longer than 10 bytes raises ``WireError``."""
    values, lengths, well_formed = small_varints(buf, pos)
    if not well_formed.all():
        raise WireError("varint longer than 10 bytes")
    return values, pos + lengths


def varint_lengths(
    buf: np.ndarray, pos: np.ndarray, first: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(length in bytes, well-formed) of a varint at each position, for positions
    that may not hold one: a run of more than 10 continuation bytes is not
    well-formed. Reads at most 10 bytes past each position; ``first`` is
    ``buf[pos]`` when the caller has it already."""
    lengths = np.ones(len(pos), dtype=np.uint8)
    going = (buf[pos] if first is None else first) >= 0x80
    # Whole-array steps while many varints go on; then only the rows that do.
    k = 1
    while k < 10 and 4 * np.count_nonzero(going) >= len(pos) > 0:
        lengths += going
        going &= buf[k:][pos] >= 0x80
        k += 1
    rows = np.flatnonzero(going)
    while k < 10 and rows.size:
        lengths[rows] += 1
        rows = rows[buf[k:][pos[rows]] >= 0x80]
        k += 1
    well_formed = np.ones(len(pos), dtype=bool)
    well_formed[rows] = False
    return lengths, well_formed


def varint_values(buf: np.ndarray, pos: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The varints at ``pos`` whose byte lengths are known (``varint_lengths``), as
    uint64. Reads ``lengths.max()`` bytes past every position."""
    values = (buf[pos] & 0x7F).astype(np.uint64)
    # Rows grouped by length, so each byte is read only where it belongs.
    longer = np.flatnonzero(np.bincount(lengths, minlength=2)[2:]) + 2
    for length in longer.tolist():
        rows = np.flatnonzero(lengths == length)
        at = pos[rows]
        value = values[rows]
        for k in range(1, length):
            value |= (buf[k:][at] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        values[rows] = value
    return values


def small_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values as uint64, byte lengths, well-formed) of a varint at each position,
    for values that mostly fit in one byte (ids, lengths of small messages): one
    byte is read everywhere, and only the longer ones are read further."""
    values = buf[pos].astype(np.uint64)
    lengths = np.ones(len(pos), dtype=np.uint8)
    well_formed = np.ones(len(pos), dtype=bool)
    rows = np.flatnonzero(values >= 0x80)
    if rows.size:
        at = pos[rows]
        lengths[rows], well_formed[rows] = varint_lengths(buf, at)
        values[rows] = varint_values(buf, at, lengths[rows])
    return values, lengths, well_formed


def wide_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values as uint64, byte lengths, well-formed) of a varint at each position,
    for values that often take several bytes (times, addresses, byte counts).

    Eight bytes are read at once and their 7-bit groups packed in a few whole-
    array steps, whatever the lengths; the rare varint longer than 8 bytes, or
    within 8 bytes of the buffer's end, is read by ``varint_lengths``. Faster
    than it when most values are wider than a byte, slower when most are not.
    """
    pos = np.asarray(pos, dtype=np.int64)
    near_end = pos > len(buf) - 8
    # Rows within 8 bytes of the end read from 0 here, then again below.
    some_near_end = bool(near_end.any())
    at = np.where(near_end, 0, pos) if some_near_end else pos
    # Overlapping little-endian words, one starting at each byte of the buffer.
    words = np.ndarray((max(len(buf) - 7, 0),), dtype="<u8", buffer=buf, strides=(1,))
    word = words[at]
    ends = ~word & _HIGH_BITS  # the high bit of each byte that ends a varint
    below = (ends & (~ends + _ONE)) - _ONE  # the bits below the first such high bit
    values = word & below & _LOW_BITS
    for low, high, shift in _PACK_STEPS:
        values = (values & low) | ((values & high) >> shift)
    lengths = _bytes_before_end(below)
    lengths += np.uint8(1)  # 9 where no byte ends it
    well_formed = np.ones(len(pos), dtype=bool)
    slow = lengths > 8
    if some_near_end:
        slow |= near_end
    rows = np.flatnonzero(slow)
    if rows.size:
        lengths[rows], well_formed[rows] = varint_lengths(buf, pos[rows])
        values[rows] = varint_values(buf, pos[rows], lengths[rows])
    return values, lengths, well_formed


def _bytes_before_end(below: np.ndarray) -> np.ndarray:
    """How many whole bytes ``below`` (the bits below a varint's end bit) covers,
    as uint8: the count of its set high bits, one per continuation byte."""
    count = below >> _SEVEN
    count &= _BYTE_ONES
    count *= _BYTE_ONES  # wraps: the top byte holds the sum, at most 8
    count >>= _TOP_BYTE
    return count.astype(np.uint8)


def read_fixed(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian fixed-width integers (4 or 8 bytes) at each position, as uint64."""
    gathered = buf[pos[:, None] + np.arange(width)]
    view = np.ascontiguousarray(gathered).view(f"<u{width}").ravel()
    return view.astype(np.uint64)


@dataclass(frozen=True)
class Fields:
    """Every field of a set of messages, one row per field occurrence; the rows
    of one message are in wire order (not adjacent). ``value`` holds varints and
    fixed-width bits; ``start``/``length`` locate length-delimited payloads."""

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

        rows = np.flatnonzero(wire == VARINT)
        if rows.size:
            value[rows], after[rows] = read_varints(buf, after[rows])
        for kind, width in ((_FIXED64, 8), (_FIXED32, 4)):
            rows = np.flatnonzero(wire == kind)
            if rows.size:
                value[rows] = read_fixed(buf, after[rows], width)
                after[rows] += width
        rows = np.flatnonzero(wire == LEN)
        if rows.size:
            size, payload = read_varints(buf, after[rows])
            room = np.maximum(limit[rows] - payload, 0).astype(np.uint64)
            _check(size <= room, "length-delimited field runs past the end of its message")
            start[rows] = payload
            length[rows] = size.astype(np.int64)
            after[rows] = payload + length[rows]

        _check((wire <= LEN) | (wire == _FIXED32), "unsupported wire type")
        _check(number > 0, "field number 0")
        _check(after <= limit, "field runs past the end of its message")
        parts.append((message, number, wire, value, start, length))
        alive = after < limit
        message, pos, limit = message[alive], after[alive], limit[alive]

    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Fields(empty, empty, empty.astype(np.int8), empty.astype(np.uint64), empty, empty)
    # Rows are grouped by field position, so within one message they stay in
    # wire order: what protobuf's "last one wins" merge rule needs.
    return Fields(*(np.concatenate(column) for column in zip(*parts, strict=True)))


def iter_fields(
    data: Buffer | memoryview, start: int, end: int
) -> Iterator[tuple[int, int, int, int, int]]:
    """The top-level fields of one message, one at a time, in plain Python:
    (field number, wire type, field start, field end, value), where value is
    the number for varint and fixed-width fields and the payload's start for
    length-delimited ones (the payload ends at the field's end). Meant for the
    few fields at the top of a file (planes, lines) and odd events, not for the
    bulk of the events."""
    pos = start
    while pos < end:
        number, kind, field_end, value = read_field(data, pos, end)
        yield number, kind, pos, field_end, value
        pos = field_end


def read_field(data: Buffer | memoryview, pos: int, end: int) -> tuple[int, int, int, int]:
    """The field at ``pos``: (number, wire type, field end, value), value as in
    ``iter_fields``."""
    tag, pos = _read_varint(data, pos, end)
    number, kind = tag >> 3, tag & 7
    if number == 0:
        raise WireError("field number 0")
    if kind == VARINT:
        value, pos = _read_varint(data, pos, end)
    elif kind == LEN:
        size, value = _read_varint(data, pos, end)
        if size > end - value:
            raise WireError("length-delimited field runs past the end of its message")
        pos = value + size
    elif kind in (_FIXED64, _FIXED32):
        width = 8 if kind == _FIXED64 else 4
        if pos + width > end:
            raise WireError("fixed-width field runs past the end of its message")
        value = int.from_bytes(data[pos : pos + width], "little")
        pos += width
    else:
        raise WireError(f"unsupported wire type {kind}")
    return number, kind, pos, value


def metadata_ids(keys: Iterable[int]) -> np.ndarray:
    """Metadata map keys (int64) as events and stats carry them: uint64 varints,
    so a negative key is a number past 2**63."""
    return np.fromiter(keys, dtype=np.int64).view(np.uint64)


def as_int64(value: int) -> int:
    """A varint's 64 bits read as a signed int64 field."""
    return value - (1 << 64) if value >> 63 else value


def _read_varint(data: Buffer | memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _UINT64_MASK, pos  # a 10th byte may carry bits past 64
        shift += 7


def _check(ok: np.ndarray, what: str) -> None:
    if not bool(np.all(ok)):
        raise WireError(what)
