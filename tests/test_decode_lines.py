"""Splitting a line into events (``traceparse.decode.lines``) against upb's own parse
of the same bytes: real captures, odd layouts, and random lines from hypothesis;
and the lockstep reader of memory events' fields against a full decode."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import xplane_files
from helpers import xplane_lines
from helpers.xplane_lines import MARKERS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceparse._proto import xplane_pb2
from traceparse.decode import lines, wire
from traceparse.decode.fields import _read_events
from traceparse.decode.planes import split_planes


def split(
    data: bytes, lo: int, hi: int, timed: list[int] | None = None, markers: list[int] | None = None
) -> tuple[lines.Events, int]:
    """The line's events and timestamp; durations of the ``timed`` metadata ids,
    marks for the events with integer stats of the ``markers`` ids."""
    wanted = np.unique(np.array(timed or [], dtype=np.uint64))
    marking = np.unique(np.array(markers or [], dtype=np.uint64))
    buf = np.frombuffer(data, dtype=np.uint8)
    reader = lines.LineReader(data, buf, lo, hi, wanted, marking)
    blocks = list(reader.events())
    if not blocks:
        none = np.zeros(0, dtype=np.int64)
        empty = lines.Events(none, none, none.astype(np.uint64), none, none, none.astype(bool))
        return empty, reader.timestamp_ns
    columns = {
        f.name: np.concatenate([getattr(b, f.name) for b in blocks])
        for f in dataclasses.fields(lines.Events)
    }
    return lines.Events(**columns), reader.timestamp_ns


def expect_like_upb(data: bytes, lo: int, hi: int) -> None:
    """Every event's bytes, metadata id, duration and the line's timestamp as upb
    reads them; every event with an integer stat of a ``MARKERS`` id is marked."""
    line = xplane_pb2.XLine.FromString(data[lo:hi])
    events, timestamp_ns = split(data, lo, hi, [e.metadata_id for e in line.events], MARKERS)
    assert timestamp_ns == line.timestamp_ns
    assert len(events) == len(line.events)
    for i, event in enumerate(line.events):
        assert xplane_pb2.XEvent.FromString(data[events.starts[i] : events.ends[i]]) == event
        assert int(events.metadata_ids[i]) == event.metadata_id
        assert int(events.durations[i]) == event.duration_ps
        if any(
            stat.metadata_id in MARKERS
            and stat.WhichOneof("value") in ("uint64_value", "int64_value")
            for stat in event.stats
        ):
            assert events.marked[i]


@pytest.mark.parametrize("path", xplane_files(), ids=lambda p: p.parent.parent.parent.parent.name)
def test_every_line_of_the_real_captures_splits_like_upb(path) -> None:  # type: ignore[no-untyped-def]
    data = path.read_bytes()
    for plane in split_planes(data):
        for lo, hi in plane.lines:
            expect_like_upb(data, lo, hi)


def test_odd_layouts_split_exactly() -> None:
    # A string stat holding the bytes of an event header: a false candidate.
    fake = b"\x22\x06\x08\x05\x10\x01\x18\x02"
    events = [
        xplane_pb2.XEvent(metadata_id=7, offset_ps=1, duration_ps=9),
        xplane_pb2.XEvent(offset_ps=5),  # metadata_id 0: absent
        xplane_pb2.XEvent(),  # empty
        xplane_pb2.XEvent(metadata_id=300, num_occurrences=4, duration_ps=2**40),
        xplane_pb2.XEvent(
            metadata_id=7,
            offset_ps=2,
            stats=[xplane_pb2.XStat(metadata_id=1, str_value=fake.decode())],
        ),
        xplane_pb2.XEvent(metadata_id=2**62, offset_ps=2**62, duration_ps=2**63 - 1),
    ]
    line = xplane_pb2.XLine(id=1, name="thread", timestamp_ns=-5, events=events)
    data = line.SerializeToString()
    # Fields out of the usual order, and metadata_id written twice (the last wins).
    data += (
        b"\x22\x04\x08\x02\x08\x09"
        + b"\x18\x07"
        + xplane_pb2.XLine(events=events[:1]).SerializeToString()
    )
    expect_like_upb(data, 0, len(data))


def test_only_timed_events_get_their_duration() -> None:
    events = [xplane_pb2.XEvent(metadata_id=m, offset_ps=1, duration_ps=10 * m) for m in (1, 2, 3)]
    data = xplane_pb2.XLine(events=events * 20).SerializeToString()
    found, _ = split(data, 0, len(data), timed=[2])
    assert found.durations.tolist() == [0, 20, 0] * 20
    assert found.timed_index.tolist() == [-1, 0, -1] * 20
    assert found.metadata_ids.tolist() == [1, 2, 3] * 20


def test_a_ten_byte_varint_keeps_its_low_64_bits() -> None:
    # protobuf drops the bits a 10th varint byte carries past 64.
    event = b"\x08" + b"\xff" * 9 + b"\x7f" + b"\x18\x05"
    data = b"\x22" + bytes([len(event)]) + event
    found, _ = split(data, 0, len(data), timed=[2**64 - 1])
    assert found.metadata_ids.tolist() == [2**64 - 1]
    assert xplane_pb2.XLine.FromString(data).events[0].metadata_id == -1  # int64 upstream
    assert found.durations.tolist() == [5]


def test_a_malformed_line_raises() -> None:
    data = xplane_pb2.XLine(
        events=[xplane_pb2.XEvent(metadata_id=1, offset_ps=1)]
    ).SerializeToString()
    with pytest.raises(wire.WireError):
        split(data + b"\x22\x7f\x08", 0, len(data) + 3)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(xplane_lines.events, max_size=30),
    timestamp=st.integers(-(2**63), 2**63 - 1),
    before=st.binary(max_size=64),
    window=st.sampled_from([8, 64, 1 << 21]),
)
def test_random_lines_split_like_upb(
    events: list[xplane_pb2.XEvent], timestamp: int, before: bytes, window: int
) -> None:
    # Bytes before the line (never read) and none after it: the end of the
    # buffer is where candidates are not looked for. Small windows make runs
    # cross window edges.
    line = xplane_pb2.XLine(id=3, timestamp_ns=timestamp, events=events).SerializeToString()
    saved, lines._WINDOW = lines._WINDOW, window
    try:
        expect_like_upb(before + line, len(before), len(before) + len(line))
    finally:
        lines._WINDOW = saved


def test_event_fields_and_stats_read_like_a_full_decode() -> None:
    """``_read_events`` (the lockstep reader for memory events) against
    ``wire.scan_fields`` with protobuf's rules, on usual and odd layouts."""
    stat = xplane_pb2.XStat(metadata_id=3, int64_value=-7).SerializeToString()
    usual = xplane_pb2.XEvent(metadata_id=5, offset_ps=9, duration_ps=4)
    usual.stats.add().MergeFromString(stat)
    usual.stats.add(metadata_id=4, str_value="shape")
    events = [
        usual.SerializeToString(),
        xplane_pb2.XEvent(metadata_id=5, num_occurrences=2).SerializeToString(),
        xplane_pb2.XEvent(metadata_id=5, offset_ps=1).SerializeToString(),  # no stats
        b"",  # empty
        b"\x18\x07\x08\x05\x10\x03" + b"\x22" + bytes([len(stat)]) + stat,  # duration first
        b"\x08\x05\x10\x03\x22\x00\x10\x08",  # empty stat, then offset again
        usual.SerializeToString() + b"\x28\x01",  # num_occurrences after the stats
    ]
    joined = wire.join(events)
    offset, duration, owner, start, end = _read_events(joined)
    fields = wire.scan_fields(joined.buf, joined.starts, joined.ends)
    # offset_ps and num_occurrences are a oneof: a later num_occurrences clears it.
    assert offset.tolist() == [xplane_pb2.XEvent.FromString(e).offset_ps for e in events]
    assert duration.tolist() == fields.last_value(3, 0, len(events)).tolist()
    found = fields.select(4, 2)
    expected = sorted(
        zip(
            fields.message[found].tolist(),
            fields.start[found].tolist(),
            (fields.start[found] + fields.length[found]).tolist(),
            strict=True,
        )
    )
    assert sorted(zip(owner.tolist(), start.tolist(), end.tolist(), strict=True)) == expected
    for event in range(len(events)):  # each event's stats in wire order
        mine = start[owner == event]
        assert mine.tolist() == sorted(mine.tolist())


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=40),
    pad=st.integers(10, 16),
)
def test_wide_varints_read_what_protobuf_writes(values: list[int], pad: int) -> None:
    # Each value as a uint64 field written by protobuf; the varint follows its tag.
    fields = [xplane_pb2.XStat(uint64_value=v).SerializeToString() for v in values]
    data = b"".join(fields) + bytes(pad)
    starts = np.cumsum([0, *map(len, fields[:-1])])
    found, lengths, well_formed = wire.wide_varints(np.frombuffer(data, dtype=np.uint8), starts + 1)
    assert found.tolist() == values
    assert lengths.tolist() == [len(f) - 1 for f in fields]
    assert well_formed.all()


def test_wide_varints_refuse_more_than_ten_bytes() -> None:
    buf = np.frombuffer(b"\x80" * 11 + b"\x01" + bytes(12), dtype=np.uint8)
    _, lengths, well_formed = wire.wide_varints(buf, np.array([0, 2]))
    assert well_formed.tolist() == [False, True]
    assert lengths.tolist() == [10, 10]
