"""The decoder's compiled loops (``traceparse.decode.native``) against upb and
against the numpy path they stand in for: every capture decodes to the same
tables both ways, and bad bytes fail the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, REPO
from helpers import xplane_lines
from helpers.compiled import expect_built
from helpers.xplane_lines import MARKERS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import traceparse
from traceparse._proto import xplane_pb2
from traceparse.decode import native, wire
from traceparse.decode.planes import select, split_planes
from traceparse.decode.stat_tables import StatTables
from traceparse.decode.trace import MemoryTrace
from traceparse.decode.xspace import decode_xspace
from traceparse.errors import CorruptCaptureError
from traceparse.tables import build

built = pytest.mark.skipif(native._native is None, reason="the compiled loops were not built")
CAPTURES = sorted(FIXTURES.rglob("*.xplane.pb"))
CORPUS = sorted((REPO / "tests" / "fuzz" / "corpus").glob("*.xplane.pb*"))


def _decode(data: bytes, on: bool) -> MemoryTrace | str:
    with native.use_native(on):
        try:
            return decode_xspace(data, path="capture.xplane.pb", host="host")
        except CorruptCaptureError as exc:
            return type(exc).__name__


def assert_same_trace(data: bytes) -> None:
    compiled, numpy = _decode(data, True), _decode(data, False)
    if isinstance(numpy, str) or isinstance(compiled, str):
        assert compiled == numpy
        return
    for name in ("events", "step_markers", "op_time", "function_runs"):
        pd.testing.assert_frame_equal(getattr(compiled, name), getattr(numpy, name), obj=name)
    for name in ("op_types", "start_ns", "duration_ps", "diagnostics", "stat_names"):
        assert getattr(compiled, name) == getattr(numpy, name), name
    assert (compiled.runs is None) == (numpy.runs is None)
    if compiled.runs is not None and numpy.runs is not None:
        pd.testing.assert_frame_equal(compiled.runs.runs, numpy.runs.runs)
        pd.testing.assert_frame_equal(compiled.runs.allocation_runs, numpy.runs.allocation_runs)
        assert compiled.runs.modules == numpy.runs.modules


@built
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(FIXTURES)).split("/")[0])
def test_every_fixture_decodes_the_same_both_ways(path: Path) -> None:
    assert_same_trace(path.read_bytes())


@built
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_hostile_captures_fail_or_decode_the_same_both_ways(path: Path) -> None:
    data = path.read_bytes()
    if path.suffix == ".gz":
        pytest.skip("compressed: the corpus tests read it through load()")
    assert_same_trace(data)


@built
def test_truncated_captures_fail_or_decode_the_same_both_ways() -> None:
    data = (FIXTURES / "keras_train").rglob("*.xplane.pb").__next__().read_bytes()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 1):
        assert_same_trace(data[:cut])


def _upb_line(data: bytes, lo: int, hi: int) -> xplane_pb2.XLine:
    return xplane_pb2.XLine.FromString(data[lo:hi])


def _is_int(stat: xplane_pb2.XStat) -> bool:
    return stat.WhichOneof("value") in ("uint64_value", "int64_value")


# Run records: events of these ids, or with a stat of these ids (any value).
RUN_EVENTS, RUN_STATS = (3, 4), (13, 2**20)


def expect_scan_like_upb(data: bytes, lines: list[tuple[int, int]]) -> None:
    """Events of even metadata id picked, the odd ones timed: the picks and sums
    are what upb's parse of each line says (markers pick their events too); so
    are the run records."""
    parsed = [_upb_line(data, lo, hi) for lo, hi in lines]
    ids = {e.metadata_id & (2**64 - 1) for line in parsed for e in line.events}
    picked = np.array(sorted(i for i in ids if i % 2 == 0), dtype=np.uint64)
    timed = np.array(sorted(i for i in ids if i % 2), dtype=np.uint64)
    markers = np.array(MARKERS, dtype=np.uint64)
    run_ids = [np.array(ids, dtype=np.uint64) for ids in (RUN_EVENTS, RUN_STATS)]
    scanned = native.scan_lines(data, lines, picked, timed, markers, *run_ids)
    assert scanned.stamps.tolist() == [line.timestamp_ns for line in parsed]
    want_records, want_runs, want_counts, want_totals = [], [], dict.fromkeys(timed.tolist(), 0), {}
    for number, line in enumerate(parsed):
        for index, event in enumerate(line.events):
            mid = event.metadata_id & (2**64 - 1)
            if mid in RUN_EVENTS or any(s.metadata_id in RUN_STATS for s in event.stats):
                want_runs.append((mid, number, event))
            marked = any(s.metadata_id in MARKERS and _is_int(s) for s in event.stats)
            if mid % 2 == 0 or marked:
                want_records.append((mid, number, index, event))
            else:
                want_counts[mid] += 1
                want_totals[mid] = want_totals.get(mid, 0) + event.duration_ps
    records = np.stack(scanned.picked, axis=1).tolist()
    assert len(records) == len(want_records)
    for (start, end, mid, number, index), (w_mid, w_number, w_index, w_event) in zip(
        records, want_records, strict=True
    ):
        assert (mid & (2**64 - 1), number, index) == (w_mid, w_number, w_index)
        assert xplane_pb2.XEvent.FromString(data[start:end]) == w_event
    runs = np.stack(scanned.runs, axis=1).tolist()
    assert len(runs) == len(want_runs)
    for (start, end, mid, number), (w_mid, w_number, w_event) in zip(runs, want_runs, strict=True):
        assert (mid & (2**64 - 1), number) == (w_mid, w_number)
        assert xplane_pb2.XEvent.FromString(data[start:end]) == w_event
    assert dict(zip(timed.tolist(), scanned.counts.tolist(), strict=True)) == want_counts
    for mid, total in want_totals.items():
        assert scanned.totals[timed.tolist().index(mid)] == np.int64(np.uint64(total % 2**64))


@built
@pytest.mark.parametrize("name", ["keras_train", "xla_keras", "jax08_conv"])
def test_real_lines_scan_like_upb(name: str) -> None:
    data = next((FIXTURES / name).rglob("*.xplane.pb")).read_bytes()
    for plane in split_planes(data):
        if plane.lines:
            expect_scan_like_upb(data, plane.lines)


@built
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(xplane_lines.events, max_size=30),
    timestamp=st.integers(-(2**63), 2**63 - 1),
    before=st.binary(max_size=16),
)
def test_random_lines_scan_like_upb(
    events: list[xplane_pb2.XEvent], timestamp: int, before: bytes
) -> None:
    line = xplane_pb2.XLine(id=3, timestamp_ns=timestamp, events=events).SerializeToString()
    data = before + line + line
    bounds = [(len(before), len(before) + len(line)), (len(before) + len(line), len(data))]
    expect_scan_like_upb(data, bounds)


@built
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(xplane_lines.events, max_size=20))
def test_random_events_select_and_read_the_same_both_ways(
    events: list[xplane_pb2.XEvent],
) -> None:
    data = xplane_pb2.XLine(timestamp_ns=7, events=events).SerializeToString()
    ids = sorted({e.metadata_id for e in events})
    memory = np.array(ids[::2], dtype=np.uint64)
    ops = np.array(ids[1::2], dtype=np.uint64)
    markers = np.array(MARKERS, dtype=np.uint64)
    picks = []
    for on in (True, False):
        with native.use_native(on):
            picks.append(select(data, [(0, len(data))], memory, ops, markers, lambda t: t))
    (compiled, compiled_times, _), (numpy, numpy_times, _) = picks
    for name in ("starts", "ends", "metadata_ids", "line_ts_ns", "order"):
        assert getattr(compiled, name).tolist() == getattr(numpy, name).tolist(), name
    for name in ("metadata_ids", "counts", "total_ps"):
        assert getattr(compiled_times, name).tolist() == getattr(numpy_times, name).tolist()
    if len(compiled):
        ids = np.array(sorted({s.metadata_id for e in events for s in e.stats}), dtype=np.uint64)
        rows = np.arange(ids.size)
        offsets, durations, tables = native.read_events(
            data, compiled.starts, compiled.ends, ids, rows, ids.size
        )
        spans = zip(compiled.starts.tolist(), compiled.ends.tolist(), strict=True)
        upb = [xplane_pb2.XEvent.FromString(data[s:e]) for s, e in spans]
        assert offsets.tolist() == [e.offset_ps for e in upb]
        assert durations.tolist() == [e.duration_ps for e in upb]
        for column, event in enumerate(upb):
            expected = {}
            for stat in event.stats:  # the last stat of an id wins
                kind = stat.WhichOneof("value")
                expected[stat.metadata_id] = FIELD_NUMBERS[kind], getattr(stat, kind)
            for row, stat_id in enumerate(ids.tolist()):
                if stat_id in expected:
                    number, value = expected[stat_id]
                    assert tables.kinds[row, column] == number
                    if number == 5:
                        start, length = tables.starts[row, column], tables.lengths[row, column]
                        assert data[start : start + length] == value.encode()
                    else:
                        assert int(tables.values[row, column]) == value % 2**64
                else:
                    assert tables.kinds[row, column] == 0


FIELD_NUMBERS = {"str_value": 5, "int64_value": 4, "uint64_value": 3}


def read_one(event: bytes, stat_ids: list[int]) -> tuple[int, int, StatTables]:
    ids = np.array(stat_ids, dtype=np.uint64)
    bounds = np.array([0]), np.array([len(event)])
    offsets, durations, tables = native.read_events(
        event, *bounds, ids, np.arange(ids.size), ids.size
    )
    return int(offsets[0]), int(durations[0]), tables


@built
def test_odd_stat_layouts_read_by_protobufs_rules() -> None:
    # Value before id, the id twice, two members of the oneof (the last wins), a
    # wrong wire type for a value field (ignored), a fixed32 field (ignored).
    stat = b"\x18\x05\x08\x02\x08\x03" + b"\x2a\x02hi" + b"\x20\x07" + b"\x28\x01" + b"\x45\0\0\0\0"
    no_value = b"\x08\x03"  # a later stat of the same id without a value: no change
    event = b"\x10\x09"
    for piece in (stat, no_value):
        event += b"\x22" + bytes([len(piece)]) + piece
    offset, duration, tables = read_one(event + b"\x18\x04\x10\x0b", [2, 3])
    assert (offset, duration) == (11, 4)
    assert tables.kinds.tolist() == [[0], [4]] and tables.values.tolist() == [[0], [7]]
    upb = xplane_pb2.XStat.FromString(stat)
    assert (upb.metadata_id, upb.WhichOneof("value"), upb.int64_value) == (3, "int64_value", 7)


@built
def test_a_marker_read_after_the_id_changes_is_not_missed() -> None:
    # The first id is a picked one (its stats are skipped as the line is read);
    # a later id, the one that counts, is not: the skipped stats are read then.
    stat = xplane_pb2.XStat(metadata_id=MARKERS[0], int64_value=3).SerializeToString()
    event = b"\x08\x02" + b"\x22" + bytes([len(stat)]) + stat + b"\x08\x03\x18\x09"
    data = b"\x22" + bytes([len(event)]) + event
    picked, timed = np.array([2], np.uint64), np.array([3], np.uint64)
    scanned = native.scan_lines(data, [(0, len(data))], picked, timed, np.array(MARKERS, np.uint64))
    assert [c.tolist() for c in scanned.picked] == [[2], [len(data)], [3], [0], [0]]
    assert scanned.counts.tolist() == [0]
    expect_scan_like_upb(data, [(0, len(data))])


@built
@pytest.mark.parametrize(
    "line",
    [
        b"\x22\x7f\x08",  # an event longer than its line
        b"\x22\x03\x08\x80\x80",  # a varint cut short
        b"\x22\x02\x0b\x00",  # wire type 3 (groups)
        b"\x22\x02\x00\x00",  # field number 0
        b"\x1a",  # a line field cut short
        b"\x22\x03\x09\x00\x00",  # a fixed64 cut short
    ],
)
def test_malformed_lines_raise_wire_errors(line: bytes) -> None:
    good = xplane_pb2.XLine(events=[xplane_pb2.XEvent(metadata_id=1)]).SerializeToString()
    data = good + line
    none = np.zeros(0, dtype=np.uint64)
    with pytest.raises(wire.WireError):
        native.scan_lines(data, [(0, len(data))], none, none, none)
    event = line[2:]  # the event's own bytes, for the events that have some
    if event:
        with pytest.raises(wire.WireError):
            read_one(event, [])


@built
def test_bounds_outside_the_buffer_raise() -> None:
    none = np.zeros(0, dtype=np.uint64)
    with pytest.raises(wire.WireError, match="outside"):
        native.scan_lines(b"\x22\x00", [(0, 3)], none, none, none)
    with pytest.raises(wire.WireError, match="outside"):
        native.read_events(b"\x10\x01", np.array([1]), np.array([0]), none, none, 0)


@built
@pytest.mark.parametrize("seed", range(4))
def test_pairing_in_one_pass_is_pairing_by_sorting(seed: int) -> None:
    """Few addresses (many reuses, frees with no allocation, allocations with no
    free), unknown ones, negative ids, several allocators; the last seed has
    more addresses than the pass's first table holds."""
    rng = np.random.default_rng(seed)
    for events, addresses in ((0, 1), (1, 1), (300, 6), (5000, 40), (40_000, 30_000)):
        if seed < 3 and addresses > 10_000:
            continue
        owner = rng.integers(-1, 3, events).astype(np.int32)
        address = rng.integers(-addresses, addresses, events).astype(np.int64)
        known = rng.random(events) < 0.9
        is_allocation = rng.random(events) < 0.55
        one_pass = native.pair_events(owner, address, known, is_allocation)
        sorting = build._pair_by_sorting(owner, address, known, is_allocation)
        for got, want in zip(one_pass, sorting, strict=True):
            np.testing.assert_array_equal(got, want)
        assert one_pass[2].base is None  # not a view that keeps a slot per free


