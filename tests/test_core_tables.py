"""The core tables on real captures, checked against the allocator's own
counters and against a plain replay of the events read with TensorFlow's own
protobuf module."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import MANIFEST, MEMORY_FIXTURES, LazyModule, fixture_file, xplane_files
from reference import memory_events, replay

import traceparse
from traceparse.decode.fields import INT_STATS, STR_STATS
from traceparse.decode.trace import EVENT_COLUMNS, OP_TIME_COLUMNS, STEP_MARKER_COLUMNS
from traceparse.tables.contracts import ALLOCATIONS

xplane_pb2 = LazyModule("tensorflow.tsl.profiler.protobuf.xplane_pb2")


ALLOCATION_COLUMNS = list(ALLOCATIONS.columns)


def tf_space(path: Path) -> object:
    space = xplane_pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    return space


def test_replay_reproduces_the_allocator_counter(xplane_fixture: Path) -> None:
    """After each event, live allocated bytes + bytes from before the capture
    equal the event's bytes_allocated; the before-capture part is constant
    apart from frees of pre-capture allocations, which the table lists."""
    prof = traceparse.load(xplane_fixture)
    timeline, allocs, orphans = prof.timeline, prof.allocations, prof.frees_without_allocation
    for allocator in prof.allocators:
        events = np.flatnonzero(timeline["allocator"] == allocator)
        rows = allocs[allocs["allocator"] == allocator]
        alloc_at = rows["alloc_event"].to_numpy()
        free_at = rows["free_event"].to_numpy(dtype=np.float64, na_value=np.inf)
        size = rows["allocated_bytes"].to_numpy(dtype=np.int64)
        pre = orphans[orphans["allocator"] == allocator]
        pre_at = pre["free_event"].to_numpy()
        pre_size = pre["allocated_bytes"].to_numpy(dtype=np.int64)
        residuals = set()
        for i in events:
            live = size[(alloc_at <= i) & (free_at > i)].sum()
            still_before = pre_size[pre_at > i].sum()
            counter = int(timeline["heap_bytes"].iloc[i])
            residuals.add(counter - live - still_before)
        assert len(residuals) == 1, (allocator, sorted(residuals)[:5])
        assert residuals.pop() >= 0


@pytest.mark.parametrize("name", MEMORY_FIXTURES)
def test_rows_and_bytes_equal_a_plain_replay_with_tensorflows_parser(name: str) -> None:
    for path in xplane_files(name):
        reference = replay(memory_events(tf_space(path)))
        prof = traceparse.load(path)
        allocs = prof.allocations
        assert set(prof.allocators) == set(reference)
        for allocator, expected in reference.items():
            rows = allocs[allocs["allocator"] == allocator]
            assert len(rows) == expected["allocations"]
            assert int(rows["allocated_bytes"].sum()) == expected["allocated_bytes"]
            assert int(rows["free_ps"].notna().sum()) == expected["frees"]
            orphans = prof.frees_without_allocation
            assert (orphans["allocator"] == allocator).sum() == expected["orphan_frees"]


@pytest.mark.parametrize("name", MEMORY_FIXTURES)
def test_every_event_field_equals_tensorflows_reading(name: str) -> None:
    for path in xplane_files(name):
        reference = memory_events(tf_space(path))
        timeline = traceparse.load(path).timeline
        assert len(timeline) == len(reference)
        assert timeline["time_ps"].tolist() == [e["time_ps"] for e in reference]
        assert timeline["heap_bytes"].tolist() == [e["bytes_allocated"] for e in reference]
        assert timeline["address"].tolist() == [e["addr"] for e in reference]
        assert timeline["allocator"].tolist() == [e["allocator_name"] for e in reference]
        kinds = ["allocation" if e["is_allocation"] else "deallocation" for e in reference]
        assert timeline["kind"].tolist() == kinds
        assert timeline["available_bytes"].tolist() == [e["bytes_available"] for e in reference]
        # Every stat the decoder reads, in the events table, as protobuf reads it.
        events = traceparse.load(path).traces[0].events
        stats = {**INT_STATS, **STR_STATS, "fragmentation": "fragmentation"}
        for stat, column in stats.items():
            expected = [e.get(stat) for e in reference]
            found = [None if pd.isna(v) else v for v in events[column].tolist()]
            if stat == "fragmentation":  # xprof's NaN (nothing free) reads as unknown
                expected = [None if v is None or math.isnan(v) else v for v in expected]
            assert found == expected, stat


def test_allocation_fields_equal_the_events() -> None:
    path = fixture_file("keras_train")
    reference = [e for e in memory_events(tf_space(path)) if e["is_allocation"]]
    allocs = traceparse.load(path).allocations
    assert list(allocs.columns[: len(ALLOCATION_COLUMNS)]) == ALLOCATION_COLUMNS
    for row, event in zip(allocs.itertuples(), reference, strict=True):
        assert row.op == (event.get("tf_op") or np.nan) or pd.isna(row.op)
        assert row.requested_bytes == event["requested_bytes"]
        assert row.allocated_bytes == event["allocation_bytes"]
        assert row.padding_bytes == event["allocation_bytes"] - event["requested_bytes"]
        assert row.alloc_ps == event["time_ps"]
        if event.get("shape"):
            assert row.shape == event["shape"]


def test_the_seed_example_is_estimated_exactly() -> None:
    allocs = traceparse.load(fixture_file("eager_ops")).allocations
    big = allocs[allocs["shape"] == "[128,256,256]"].iloc[0]
    assert big["dtype"] == "float32"
    assert big["num_elements"] == 128 * 256 * 256
    assert big["estimated_bytes"] == 33_554_432
    assert big["requested_bytes"] == 33_554_432
    assert big["estimate_status"] == "match"


def test_dtypes_are_named_as_tensorflow_names_them() -> None:
    allocs = traceparse.load(fixture_file("eager_ops")).allocations
    dtypes = set(allocs["dtype"].dropna())
    assert {"float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"} <= dtypes
    assert {"uint8", "complex64", "string"} <= dtypes
    strings = allocs[allocs["dtype"] == "string"].iloc[0]
    # A tstring element is a 24-byte header; its characters live elsewhere.
    assert strings["requested_bytes"] == 24 * strings["num_elements"]
    assert pd.isna(strings["estimated_bytes"])
    assert strings["estimate_status"] == "unknown"


def test_times_are_picoseconds_within_the_capture(xplane_fixture: Path) -> None:
    prof = traceparse.load(xplane_fixture)
    trace = prof.traces[0]
    assert trace.duration_ps and trace.duration_ps > 0
    times = prof.timeline["time_ps"]
    assert (times >= 0).all() and (times <= trace.duration_ps).all()
    assert times.is_monotonic_increasing
    allocs = prof.allocations
    freed = allocs["free_ps"].notna()
    assert (allocs.loc[freed, "lifetime_ps"] >= 0).all()
    assert allocs["lifetime_ps"].isna().equals(allocs["free_ps"].isna())


@pytest.mark.parametrize("name", ["keras_train", "leak"])
def test_step_markers_are_exactly_the_marked_steps(name: str) -> None:
    prof = traceparse.load(fixture_file(name))
    marked = MANIFEST["fixtures"][name]["steps"]
    assert prof.step_markers["step"].tolist() == marked
    steps = prof.allocations["step"].dropna().unique().tolist()
    assert set(steps) <= set(marked)


def test_capture_without_memory_events_loads_empty_with_a_diagnostic() -> None:
    prof = traceparse.load(fixture_file("no_memory"))
    assert prof.allocations.empty and prof.timeline.empty
    assert list(prof.allocations.columns[: len(ALLOCATION_COLUMNS)]) == ALLOCATION_COLUMNS
    assert any("no memory events" in d and "tracer level" in d for d in prof.diagnostics())
    assert any("cuda_malloc_async" in d for d in prof.diagnostics())


def test_tables_use_compact_dtypes() -> None:
    allocs = traceparse.load(fixture_file("keras_train")).allocations
    for column in ("host", "allocator", "op", "op_type", "region", "dtype", "shape"):
        assert isinstance(allocs[column].dtype, pd.CategoricalDtype), column
    for column in ("requested_bytes", "allocated_bytes", "estimated_bytes", "free_ps", "step"):
        assert str(allocs[column].dtype) == "Int64", column
    assert str(allocs["alloc_ps"].dtype) == "int64"


def test_op_types_come_from_the_traces_op_events() -> None:
    allocs = traceparse.load(fixture_file("keras_train")).allocations
    conv = allocs[allocs["op"] == "classifier_1/conv1_1/Relu"]
    assert not conv.empty
    assert set(conv["op_type"]) == {"_MklNativeFusedConv2D"}


@pytest.mark.parametrize("name", MEMORY_FIXTURES)
def test_decoded_tables_have_the_declared_dtypes(name: str) -> None:
    declared = {
        "events": EVENT_COLUMNS,
        "step_markers": STEP_MARKER_COLUMNS,
        "op_time": OP_TIME_COLUMNS,
    }
    for path in xplane_files(name):
        trace = traceparse.load(path).traces[0]
        for table, columns in declared.items():
            frame = getattr(trace, table)
            assert list(frame.columns) == list(columns), table
            assert {c: str(t) for c, t in frame.dtypes.items()} == columns, table
