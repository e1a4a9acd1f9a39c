"""The fast decoder against the plain reference decoder on hand-built XSpaces:
edge cases a real capture rarely shows, and random ones from hypothesis."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from helpers.space import START_NS, SpaceBuilder, alloc, free
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import memory_events

import traceparse
from traceparse._proto import xplane_pb2
from traceparse.decode.xspace import decode_xspace

# Stat ids are positions in this list, plus one.


def test_pairs_across_threads_and_keeps_prior_allocations_apart() -> None:
    b = SpaceBuilder()
    one, two = b.line(), b.line()
    alloc(b, one, 100, addr=0xA, size=512, total=1536, tf_op="x:Op", shape="[128]", data_type=1)
    free(b, two, 200, addr=0xA, size=512, total=1024)
    free(b, two, 300, addr=0xB, size=1024, total=0)  # allocated before the capture
    alloc(b, one, 400, addr=0xA, size=256, total=256, shape="[]", data_type=2)
    prof = b.decode()
    allocs = prof.allocations
    assert allocs["address"].tolist() == [0xA, 0xA]
    assert allocs["free_ps"].tolist()[0] == 4967 * 1000 + 200
    assert pd.isna(allocs["free_ps"].iloc[1])
    assert allocs["shape"].tolist() == ["[128]", "[]"]
    assert allocs["num_elements"].tolist() == [128, 1]
    assert allocs["estimated_bytes"].tolist() == [512, 8]
    assert allocs["estimate_status"].tolist() == ["match", "over"]
    orphans = prof.frees_without_allocation
    assert orphans["address"].tolist() == [0xB]
    assert orphans["allocated_bytes"].tolist() == [1024]


def test_stat_value_kinds_and_oneof_overrides() -> None:
    b = SpaceBuilder()
    line = b.line()
    event = b.event(
        line,
        1,
        5,
        allocator_name="mklcpu",
        addr=7,
        requested_bytes=10.0,
        allocation_bytes=256,
        bytes_allocated=256,
        fragmentation=float("nan"),
        data_type=1,
        shape="[2,5]",
        id=-3,
    )
    # A later value of the same field wins (protobuf's merge rule for a oneof).
    stat = event.stats.add(metadata_id=b.stat_id("allocation_bytes"))
    stat.int64_value = 512
    allocs = b.decode().allocations
    row = allocs.iloc[0]
    assert row["requested_bytes"] == 10
    assert row["allocated_bytes"] == 512
    assert row["step_id"] == -3
    assert pd.isna(b.decode().timeline["fragmentation"].iloc[0])


def test_events_without_an_allocator_name_use_the_device_index() -> None:
    b = SpaceBuilder()
    line = b.line()
    b.event(
        line,
        1,
        5,
        index_on_host=3,
        addr=1,
        requested_bytes=4,
        allocation_bytes=256,
        bytes_allocated=256,
    )
    assert b.decode().allocators == ["3"]


def test_absolute_line_timestamps_are_put_on_the_capture_clock() -> None:
    b = SpaceBuilder()
    line = b.line(timestamp_ns=START_NS + 1000)
    alloc(b, line, 5, addr=1, size=256, total=256)
    assert b.decode().timeline["time_ps"].tolist() == [1000 * 1000 + 5]


def test_step_markers_need_step_num_and_root() -> None:
    b = SpaceBuilder()
    line = b.line()
    b.event(line, 3, 0, step_num=0, _r=1).duration_ps = 100
    b.event(line, 3, 200, step_num=1, _r=1).duration_ps = 100
    b.event(line, 3, 400, step_num=2).duration_ps = 100  # not a root event: ignored
    alloc(b, line, 250, addr=1, size=256, total=256)
    prof = b.decode()
    assert prof.step_markers["step"].tolist() == [0, 1]
    assert prof.allocations["step"].tolist() == [1]


def test_a_stat_metadata_id_past_int64_is_matched_as_written() -> None:
    # Ids are int64 in the schema and uint64 varints on the wire: a negative one
    # takes ten bytes and must still find its name.
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 5, addr=1, size=256, total=256)
    stat_id = b.stat_id("requested_bytes")
    b.plane.stat_metadata[-7].id, b.plane.stat_metadata[-7].name = -7, "requested_bytes"
    del b.plane.stat_metadata[stat_id]
    for stat in line.events[0].stats:
        if stat.metadata_id == stat_id:
            stat.metadata_id = -7
    assert b.decode().allocations["requested_bytes"].tolist() == [256]


def test_negative_event_metadata_ids_are_matched_as_written() -> None:
    # Map keys are int64; events carry them as uint64 varints (ten bytes when
    # negative). Memory events, ops and step markers must all still match.
    b = SpaceBuilder()
    for key, name in ((-1, "MemoryAllocation"), (-3, "neg/MatMul:MatMul"), (-4, "train")):
        b.plane.event_metadata[key].id, b.plane.event_metadata[key].name = key, name
    line = b.line()
    b.event(line, -4, 0, step_num=1, _r=1).duration_ps = 100
    b.event(line, -3, 10).duration_ps = 7
    alloc(b, line, 20, addr=1, size=256, total=256)
    line.events[-1].metadata_id = -1
    prof = b.decode()
    assert prof.allocations["requested_bytes"].tolist() == [256]
    assert prof.step_markers[["name", "step"]].values.tolist() == [["train", 1]]
    assert prof.traces[0].op_time.to_dict("records") == [
        {"op": "neg/MatMul", "count": 1, "total_ps": 7}
    ]


def test_roots_are_preferred_across_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # Events are decoded a few at a time: a batch holding only a plain marker must
    # not keep it when another batch has root markers.
    monkeypatch.setattr(traceparse.decode.xspace, "_EVENTS_PER_BATCH", 2)
    b = SpaceBuilder()
    line = b.line()
    b.event(line, 3, 0, step_num=7).duration_ps = 100  # not a root event: ignored
    alloc(b, line, 50, addr=1, size=256, total=256)
    b.event(line, 3, 200, step_num=1, _r=1).duration_ps = 100
    b.event(line, 3, 400, step_num=2, _r=1).duration_ps = 100
    alloc(b, line, 450, addr=2, size=256, total=512)
    prof = b.decode()
    assert prof.step_markers["step"].tolist() == [1, 2]
    assert prof.allocations["step"].tolist() == [pd.NA, 2]


def test_batching_does_not_change_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    b = SpaceBuilder()
    lines = [b.line(timestamp_ns=4967 + 10 * i) for i in range(3)]
    for i in range(12):
        alloc(b, lines[i % 3], 1000 - 7 * i, addr=i + 1, size=256 * (i + 1), total=256 * (i + 1))
        b.event(lines[i % 3], 3, 10 * i, step_num=i, _r=1).duration_ps = 5
    whole = b.decode()
    monkeypatch.setattr(traceparse.decode.xspace, "_EVENTS_PER_BATCH", 3)
    batched = b.decode()
    pd.testing.assert_frame_equal(whole.traces[0].events, batched.traces[0].events)
    pd.testing.assert_frame_equal(whole.step_markers, batched.step_markers)


def test_op_compute_time_is_summed_from_op_events() -> None:
    b = SpaceBuilder()
    line = b.line()
    b.event(line, 4, 0).duration_ps = 70
    b.event(line, 4, 100).duration_ps = 30
    trace = b.decode().traces[0]
    assert trace.op_types == {"dense/MatMul": "MatMul"}
    assert trace.op_time.to_dict("records") == [{"op": "dense/MatMul", "count": 2, "total_ps": 100}]


def test_malformed_event_bytes_raise_a_corrupt_capture_error() -> None:
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 5, addr=1, size=256, total=256)
    data = bytearray(b.space.SerializeToString())
    # Corrupt a length inside the event's stats while the outer framing stays valid.
    event_bytes = line.events[0].SerializeToString()
    at = bytes(data).find(event_bytes)
    stat_at = at + event_bytes.find(b"\x22")
    data[stat_at + 1] = 0x7F
    with pytest.raises(traceparse.CorruptCaptureError, match=r"test\.xplane\.pb"):
        decode_xspace(bytes(data), path="test.xplane.pb", host="h")


# Random captures: the fast decoder and the reference decoder agree.

sizes = st.integers(min_value=0, max_value=2**40)
event_st = st.tuples(
    st.booleans(),
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=0, max_value=7),
    sizes,
    st.sampled_from(["float32", "[3,4]", "", "[]", "op/with:colon", "ünï"]),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(event_st, max_size=12), min_size=1, max_size=4))
def test_random_captures_decode_like_the_reference(lines: list[list[tuple]]) -> None:  # type: ignore[type-arg]
    b = SpaceBuilder()
    for events in lines:
        line = b.line(timestamp_ns=len(b.lines) * 10)
        for is_alloc, t, addr, size, text, step in sorted(events, key=lambda e: e[1]):
            b.event(
                line,
                1 if is_alloc else 2,
                t,
                allocator_name=f"alloc{addr % 2}",
                addr=addr,
                allocation_bytes=size,
                bytes_allocated=size,
                tf_op=text,
                shape=text,
                id=step,
            )
    expected = memory_events(b.space)
    timeline = b.decode().timeline
    assert timeline["time_ps"].tolist() == [e["time_ps"] for e in expected]
    assert timeline["address"].tolist() == [e["addr"] for e in expected]
    assert timeline["allocation_bytes"].tolist() == [e["allocation_bytes"] for e in expected]
    assert timeline["allocator"].tolist() == [e["allocator_name"] for e in expected]
    assert [k == "allocation" for k in timeline["kind"]] == [e["is_allocation"] for e in expected]
    prof = b.decode()
    allocs = prof.allocations
    expected_allocs = [e for e in expected if e["is_allocation"]]
    assert allocs["op"].astype(object).fillna("").tolist() == [e["tf_op"] for e in expected_allocs]
    assert allocs["step_id"].tolist() == [e["id"] for e in expected_allocs]
    assert len(allocs) + len(prof.frees_without_allocation) + int(
        allocs["free_ps"].notna().sum()
    ) == len(expected)
    assert not math.isnan(float(np.sum(allocs["allocated_bytes"].to_numpy(dtype=float))))


def test_without_a_capture_start_epoch_lines_count_from_the_earliest() -> None:
    b = SpaceBuilder()
    first, second = b.line(timestamp_ns=START_NS + 1000), b.line(timestamp_ns=START_NS + 5000)
    alloc(b, first, 5, addr=1, size=256, total=256)
    free(b, second, 7, addr=1, size=256, total=0)
    space = xplane_pb2.XSpace.FromString(b.space.SerializeToString())
    del space.planes[0]  # older TensorFlow wrote no "Task Environment" plane
    trace = decode_xspace(space.SerializeToString(), path="old.xplane.pb", host="h")
    assert trace.events["time_ps"].tolist() == [5, 4000 * 1000 + 7]
    assert any("does not record when it started" in d for d in trace.diagnostics)


def _clock_mark(b: SpaceBuilder, line: xplane_pb2.XLine, offset_ps: int, wall_ns: int) -> None:
    """traceparse's clock mark (capture/sources.py ``mark_clock``) on ``line``."""
    b.plane.event_metadata[50].id, b.plane.event_metadata[50].name = 50, "traceparse.clock"
    b.plane.stat_metadata[60].id, b.plane.stat_metadata[60].name = 60, "traceparse_wall_ns"
    event = line.events.add(metadata_id=50, offset_ps=offset_ps, duration_ps=1000)
    event.stats.add(metadata_id=60, int64_value=wall_ns)


