"""Well-formed captures with absurd content, built in code: each oddity has one
deliberate behaviour (docs/robustness.md), and every analysis and report runs."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
from conftest import fixture_file
from helpers.space import SpaceBuilder, alloc, free

import traceparse
from traceparse import Profile
from traceparse.decode.limits import MAX_ALLOCATORS, MAX_BYTES, MAX_TIME_PS
from traceparse.report import render_html, render_json, render_markdown

T0 = 4967 * 1000  # the builder's default line timestamp, in ps


def everything(prof: Profile, html: bool = False) -> None:
    """Every analysis and renderer: none may raise."""
    prof.summary()
    prof.steps  # noqa: B018
    prof.scopes(2)
    render_markdown([prof])
    render_json([prof])
    if html:
        render_html([prof])


def notes(prof: Profile, *words: str) -> list[str]:
    return [d for d in prof.diagnostics() if all(w in d for w in words)]


# -- byte counts ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, -(2**63), MAX_BYTES + 1, 2**63 - 1, 2**64 - 1])
def test_byte_counts_below_zero_or_past_256_tib_are_unknown(bad: int) -> None:
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 100, addr=1, size=256, total=256)
    b.event(  # every byte stat absurd
        line,
        1,
        200,
        allocator_name="GPU_0_bfc",
        addr=2,
        requested_bytes=bad,
        allocation_bytes=bad,
        bytes_allocated=bad,
        bytes_reserved=bad,
        bytes_available=bad,
        peak_bytes_in_use=bad,
    )
    prof = b.decode()
    row = prof.allocations.iloc[1]
    assert pd.isna(row["requested_bytes"]) and pd.isna(row["allocated_bytes"])
    timeline = prof.timeline.iloc[1]
    assert pd.isna(timeline["heap_bytes"]) and pd.isna(timeline["available_bytes"])
    for stat in ("requested_bytes", "bytes_allocated", "peak_bytes_in_use"):
        assert notes(prof, f"1 memory events carry {stat} below 0 or above 256 TiB")
    # The peak is the sane event's: unknown counters count as 0, as in xprof.
    assert int(prof.peak["in_use_bytes"].iloc[0]) == 256
    everything(prof, html=True)


def test_byte_counts_at_the_bounds_are_kept() -> None:
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 100, addr=1, size=0, total=0)
    alloc(b, line, 200, addr=2, size=MAX_BYTES, total=MAX_BYTES)
    prof = b.decode()
    assert prof.allocations["requested_bytes"].tolist() == [0, MAX_BYTES]
    assert not notes(prof, "256 TiB")


# -- stats of the wrong type ----------------------------------------------------------


@pytest.mark.parametrize(
    ("stat", "value", "column"),
    [
        ("requested_bytes", "lots", "requested_bytes"),  # text for a number
        ("requested_bytes", 1.5, "requested_bytes"),  # a fraction of a byte
        ("requested_bytes", float("inf"), "requested_bytes"),
        ("data_type", "float32", "dtype"),
        ("allocator_name", 7, "allocator"),  # a number for text
        ("tf_op", 2.5, "op"),
        ("shape", 12, "shape"),
        ("region_type", -3, "region"),
    ],
)
def test_a_stat_of_the_wrong_type_is_unknown_and_said(
    stat: str, value: object, column: str
) -> None:
    b = SpaceBuilder()
    line = b.line()
    extra = {"tf_op": "dense/MatMul", "shape": "[64]", "data_type": 1, "region_type": "output"}
    extra.pop(stat, None)
    alloc(b, line, 100, addr=1, size=256, total=256, **extra)
    event = line.events[0]
    for old in [s for s in event.stats if s.metadata_id == b.stat_id(stat)]:
        event.stats.remove(old)
    wrong = event.stats.add(metadata_id=b.stat_id(stat))
    if isinstance(value, str):
        wrong.bytes_value = value.encode()
    elif isinstance(value, float):
        wrong.double_value = value
    else:
        wrong.int64_value = value  # type: ignore[assignment]
    prof = b.decode()
    assert pd.isna(prof.allocations[column].iloc[0])
    assert notes(prof, f"1 memory events carry a {stat} stat that is not")
    everything(prof)


def test_whole_numbers_written_as_doubles_are_read() -> None:
    b = SpaceBuilder()
    b.event(b.line(), 1, 100, allocator_name="GPU_0_bfc", addr=1, requested_bytes=1024.0)
    prof = b.decode()
    assert prof.allocations["requested_bytes"].tolist() == [1024]
    assert not notes(prof, "stat that is not")


def test_a_ref_to_no_name_is_unknown() -> None:
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 100, addr=1, size=256, total=256)
    line.events[0].stats.add(metadata_id=b.stat_id("tf_op"), ref_value=99999)
    prof = b.decode()
    assert pd.isna(prof.allocations["op"].iloc[0])
    assert notes(prof, "tf_op stat that is not text (or names nothing)")


def test_nan_fragmentation_is_unknown_without_a_note() -> None:
    # xprof writes NaN when nothing is free: a legitimate "unknown", not damage.
    b = SpaceBuilder()
    alloc(b, b.line(), 100, addr=1, size=256, total=256, fragmentation=float("nan"))
    prof = b.decode()
    assert pd.isna(prof.timeline["fragmentation"].iloc[0])
    assert not notes(prof, "fragmentation")


# -- order and pairing ----------------------------------------------------------------


def test_events_out_of_order_are_put_in_time_order_and_paired() -> None:
    b = SpaceBuilder()
    frees, allocs = b.line(), b.line()  # the frees' line comes first in the file
    free(b, frees, 900, addr=0xA, size=512, total=256)
    free(b, frees, 300, addr=0xB, size=256, total=512)  # backwards within the line
    alloc(b, allocs, 200, addr=0xB, size=256, total=768)
    alloc(b, allocs, 100, addr=0xA, size=512, total=512)
    prof = b.decode()
    assert prof.timeline["time_ps"].tolist() == [T0 + t for t in (100, 200, 300, 900)]
    allocations = prof.allocations.set_index("address")
    assert allocations.loc[0xA, "free_ps"] == T0 + 900
    assert allocations.loc[0xB, "free_ps"] == T0 + 300
    assert prof.frees_without_allocation.empty
    everything(prof)


def test_a_free_before_its_allocation_is_a_free_of_earlier_memory() -> None:
    b = SpaceBuilder()
    line = b.line()
    free(b, line, 100, addr=0xA, size=512, total=0)
    alloc(b, line, 200, addr=0xA, size=512, total=512)
    prof = b.decode()
    assert prof.frees_without_allocation["address"].tolist() == [0xA]
    assert prof.allocations["free_ps"].isna().all()
    assert notes(prof, "1 frees release memory allocated before the capture started")


def test_an_address_reused_without_a_free_is_said_and_not_counted_twice() -> None:
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 100, addr=0xA, size=1024, total=1024)
    alloc(b, line, 200, addr=0xA, size=512, total=1536)  # the free of the first was lost
    prof = b.decode()
    assert notes(prof, "1 allocations share an address with a later allocation")
    live = prof.live_at_peak()
    assert live["allocated_bytes"].tolist() == [512]  # only the newer one holds 0xA
    everything(prof)


def test_addresses_past_2_63_pair_like_any_other() -> None:
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 100, addr=2**64 - 256, size=256, total=256)
    free(b, line, 200, addr=2**64 - 256, size=256, total=0)
    prof = b.decode()
    assert prof.allocations["free_ps"].tolist() == [T0 + 200]
    assert prof.frees_without_allocation.empty


def test_events_without_an_allocator_are_an_allocator_of_their_own() -> None:
    b = SpaceBuilder()
    line = b.line()
    for step in range(4):
        b.event(line, 3, step * 1000, step_num=step, _r=1).duration_ps = 900
        b.event(line, 1, step * 1000 + 10, addr=step, allocation_bytes=256)
    prof = b.decode()
    assert prof.allocations["allocator"].isna().all()
    everything(prof, html=True)


# -- time -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line_ns", "offset_ps"),
    [(2**63 - 1, 0), (-(2**63), 0), (0, 2**63 - 1), (0, -(2**63)), (MAX_TIME_PS // 1000 + 1, 0)],
)
def test_events_more_than_53_days_out_are_skipped_and_said(line_ns: int, offset_ps: int) -> None:
    b = SpaceBuilder()
    alloc(b, b.line(), 100, addr=1, size=256, total=256)
    alloc(b, b.line(timestamp_ns=line_ns), offset_ps, addr=2, size=512, total=768)
    prof = b.decode()
    assert prof.allocations["address"].tolist() == [1]
    assert notes(prof, "1 memory events lie more than 53 days from the capture start")
    everything(prof)


def test_step_markers_with_absurd_times_are_left_out() -> None:
    b = SpaceBuilder()
    line = b.line()
    b.event(line, 3, 0, step_num=0, _r=1).duration_ps = 100
    b.event(line, 3, 200, step_num=1, _r=1).duration_ps = -100  # ends before it starts
    b.event(line, 3, 400, step_num=2, _r=1).duration_ps = 2**63 - 1  # ends past int64
    b.event(b.line(timestamp_ns=2**62), 3, 0, step_num=3, _r=1).duration_ps = 1
    alloc(b, line, 50, addr=1, size=256, total=256)
    prof = b.decode()
    assert prof.step_markers["step"].tolist() == [0]
    everything(prof)


def test_an_absurd_capture_window_gives_no_duration() -> None:
    b = SpaceBuilder()
    b.space.planes[0].stats[1].uint64_value = 1  # stops long before it starts
    alloc(b, b.line(), 100, addr=1, size=256, total=256)
    assert b.decode().traces[0].duration_ps is None


# -- shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [
        "[4294967296,4294967296,4294967296]",  # more elements than int64 holds
        "[99999999999999999999]",
        "[" + "9" * 5000 + "]",  # past int()'s digit limit
        "[²]",  # a digit to str.isdigit, not to int()
        "[٣,4]",
        "[" + ",".join(["2"] * 2000) + "]",
    ],
)
def test_absurd_shapes_give_no_estimate(shape: str) -> None:
    b = SpaceBuilder()
    alloc(b, b.line(), 100, addr=1, size=256, total=256, shape=shape, data_type=1)
    prof = b.decode()
    row = prof.allocations.iloc[0]
    assert pd.isna(row["num_elements"]) and pd.isna(row["estimated_bytes"])
    assert row["estimate_status"] == "unknown"
    everything(prof)


def test_a_shape_whose_bytes_pass_int64_has_elements_but_no_estimate() -> None:
    b = SpaceBuilder()
    alloc(b, b.line(), 100, addr=1, size=256, total=256, shape="[2305843009213693952]", data_type=2)
    row = b.decode().allocations.iloc[0]
    assert row["num_elements"] == 2**61 and pd.isna(row["estimated_bytes"])


# -- memory ---------------------------------------------------------------------------


def test_absurd_sizes_do_not_make_the_analyses_allocate_by_them() -> None:
    """Sizes, counts, ids, steps and shapes at their extremes: nothing may allocate
    in proportion to a value (only to the number of events)."""
    b = SpaceBuilder()
    line = b.line()
    for i in range(200):
        b.event(line, 3, i * 10, step_num=2**63 - 1 - i, _r=1).duration_ps = 5
        alloc(
            b,
            line,
            i * 10 + 1,
            addr=2**64 - 1 - i,
            size=MAX_BYTES,
            total=MAX_BYTES,
            shape="[4294967295,4294967295]",
            data_type=2**63 - 1,
            id=2**63 - 1,
            peak_bytes_in_use=MAX_BYTES,
        )
    b.plane.event_metadata[2**62].id = 2**62  # a huge metadata id
    b.plane.event_metadata[2**62].name = "x/y:Op"
    line.events.add(metadata_id=2**62, offset_ps=3, duration_ps=2**62)
    tracemalloc.start()
    try:
        prof = b.decode()
        everything(prof, html=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(prof.allocations) == 200
    assert peak < 200 * 2**20, f"{peak / 2**20:.0f} MiB"


# -- pre-converted profiles -----------------------------------------------------------


def test_absurd_values_in_a_memory_profile_json_follow_the_same_rules(tmp_path: Path) -> None:
    document = json.loads(gzip.decompress(fixture_file("legacy").read_bytes()))
    per = next(iter(document["memoryProfilePerAllocator"].values()))
    # An event can be in both lists: edit every copy of it.
    snapshots = [*per["sampledTimelineSnapshots"], *per["memoryProfileSnapshots"]]
    times = sorted({s["timeOffsetPs"] for s in snapshots})
    for snapshot in snapshots:
        if snapshot["timeOffsetPs"] == times[0]:
            snapshot["activityMetadata"]["requestedBytes"] = "-5"
            snapshot["aggregationStats"]["heapAllocatedBytes"] = str(2**62)
        elif snapshot["timeOffsetPs"] == times[1]:
            snapshot["activityMetadata"]["address"] = str(2**64 - 1)
        elif snapshot["timeOffsetPs"] == times[2]:
            snapshot["timeOffsetPs"] = str(2**63 - 1)
    path = tmp_path / "h.memory_profile.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document).encode(), mtime=0))
    prof = traceparse.load(path)
    assert notes(prof, "requested_bytes below 0 or above 256 TiB")
    assert notes(prof, "bytes_allocated below 0 or above 256 TiB")
    assert notes(prof, "lie more than 53 days")
    assert (prof.timeline["address"] == -1).any()  # 2**64 - 1 as int64, like a raw capture
    everything(prof, html=True)


# -- counts ---------------------------------------------------------------------------


def test_a_capture_naming_more_allocators_than_any_host_has_is_refused() -> None:
    b = SpaceBuilder()
    line = b.line()
    for i in range(MAX_ALLOCATORS + 1):
        b.event(line, 1, i, allocator_name=f"a{i}", addr=1, allocation_bytes=256)
    with pytest.raises(traceparse.CaptureTooLargeError, match=r"test\.xplane\.pb: .* 129 alloc"):
        b.decode()
    del line.events[-1]
    assert len(b.decode().allocators) == MAX_ALLOCATORS


def test_a_memory_profile_naming_too_many_allocators_is_refused(tmp_path: Path) -> None:
    document = json.loads(gzip.decompress(fixture_file("legacy").read_bytes()))
    per = document["memoryProfilePerAllocator"]
    only = next(iter(per.values()))
    for i in range(MAX_ALLOCATORS + 1):
        per[f"fake_{i}"] = only
    path = tmp_path / "h.memory_profile.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document).encode(), mtime=0))
    with pytest.raises(traceparse.CaptureTooLargeError, match="allocators"):
        traceparse.load(path)


def test_an_event_without_an_address_does_not_split_a_pair_at_address_0() -> None:
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 100, addr=0, size=256, total=256)
    b.event(line, 1, 150, allocator_name="GPU_0_bfc", allocation_bytes=512)  # no addr
    free(b, line, 200, addr=0, size=256, total=512)
    prof = b.decode()
    freed = prof.allocations.dropna(subset=["address"])
    assert freed["free_ps"].tolist() == [T0 + 200]
    assert prof.frees_without_allocation.empty
