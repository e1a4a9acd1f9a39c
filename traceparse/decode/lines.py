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
line splits exactly; a malformed one raises ``WireError``. Every event found
is then read whole (``heads.read_heads``): its fields checked, its last
metadata id and duration taken, as protobuf and the compiled scan do.

Events that may carry a step marker (an integer stat of a ``markers`` id) are
found by a byte search and confirmed by reading their stats
(``heads.marked_exactly``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from traceparse.decode import wire
from traceparse.decode.heads import event_head, marked_exactly, marker_hits, read_heads

_EVENTS_TAG = 0x22  # XLine.events: field 4, length-delimited
_LINE_TIMESTAMP = 3  # XLine.timestamp_ns
_METADATA_TAG = 0x08  # XEvent.metadata_id: field 1, varint
_DATA_TAGS = (0x10, 0x28)  # XEvent.offset_ps (field 2) or num_occurrences (5)
# A candidate's reads end at most this far past its tag: four tags, four varints.
_LOOKAHEAD = 4 * (1 + 10)
# Bytes scanned for candidates at once: bounds the temporary arrays.
_WINDOW = 1 << 20


@dataclass
class Events:
    """Consecutive events of a line: the bounds of each one's ``XEvent`` bytes in
    the file, its metadata id, where that id is in the reader's ``timed`` ids
    (-1 if not there), its duration_ps (0 when absent, and for events that
    are not timed), and whether it carries an integer stat of one of the
    reader's ``markers`` ids (``heads.marked_exactly``; decoding it tells
    whether it is a step marker)."""

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
        self._marker_set = frozenset(self.markers.tolist())
        self._hits = np.zeros(0, dtype=np.int64)

    def events(self) -> Iterator[Events]:
        data, hi = self.data, self.hi
        # Candidates are only looked for where all their reads stay in the buffer.
        fast_stop = min(hi, len(self.buf) - _LOOKAHEAD)
        window = _Candidates.empty()
        pos = self.lo
        if self._marker_set:
            self._hits = np.concatenate(
                [np.zeros(0, dtype=np.int64)]
                + [
                    marker_hits(self.buf, lo, min(lo + _WINDOW + 1, hi), self.markers)
                    for lo in range(self.lo, hi, _WINDOW)
                ]
            )
        while pos < hi:
            if pos < fast_stop and data[pos] == _EVENTS_TAG:
                if not window.start <= pos < window.stop:
                    window = _Candidates.empty()  # let it go before making the next
                    stop = min(pos + _WINDOW, fast_stop)
                    window = _Candidates.scan(self.buf, pos, stop, hi)
                first = window.index(pos)
                if first >= 0:
                    last = window.run_end(first)
                    if self._odd:
                        yield self._flush_odd()
                    yield self._marked(window, first, last)
                    pos = int(window.ends[last])
                    continue
            pos = self._read_one_field(pos)
        if self._odd:
            yield self._flush_odd()

    def _marked(self, window: _Candidates, first: int, last: int) -> Events:
        """The run of events from row ``first`` to ``last``, each read whole
        (``heads.read_heads``: its last metadata id and duration), with their marks."""
        starts = window.starts[first : last + 1]
        ends = window.ends[first : last + 1]
        mids, durations = read_heads(self.data, self.buf, starts, ends)
        return self._events(starts, ends, mids, durations)

    def _events(
        self, starts: np.ndarray, ends: np.ndarray, mids: np.ndarray, durations: np.ndarray
    ) -> Events:
        timed_index = index_in(mids, self.timed)
        durations = durations.view(np.int64)
        durations[timed_index < 0] = 0
        events = Events(starts, ends, mids, timed_index, durations, np.zeros(len(starts), bool))
        if self._hits.size:
            events.mark(self._hits)
            # A byte search only says where a marker may be; the stats decide.
            for row in np.flatnonzero(events.marked).tolist():
                start, end = int(starts[row]), int(ends[row])
                events.marked[row] = marked_exactly(self.data, start, end, self._marker_set)
        return events

    def _read_one_field(self, pos: int) -> int:
        number, kind, end, value = wire.read_field(self.data, pos, self.hi)
        if number == 4 and kind == wire.LEN:
            self._odd.append((value, end, *event_head(self.data, value, end)))
        elif number == _LINE_TIMESTAMP and kind == wire.VARINT:
            self.timestamp_ns = wire.as_int64(value)
        return end

    def _flush_odd(self) -> Events:
        starts, ends, mids, durations = (np.array(c) for c in zip(*self._odd, strict=True))
        self._odd.clear()
        return self._events(
            starts.astype(np.int64),
            ends.astype(np.int64),
            mids.astype(np.uint64),
            durations.astype(np.uint64),
        )


@dataclass
class _Candidates:
    """Candidate events whose tags lie in ``buf[start:stop]``, in file order: where
    each one's ``XEvent`` bytes would lie."""

    start: int
    stop: int
    tags: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    breaks: np.ndarray  # rows whose event does not end where the next candidate starts

    @classmethod
    def empty(cls) -> _Candidates:
        none = np.zeros(0, dtype=np.int64)
        return cls(0, 0, none, none, none, none)

    @classmethod
    def scan(cls, buf: np.ndarray, start: int, stop: int, line_end: int) -> _Candidates:
        # Positions count from ``start`` and byte lengths are uint8 while every
        # 0x22 is a candidate; lengths are read once only likely events are left.
        here = buf[start:]
        tags = np.flatnonzero(here[: stop - start] == _EVENTS_TAG)
        size_length, ok = wire.varint_lengths(here[1:], tags)
        payload = tags + 1 + size_length
        ok &= here[payload] == _METADATA_TAG
        mid_length, mid_ok = wire.varint_lengths(here[1:], payload, here[1:][payload])
        ok &= mid_ok
        data_tag = here[1:][payload + mid_length]
        ok &= (data_tag == _DATA_TAGS[0]) | (data_tag == _DATA_TAGS[1])
        keep = np.flatnonzero(ok)
        tags, payload, size_length = tags[keep] + start, payload[keep] + start, size_length[keep]
        size = wire.varint_values(buf, tags + 1, size_length)
        room = np.maximum(line_end - payload, 0).astype(np.uint64)
        fits = np.flatnonzero(size <= room)  # the others are read in Python, and fail
        tags, payload = tags[fits], payload[fits]
        ends = payload + size[fits].astype(np.int64)
        breaks = np.append(np.flatnonzero(ends[:-1] != tags[1:]), len(tags) - 1)
        return cls(start, stop, tags, payload, ends, breaks)

    def index(self, pos: int) -> int:
        """The row of the candidate at ``pos``, or -1."""
        row = int(np.searchsorted(self.tags, pos))
        return row if row < len(self.tags) and self.tags[row] == pos else -1

    def run_end(self, first: int) -> int:
        """The last row of the run that starts at row ``first``."""
        return int(self.breaks[np.searchsorted(self.breaks, first)])


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
