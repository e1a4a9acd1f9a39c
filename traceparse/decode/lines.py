"""Find where each event of an ``XLine`` lies in the file, without a Python
object per event.

A line's events are its field 4, written one after another, each a tag byte
(0x22), a length and the ``XEvent`` bytes. Where an event starts depends on the
length of the one before, so the split is sequential by nature; here it is
guessed and then proved, with numpy:

1. Candidates: every 0x22 byte whose payload opens the way serializers write an
   XEvent, ``0x08 <metadata id>`` then ``0x10`` (offset_ps) or ``0x28``
   (num_occurrences). A candidate's length says where the next field would start.
2. Runs: walking from a known field boundary, a run of candidates where each
   one ends where the next begins is a run of real events (by induction from
   the first), taken in one step. A false candidate (the pattern inside an
   event's bytes) ends a run; the walk resumes at the real event's end.

Whatever the candidates miss (the line's own fields, an event laid out some
other way) is read one field at a time in plain Python, so every well-formed
line splits exactly; a malformed one raises ``WireError``.

The candidates that fail step 1 are mostly the events' stats, which open the
same way (``0x22 <length> 0x08 <stat id>``). Those with an integer value and a
wanted stat id (``markers``: step numbers) mark their event for decoding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from traceparse.decode import wire

_EVENTS_TAG = 0x22  # XLine.events: field 4, length-delimited
_LINE_TIMESTAMP = 3  # XLine.timestamp_ns
_METADATA_TAG = 0x08  # XEvent.metadata_id: field 1, varint
_DATA_TAGS = (0x10, 0x28)  # XEvent.offset_ps (field 2) or num_occurrences (5)
_DURATION_TAG = 0x18  # XEvent.duration_ps: field 3, varint
_INT_STAT_TAGS = (0x18, 0x20)  # XStat.uint64_value (field 3) or int64_value (4)
# A candidate's reads end at most this far past its tag: four tags, four varints.
_LOOKAHEAD = 4 * (1 + 10)
# Bytes scanned for candidates at once: bounds the temporary arrays.
_WINDOW = 1 << 20


@dataclass
class Events:
    """Consecutive events of a line: the bounds of each one's ``XEvent`` bytes in
    the file, its metadata id, where that id is in the reader's ``timed`` ids
    (-1 if not there), its duration_ps (0 when absent, and for events that
    are not timed), and whether it may carry one of the reader's ``markers``
    stats (decoding it tells)."""

    starts: np.ndarray
    ends: np.ndarray
    metadata_ids: np.ndarray
    timed_index: np.ndarray
    durations: np.ndarray
    marked: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, rows: slice | np.ndarray) -> Events:
        return Events(
            self.starts[rows],
            self.ends[rows],
            self.metadata_ids[rows],
            self.timed_index[rows],
            self.durations[rows],
            self.marked[rows],
        )

    def mark(self, hits: np.ndarray) -> None:
        """Mark the events whose bytes hold any of the positions ``hits``."""
        row = np.searchsorted(self.ends, hits, side="right")
        inside = row < len(self)
        row = row[inside]
        self.marked[row[self.starts[row] <= hits[inside]]] = True


@dataclass
class LineReader:
    """Reads one line's fields from ``data[lo:hi]`` (``buf`` is the same bytes as
    a ``uint8`` array). ``events()`` yields the events in order, in blocks, with
    the durations of the ``timed`` ones; ``timestamp_ns`` is known once they
    have all been read."""

    data: wire.Buffer
    buf: np.ndarray
    lo: int
    hi: int
    # Metadata ids (sorted, unique) of the events whose duration_ps is wanted.
    timed: np.ndarray
    # Stat ids (sorted, unique) whose integer stats mark their event.
    markers: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    timestamp_ns: int = 0
    # Events read one at a time in Python, not yet handed out.
    _odd: list[tuple[int, int, int, int]] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        # For the bytes the candidates do not cover: ``0x08 <stat id>`` then an
        # integer value tag, anywhere.
        self._marker_patterns = [
            re.compile(re.escape(b"\x08" + wire.encode_varint(int(i))) + b"[\x18\x20]")
            for i in self.markers.tolist()
        ]

    def events(self) -> Iterator[Events]:
        data, hi = self.data, self.hi
        # Candidates are only looked for where all their reads stay in the buffer.
        fast_stop = min(hi, len(self.buf) - _LOOKAHEAD)
        window = _Candidates.empty()
        pos = self.lo
        while pos < hi:
            if pos < fast_stop and data[pos] == _EVENTS_TAG:
                if not window.start <= pos < window.stop:
                    window = _Candidates.empty()  # let it go before making the next
                    stop = min(pos + _WINDOW, fast_stop)
                    window = _Candidates.scan(self.buf, pos, stop, hi, self.timed, self.markers)
                first = window.index(pos)
                if first >= 0:
                    last = window.run_end(first)
                    if self._odd:
                        yield self._flush_odd()
                    yield self._marked(window, first, last)
                    pos = int(window.events.ends[last])
                    continue
            pos = self._read_one_field(pos)
        if self._odd:
            yield self._flush_odd()

    def _marked(self, window: _Candidates, first: int, last: int) -> Events:
        """The run of events from row ``first`` to ``last``, with their marks."""
        events = window.events[first : last + 1]
        if self._marker_patterns:
            events.mark(window.hits)
            # Stats past the window's end were not candidates: search their bytes.
            late = np.flatnonzero(events.ends > window.stop)
            self._mark_by_search(events, late, start=window.stop)
        return events

    def _mark_by_search(self, events: Events, rows: np.ndarray, start: int = 0) -> None:
        for row in rows.tolist():
            lo, hi = max(int(events.starts[row]), start), int(events.ends[row])
            if any(p.search(self.data, lo, hi) for p in self._marker_patterns):
                events.marked[row] = True

    def _read_one_field(self, pos: int) -> int:
        number, kind, end, value = wire.read_field(self.data, pos, self.hi)
        if number == 4 and kind == wire.LEN:
            self._odd.append((value, end, *_event_head(self.data, value, end)))
        elif number == _LINE_TIMESTAMP and kind == wire.VARINT:
            self.timestamp_ns = wire.as_int64(value)
        return end

    def _flush_odd(self) -> Events:
        starts, ends, mids, durations = (np.array(c) for c in zip(*self._odd, strict=True))
        self._odd.clear()
        mids = mids.astype(np.uint64)
        durations = durations.astype(np.uint64).view(np.int64)
        timed_index = index_in(mids, self.timed)
        durations[timed_index < 0] = 0
        marked = np.zeros(len(starts), dtype=bool)
        events = Events(
            starts.astype(np.int64), ends.astype(np.int64), mids, timed_index, durations, marked
        )
        self._mark_by_search(events, np.arange(len(events)))
        return events


def _event_head(data: wire.Buffer, start: int, end: int) -> tuple[int, int]:
    """(metadata_id, duration_ps bits) of one event, by protobuf's rules: the
    last occurrence wins, absent is 0."""
    metadata_id = duration = 0
    for number, kind, _, _, value in wire.iter_fields(data, start, end):
        if kind == wire.VARINT and number == 1:
            metadata_id = value
        elif kind == wire.VARINT and number == 3:
            duration = value
    return metadata_id, duration


@dataclass
class _Candidates:
    """Candidate events whose tags lie in ``buf[start:stop]``, in file order."""

    start: int
    stop: int
    tags: np.ndarray
    events: Events
    breaks: np.ndarray  # rows whose event does not end where the next candidate starts
    hits: np.ndarray  # tags of integer stats with a marker id

    @classmethod
    def empty(cls) -> _Candidates:
        none = np.zeros(0, dtype=np.int64)
        events = Events(none, none, none.astype(np.uint64), none, none, none.astype(bool))
        return cls(0, 0, none, events, none, none)

    @classmethod
    def scan(
        cls,
        buf: np.ndarray,
        start: int,
        stop: int,
        line_end: int,
        timed: np.ndarray,
        markers: np.ndarray,
    ) -> _Candidates:
        # Positions count from ``start`` and byte lengths are uint8 while every
        # 0x22 is a candidate; values are read once only events are left.
        here = buf[start:]
        tags = np.flatnonzero(here[: stop - start] == _EVENTS_TAG)
        size_length, ok = wire.varint_lengths(here[1:], tags)
        payload = tags + 1 + size_length
        ok &= here[payload] == _METADATA_TAG
        mid_first = here[1:][payload]
        mid_length, mid_ok = wire.varint_lengths(here[1:], payload, mid_first)
        ok &= mid_ok
        data_tag = here[1:][payload + mid_length]
        hits = _marker_hits(here, tags, payload, mid_first, mid_length, ok, data_tag, markers)
        ok &= (data_tag == _DATA_TAGS[0]) | (data_tag == _DATA_TAGS[1])
        keep = np.flatnonzero(ok)
        tags, payload = tags[keep] + start, payload[keep] + start
        size_length, mid_length = size_length[keep], mid_length[keep]
        size = wire.varint_values(buf, tags + 1, size_length)
        room = np.maximum(line_end - payload, 0).astype(np.uint64)
        ok = size <= room
        ends = payload + np.minimum(size, room).astype(np.int64)
        mids = wire.varint_values(buf, payload + 1, mid_length)

        # For timed events: skip the offset_ps (or num_occurrences) value, then
        # read duration_ps, written after it when it is not zero.
        timed_index = index_in(mids, timed)
        rows = np.flatnonzero(ok & (timed_index >= 0))
        value_at = payload[rows] + 2 + mid_length[rows]
        _, value_length, value_ok = wire.wide_varints(buf, value_at)
        after = value_at + value_length
        ok[rows] &= value_ok & (after <= ends[rows])
        has_duration = ok[rows] & (after < ends[rows])
        has_duration &= buf[np.minimum(after, ends[rows])] == _DURATION_TAG
        rows, at = rows[has_duration], after[has_duration] + 1
        durations = np.zeros(len(tags), dtype=np.uint64)
        durations[rows], duration_length, duration_ok = wire.wide_varints(buf, at)
        ok[rows] &= duration_ok & (at + duration_length <= ends[rows])

        events = Events(
            payload, ends, mids, timed_index, durations.view(np.int64), np.zeros(len(ok), bool)
        )
        if not ok.all():  # rare: candidates that fail on a closer look
            keep = np.flatnonzero(ok)
            tags, events = tags[keep], events[keep]
            ends = events.ends
        breaks = np.append(np.flatnonzero(ends[:-1] != tags[1:]), len(tags) - 1)
        return cls(start, stop, tags, events, breaks, hits + start)

    def index(self, pos: int) -> int:
        """The row of the candidate at ``pos``, or -1."""
        row = int(np.searchsorted(self.tags, pos))
        return row if row < len(self.tags) and self.tags[row] == pos else -1

    def run_end(self, first: int) -> int:
        """The last row of the run that starts at row ``first``."""
        return int(self.breaks[np.searchsorted(self.breaks, first)])


def _marker_hits(
    here: np.ndarray,
    tags: np.ndarray,
    payload: np.ndarray,
    mid_first: np.ndarray,
    mid_length: np.ndarray,
    ok: np.ndarray,
    data_tag: np.ndarray,
    markers: np.ndarray,
) -> np.ndarray:
    """The candidates (positions in ``here``) that read as an integer stat whose id
    is one of ``markers``. A first-byte test picks the few worth a full read."""
    if not markers.size:
        return np.zeros(0, dtype=np.int64)
    opens_a_marker = np.zeros(256, dtype=bool)  # by the first byte of the stat id
    opens_a_marker[[wire.encode_varint(int(i))[0] for i in markers.tolist()]] = True
    maybe = ok & ((data_tag == _INT_STAT_TAGS[0]) | (data_tag == _INT_STAT_TAGS[1]))
    maybe &= opens_a_marker[mid_first]
    rows = np.flatnonzero(maybe)
    ids = wire.varint_values(here[1:], payload[rows], mid_length[rows])
    return tags[rows[index_in(ids, markers) >= 0]]


def index_in(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Each value's position in ``wanted`` (sorted, unique), or -1."""
    if not wanted.size:
        return np.full(values.size, -1, dtype=np.int64)
    top = int(wanted[-1])
    if top <= 16 * values.size + 1_000_000:
        # Small ids (the usual case): a lookup table instead of a search.
        table = np.full(top + 2, -1, dtype=np.int64)
        table[wanted.astype(np.int64)] = np.arange(wanted.size)
        return table[np.minimum(values, top + 1).astype(np.int64)]
    slot = np.minimum(np.searchsorted(wanted, values), wanted.size - 1)
    return np.where(wanted[slot] == values, slot, -1)