@pytest.mark.parametrize("task_environment", [False, True])
def test_the_clock_mark_says_when_a_capture_started_that_does_not_say(
    task_environment: bool,
) -> None:
    # TensorFlow 2.16 counts times from the profiler's start and writes no
    # "Task Environment" plane: the clock mark alone puts them on the wall clock.
    b = SpaceBuilder()
    line = b.line(timestamp_ns=12_524)
    alloc(b, line, 5_000, addr=1, size=256, total=256)
    _clock_mark(b, line, 3_000_000, START_NS - 500)  # later marks do not count
    _clock_mark(b, line, 2_000_000, START_NS - 1_000)
    space = xplane_pb2.XSpace.FromString(b.space.SerializeToString())
    if not task_environment:
        del space.planes[0]
    trace = decode_xspace(space.SerializeToString(), path="t.xplane.pb", host="h")
    if task_environment:  # the capture's own word wins
        assert trace.start_ns == START_NS
    else:
        assert trace.start_ns == START_NS - 1_000 - (12_524 + 2_000)
    assert trace.events["time_ps"].tolist() == [12_524 * 1000 + 5_000]
    assert trace.step_markers.empty  # a mark is not a step


def test_a_clock_mark_that_is_not_a_time_is_ignored() -> None:
    b = SpaceBuilder()
    line = b.line(timestamp_ns=12_524)
    alloc(b, line, 5_000, addr=1, size=256, total=256)
    _clock_mark(b, line, 2_000_000, -5)
    space = xplane_pb2.XSpace.FromString(b.space.SerializeToString())
    del space.planes[0]
    assert decode_xspace(space.SerializeToString(), path="t.xplane.pb", host="h").start_ns is None