@built
@pytest.mark.parametrize("capture", ["keras_train", "two_runs", "layers_cnn_xla", "legacy"])
def test_tables_are_the_same_both_ways(capture: str) -> None:
    def tables(on: bool) -> list[pd.DataFrame]:
        with native.use_native(on):
            prof = traceparse.load(FIXTURES / capture)
            return [prof.allocations, prof.timeline, prof.frees_without_allocation]

    for got, want in zip(tables(True), tables(False), strict=True):
        pd.testing.assert_frame_equal(got, want)


@built
def test_pairing_checks_its_arguments() -> None:
    pair, owner = native._native.pair_events, np.zeros(1, np.int32)
    one, empty = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    with pytest.raises(TypeError, match="one owner"):
        pair(np.zeros(2, np.int32), one, b"\x01", b"\x01", one, one, one)
    with pytest.raises(ValueError, match="more allocations than slots"):
        pair(owner, one, b"\x01", b"\x01", empty, empty, one)
    with pytest.raises(ValueError, match="fewer allocations than slots"):
        pair(owner, one, b"\x01", b"\x00", one, one, one)
    with pytest.raises(ValueError, match="more orphans than slots"):
        pair(owner, one, b"\x01", b"\x00", empty, empty, empty)


def test_the_loops_are_built_where_a_compiler_is() -> None:
    expect_built(native._native, "traceparse/decode/_native.c", "TRACEPARSE_PURE_PYTHON")
    assert native.available()


def test_the_environment_can_ask_for_the_numpy_path() -> None:
    code = "from traceparse.decode import native; print(native.available())"
    env = {**os.environ, "TRACEPARSE_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
