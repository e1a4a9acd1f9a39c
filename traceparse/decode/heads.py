"""Every event's own fields, checked, and its metadata id and duration_ps by
protobuf's rules, without a Python object per event (numpy path).

``lines`` finds where events lie from the way serializers open them; that says
nothing about the rest of an event. Protobuf reads all of it: the last
``metadata_id`` wins, ``duration_ps`` may come anywhere, and an event whose
fields do not parse makes the whole XSpace unreadable. The compiled scan
(``_native.c``, ``scan_event``) reads every event's fields that way, so the
numpy path does too, here: one field of every event per step, the usual step
(a stat: tag 0x22 and a one-byte length) in a few whole-array operations. The
stats' own bytes are not read (neither path reads the stats of events it does
not decode; see docs/decoder.md, "What an unreadable event does").

Step markers are found the same way on both paths: an event is marked when one
of its stats parses and holds a marker id (its last varint field 1) and an
integer (a varint field 3 or 4). ``marked_exactly`` checks the few events a
byte search (``marker_hits``) says may be marked.
"""

from __future__ import annotations

import numpy as np

from traceparse.decode import wire

# Reads from a field's position reach at most a 10-byte tag and a 10-byte value.
_REACH = 20
# Below this many events still being read, a step costs more in numpy calls than
# reading them in Python.
_FEW = 16
_STAT_TAG = 0x22  # XEvent.stats: field 4, length-delimited


def read_heads(
    data: wire.Buffer, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per event ``data[starts[i]:ends[i]]``: (metadata_id, duration_ps), both the
    last varint of their field (0 when absent), as uint64. Raises ``WireError``
    when an event's fields do not parse."""
    n = len(starts)
    mids = np.zeros(n, dtype=np.uint64)
    durations = np.zeros(n, dtype=np.uint64)
    safe = ends <= len(buf) - _REACH
    rows = np.flatnonzero(safe & (starts < ends))
    pos = starts[rows].astype(np.int64)
    limit = ends[rows].astype(np.int64)
    while rows.size >= _FEW:
        first = buf[pos]
        size = buf[pos + 1]
        if ((first == _STAT_TAG) & (size < 0x80)).all():
            after = pos + 2 + size
            bad = after > limit
        else:
            after, bad = _general_step(buf, rows, pos, limit, mids, durations)
        if bad.any():
            raise wire.WireError("event field runs past the end of its event, or is malformed")
        going = after < limit
        rows, pos, limit = rows[going], after[going], limit[going]
    # The rest in Python: events near the buffer's end, and the few long ones.
    slow = np.union1d(rows, np.flatnonzero(~safe & (starts < ends)))
    for row in slow.tolist():
        mids[row], durations[row] = event_head(data, int(starts[row]), int(ends[row]))
    return mids, durations


def _general_step(
    buf: np.ndarray,
    rows: np.ndarray,
    pos: np.ndarray,
    limit: np.ndarray,
    mids: np.ndarray,
    durations: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One field of each event, whatever it is: (where each field ends, bad)."""
    first = buf[pos]
    if (first < 0x80).all():  # one-byte tags: fields 1 to 15, the usual
        tag, tag_length = first.astype(np.uint64), np.ones(len(pos), dtype=np.uint8)
        bad = np.zeros(len(pos), dtype=bool)
    else:
        tag, tag_length, well_formed = wire.small_varints(buf, pos)
        bad = ~well_formed
    at = pos + tag_length
    number = tag >> np.uint64(3)
    kind = (tag & np.uint64(7)).astype(np.int8)
    bad |= number == 0
    bad |= (kind > wire.LEN) & (kind != 5)
    after = at.copy()
    varint = np.flatnonzero(kind == wire.VARINT)
    if varint.size:
        # Lengths for every varint; values only for the two fields wanted.
        length, ok = wire.varint_lengths(buf, at[varint])
        bad[varint] |= ~ok
        after[varint] += length
        for field, out in ((1, mids), (3, durations)):
            hit = np.flatnonzero((number[varint] == field) & ok)
            if hit.size:
                rows_hit = varint[hit]
                out[rows[rows_hit]] = wire.varint_values(buf, at[rows_hit], length[hit])
    for width_kind, width in ((1, 8), (5, 4)):
        after[kind == width_kind] += width
    delimited = np.flatnonzero(kind == wire.LEN)
    if delimited.size:
        size, length, ok = wire.small_varints(buf, at[delimited])
        payload = at[delimited] + length
        room = np.maximum(limit[delimited] - payload, 0).astype(np.uint64)
        bad[delimited] |= ~ok | (size > room)
        after[delimited] = payload + np.minimum(size, room).astype(np.int64)
    bad |= after > limit
    return after, bad


def event_head(data: wire.Buffer, start: int, end: int) -> tuple[int, int]:
    """(metadata_id, duration_ps bits) of one event, by protobuf's rules: the
    last occurrence wins, absent is 0. Raises ``WireError`` as ``read_heads``."""
    metadata_id = duration = 0
    for number, kind, _, _, value in wire.iter_fields(data, start, end):
        if kind == wire.VARINT and number == 1:
            metadata_id = value
        elif kind == wire.VARINT and number == 3:
            duration = value
    return metadata_id, duration


def marker_hits(buf: np.ndarray, lo: int, hi: int, markers: np.ndarray) -> np.ndarray:
    """Positions in ``buf[lo:hi]`` (absolute) where a stat with one of the
    ``markers`` ids may start its id field: a 0x08 byte (or an overlong tag
    opening 0x88) followed by a byte that opens the id's varint, overlong or not.
    Every stat that holds such an id has one; most positions found hold none."""
    if not markers.size or hi - lo < 2:
        return np.zeros(0, dtype=np.int64)
    opens = np.zeros(256, dtype=bool)
    for value in markers.tolist():
        head = wire.encode_varint(int(value))[0]
        opens[head] = opens[head | 0x80] = True
    here = buf[lo:hi]
    tag = np.flatnonzero((here[:-1] == 0x08) | (here[:-1] == 0x88))
    then = here[tag + 1]
    # An overlong tag 8 goes on with 0x80 or ends with 0x00.
    overlong = (here[tag] == 0x88) & ((then == 0x80) | (then == 0x00))
    return tag[np.where(here[tag] == 0x08, opens[then], overlong)] + lo


def marked_exactly(data: wire.Buffer, start: int, end: int, markers: frozenset[int]) -> bool:
    """Whether the event ``data[start:end]`` has a stat that parses, whose last
    varint field 1 is one of ``markers`` and that has a varint field 3 or 4 (what
    the compiled scan's ``read_mark`` asks). A stat that does not parse marks
    nothing; the event's own fields were checked before."""
    for number, kind, _, field_end, value in wire.iter_fields(data, start, end):
        if number != 4 or kind != wire.LEN:
            continue
        stat_id, integer = 0, False
        try:
            for inner, inner_kind, _, _, inner_value in wire.iter_fields(data, value, field_end):
                if inner_kind != wire.VARINT:
                    continue
                if inner == 1:
                    stat_id = inner_value
                elif inner in (3, 4):
                    integer = True
        except wire.WireError:
            continue
        if integer and stat_id in markers:
            return True
    return False