@pytest.mark.parametrize("name", ["keras_train", "two_runs"])
def test_real_captures_decode_alike_in_small_batches(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refs resolve to labels once per plane and are reused by later batches:
    # many small batches must give the tables one batch gives.
    from conftest import xplane_files

    for path in xplane_files(name):
        data = path.read_bytes()
        whole = decode_xspace(data, path=str(path), host="h")
        monkeypatch.setattr(traceparse.decode.xspace, "_EVENTS_PER_BATCH", 7)
        monkeypatch.setattr(traceparse.decode.xspace, "_MAX_EVENTS_PER_BATCH", 7)
        batched = decode_xspace(data, path=str(path), host="h")
        monkeypatch.undo()
        assert len(whole.events) > 7
        pd.testing.assert_frame_equal(whole.events, batched.events)
        pd.testing.assert_frame_equal(whole.step_markers, batched.step_markers)


def test_batch_size_grows_with_the_file_within_bounds() -> None:
    from traceparse.decode.xspace import events_per_batch

    sizes = [events_per_batch(n) for n in (0, 10**6, 30 * 10**6, 10**8, 10**9, 2 * 10**9)]
    assert sizes == sorted(sizes)
    assert sizes[0] == sizes[1] == 4096
    assert sizes[-1] == 16384


def test_shared_labels_are_kept_apart_per_plane() -> None:
    # The same ref position names different strings in two planes' layouts.
    from traceparse.decode.collect import Labels
    from traceparse.decode.fields import BatchLabels, StatLayout

    first = StatLayout({5: "tf_op", 9: "conv"})
    second = StatLayout({5: "tf_op", 9: "relu"})
    labels = Labels()
    codes = np.array([1, 1, -1, 2, 1])  # position 1: key 9; 2: the batch's inline text
    got = labels.encode(codes, BatchLabels(first, ["inline"]))
    assert [labels.values[c] if c >= 0 else None for c in got] == [
        "conv",
        "conv",
        None,
        "inline",
        "conv",
    ]
    got = labels.encode(np.array([1, 0]), BatchLabels(second, []))
    assert [labels.values[c] for c in got] == ["relu", "tf_op"]
    got = labels.encode(np.array([1]), BatchLabels(first, []))  # from the plane's cache
    assert [labels.values[c] for c in got] == ["conv"]
    assert first.ref_positions(np.array([9, 5, 7, 2**40], dtype=np.uint64)).tolist() == [
        1,
        0,
        -1,
        -1,
    ]


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(0, 5)), min_size=0, max_size=30
    ),
    st.booleans(),
)
def test_time_order_is_lexsort_or_none_when_already_sorted(
    rows: list[tuple[int, int, int]], presort: bool
) -> None:
    from traceparse.decode.collect import _time_order

    if presort:
        rows = sorted(rows)
    time_ps, planes, order = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
    expected = np.lexsort([order, planes, time_ps])
    got = _time_order(time_ps, planes.astype(np.int32), order)
    if got is None:  # only when the rows are in order already
        assert rows == sorted(rows)
        assert expected.tolist() == list(range(len(rows)))
    else:
        assert got.tolist() == expected.tolist()
