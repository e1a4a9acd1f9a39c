"""Run records read the same on both decoder paths (the compiled reader and the
upb/numpy one, ``TRACEPARSE_PURE_PYTHON``) on crafted real captures, by
protobuf's rules: ``num_occurrences`` after ``offset_ps`` clears it (a oneof),
and a line with a string that is not UTF-8 keeps its records and the numbers
of the lines after it (issue 37, 1d). A stat that does not parse refuses the
capture where the decoder reads it, in a run record's event, and is not seen
in any other event (docs/robustness.md, "One decoder answer"), on both paths."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import FIXTURES
from helpers.differential import decode
from test_native import _decode, assert_same_trace

from traceparse._proto import xplane_pb2
from traceparse.decode import native, wire
from traceparse.decode.trace import MemoryTrace

built = pytest.mark.skipif(native._native is None, reason="the compiled loops were not built")
ATTENTION = next((FIXTURES / "jax08_attention").rglob("*.xplane.pb"))
Place = tuple[int, int, int]  # (plane, line, event) positions


def _field(number: int, payload: bytes) -> bytes:
    return wire.encode_varint(number << 3 | wire.LEN) + wire.encode_varint(len(payload)) + payload


def _encode(space: xplane_pb2.XSpace, tails: dict[Place, bytes]) -> bytes:
    """``space`` on the wire, with ``tails[place]`` written after that event's own
    bytes (a parser merges them into the event). Planes keep their field order."""
    out = b""
    for p, plane in enumerate(space.planes):
        head = xplane_pb2.XPlane(id=plane.id, name=plane.name)
        rest = xplane_pb2.XPlane()
        rest.CopyFrom(plane)
        rest.ClearField("id")
        rest.ClearField("name")
        rest.ClearField("lines")
        lines = b""
        for n, line in enumerate(plane.lines):
            bare = xplane_pb2.XLine()
            bare.CopyFrom(line)
            bare.ClearField("events")
            events = b"".join(
                _field(4, event.SerializeToString() + tails.get((p, n, e), b""))
                for e, event in enumerate(line.events)
            )
            lines += _field(3, bare.SerializeToString() + events)
        out += _field(1, head.SerializeToString() + lines + rest.SerializeToString())
    return out


def _space() -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    space.ParseFromString(ATTENTION.read_bytes())
    return space


def _find(space: xplane_pb2.XSpace, line_name: str, event_name: str) -> Place:
    """The first event named ``event_name`` on the host line ``line_name``."""
    for p, plane in enumerate(space.planes):
        names = {k: m.name for k, m in plane.event_metadata.items()}
        for n, line in enumerate(plane.lines):
            if line.name != line_name:
                continue
            for e, event in enumerate(line.events):
                if names.get(event.metadata_id) == event_name:
                    return p, n, e
    raise AssertionError(f"no {event_name} on {line_name}")


def _records(trace: MemoryTrace | str) -> tuple[pd.DataFrame, pd.DataFrame]:
    assert isinstance(trace, MemoryTrace), trace
    assert trace.runs is not None
    return trace.runs.runs, trace.runs.allocation_runs


@built
def test_num_occurrences_after_offset_clears_it_on_both_paths() -> None:
    """An execute window written with ``num_occurrences`` after its ``offset_ps``:
    protobuf clears the offset, so the window starts at its line's timestamp on
    both paths, as if written with offset 0."""
    space = _space()
    place = _find(space, "python", "PjRtStreamExecutorLoadedExecutable::ExecuteHelper")
    crafted = _encode(space, {place: xplane_pb2.XEvent(num_occurrences=3).SerializeToString()})
    assert_same_trace(crafted)
    p, n, e = place
    event = space.planes[p].lines[n].events[e]
    event.num_occurrences = 3  # protobuf's own reading of the crafted bytes
    assert event.offset_ps == 0
    expected = _records(_decode(_encode(space, {}), False))
    for on in (True, False):
        runs, tied = _records(_decode(crafted, on))
        pd.testing.assert_frame_equal(runs, expected[0])
        pd.testing.assert_frame_equal(tied, expected[1])


@built
@pytest.mark.parametrize("line", ["Host Threads/2356", "python"])
def test_a_line_with_a_non_utf8_string_keeps_its_records(line: str) -> None:
    """A stat whose text is not UTF-8 on one event of a host line (the kernel
    launches' line, before the python line; the python line itself): upb
    refuses that line, yet its records stay and later lines keep their numbers,
    so the records are those of the capture without the stat, on both paths."""
    space = _space()
    event = "hipModuleLaunchKernel" if line.startswith("Host") else "MemoryAllocation"
    place = _find(space, line, event)
    bad = xplane_pb2.XStat(metadata_id=9999).SerializeToString() + _field(5, b"\xff\xfe")
    crafted = _encode(space, {place: _field(4, bad)})
    with pytest.raises(Exception, match=r"UTF-8|utf-8|parse"):
        xplane_pb2.XSpace().ParseFromString(crafted)
    assert_same_trace(crafted)
    expected = _records(_decode(_encode(space, {}), True))
    assert (expected[1]["run"] >= 0).sum() > 100  # the allocations tied to runs
    for on in (True, False):
        runs, tied = _records(_decode(crafted, on))
        pd.testing.assert_frame_equal(runs, expected[0])
        pd.testing.assert_frame_equal(tied, expected[1])


# A stat that does not parse: an id no stat metadata names, then a field of wire
# type 7 (no such wire type).
_UNNAMED = xplane_pb2.XStat(metadata_id=9999).SerializeToString()
BROKEN_STAT = _field(4, _UNNAMED + b"\x0f\x01")
# A stat holding a group (field 15: start, a varint, end), which upb skips as an
# unknown field and the decoder refuses on both paths, as everywhere else.
GROUP_STAT = _field(4, _UNNAMED + bytes([15 << 3 | 3, 0x08, 0x01, 15 << 3 | 4]))


@built
@pytest.mark.parametrize("stat", [BROKEN_STAT, GROUP_STAT], ids=["wire_type_7", "group"])
def test_a_broken_stat_in_a_run_record_refuses_the_capture_on_both_paths(stat: bytes) -> None:
    """The stats of a run record's event (an execute window) are all read, so one
    that does not parse refuses the capture: once the compiled path refused it
    while the numpy path dropped the line's records (a bad wire type) or read
    the line with upb, which accepts a group."""
    space = _space()
    place = _find(space, "python", "PjRtStreamExecutorLoadedExecutable::ExecuteHelper")
    crafted = _encode(space, {place: stat})
    if stat is BROKEN_STAT:
        # protobuf refuses it too (its message differs between releases).
        with pytest.raises(Exception):  # noqa: B017
            xplane_pb2.XSpace().ParseFromString(crafted)
    assert decode(crafted, True) == decode(crafted, False) == "CorruptCaptureError"


@built
def test_a_broken_stat_outside_the_run_records_keeps_every_record() -> None:
    """A stat that does not parse on an event that is no run record (``RecordUsage``
    on the python line, whose stats neither path reads): the capture loads with
    the records of the capture without it on both paths; once the numpy path
    dropped every record of that line (upb refuses the line, and the fallback
    refused it for the broken stat)."""
    space = _space()
    place = _find(space, "python", "RecordUsage")
    crafted = _encode(space, {place: BROKEN_STAT})
    with pytest.raises(Exception):  # noqa: B017 (protobuf's message differs by release)
        xplane_pb2.XSpace().ParseFromString(crafted)
    assert_same_trace(crafted)
    intact = _decode(_encode(space, {}), True)
    expected = _records(intact)
    assert (expected[1]["run"] >= 0).sum() > 100  # the allocations tied to runs
    for on in (True, False):
        trace = decode(crafted, on)
        runs, tied = _records(trace)
        pd.testing.assert_frame_equal(runs, expected[0])
        pd.testing.assert_frame_equal(tied, expected[1])
        assert isinstance(trace, MemoryTrace) and isinstance(intact, MemoryTrace)
        assert trace.runs is not None and intact.runs is not None
        assert trace.runs.modules == intact.runs.modules
