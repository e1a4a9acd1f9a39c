"""Peak, live-at-peak and attribution on small hand-built traces: the edge cases."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers.trace import CAPACITY, GPU, alloc, free, profile_of, trace_of

from traceparse import Profile, UsageError
from traceparse.analysis import PARTS
from traceparse.output.sentences import allocator_notes

HOST_BFC = "gpu_host_bfc"


def test_peak_is_the_maximum_of_reserved_plus_allocated() -> None:
    prof = profile_of(
        [
            alloc(10, 1, 1000, reserved=256),
            alloc(20, 2, 3000, reserved=256),
            free(30, 1, 1000, reserved=256),
        ]
    )
    peak = prof.peak.iloc[0]
    assert peak["in_use_bytes"] == 4000 + 256
    assert peak["heap_bytes"] == 4000 and peak["reserved_bytes"] == 256
    assert peak["capacity_bytes"] == CAPACITY
    assert peak["time_ps"] == 20 and peak["event"] == 1
    assert peak["available_bytes"] == CAPACITY - 4256


def test_a_tie_at_the_peak_takes_the_latest_event() -> None:
    prof = profile_of(
        [
            alloc(10, 1, 1000, op="first"),
            free(20, 1, 1000),
            alloc(30, 2, 1000, op="second"),
            free(40, 2, 1000),
        ]
    )
    peak = prof.peak.iloc[0]
    assert peak["time_ps"] == 30 and peak["peak_events"] == 2
    assert prof.live_at_peak()["op"].tolist() == ["second"]
    # Each tie is its own visit of the peak (issue 48): the note names both instants.
    notes = [d for s in prof.summary() for d in allocator_notes(s)]
    assert any("reached at 2 instants within 1%" in d for d in notes), notes


def test_every_allocator_and_host_has_its_own_peak() -> None:
    events_a = [
        alloc(10, 1, 5000),
        alloc(15, 9, 700, allocator=HOST_BFC),
        free(20, 1, 5000),
        alloc(25, 2, 3000),
    ]
    events_b = [alloc(5, 1, 8000)]
    prof = Profile([trace_of(events_a, host="a"), trace_of(events_b, host="b")])
    peak = prof.peak
    assert peak[["host", "allocator"]].astype(str).values.tolist() == [
        ["a", GPU],
        ["a", HOST_BFC],
        ["b", GPU],
    ]
    assert peak["in_use_bytes"].tolist() == [5000, 700, 8000]
    live = prof.live_at_peak()
    assert sorted(live["allocated_bytes"].tolist()) == [700, 5000, 8000]
    assert prof.live_at_peak(GPU, host="b")["allocated_bytes"].tolist() == [8000]
    assert prof.live_at_peak(HOST_BFC)["allocated_bytes"].tolist() == [700]
    # Timeline rows, not per-host positions.
    assert prof.timeline.loc[peak["event"], "in_use_bytes"].tolist() == [5000, 700, 8000]


def test_live_at_peak_covers_every_step_and_flags_the_peak_step() -> None:
    prof = profile_of(
        [
            alloc(10, 1, 4000, op="weights"),
            alloc(110, 2, 1000, op="activation"),
            alloc(120, 3, 2000, op="temp"),
            free(130, 3, 2000),
            free(140, 2, 1000),
        ],
        markers=[(0, 0, 100), (1, 101, 200)],
    )
    live = prof.live_at_peak()
    assert live["op"].tolist() == ["weights", "temp", "activation"]
    assert live["in_peak_step"].tolist() == [False, True, True]
    assert prof.peak.iloc[0]["step"] == 1
    # The index points back into allocations.
    assert (prof.allocations.loc[live.index, "op"] == live["op"]).all()


def test_an_allocation_freed_at_the_peak_event_is_not_live_after_it() -> None:
    prof = profile_of([alloc(10, 1, 1000), alloc(20, 2, 1000), free(20, 1, 1000)])
    # The peak is event 1 (2000 bytes); the free at the same time comes after it.
    assert prof.peak.iloc[0]["event"] == 1
    assert len(prof.live_at_peak()) == 2


def test_bytes_allocated_before_the_capture_are_their_own_part() -> None:
    prof = profile_of(
        [free(5, 99, 300), alloc(10, 1, 1024, requested=1000, shape="[250]")],
        before={GPU: 5000},
    )
    part = prof.attribution.iloc[0]
    assert part["in_use_bytes"] == 5000 - 300 + 1024
    assert part["before_capture_bytes"] == 4700
    assert part["shape_explained_bytes"] == 1000
    assert part["padding_bytes"] == 24
    assert len(prof.frees_without_allocation) == 1


def test_attribution_parts_split_shape_request_padding_and_reserved() -> None:
    prof = profile_of(
        [
            # float32 [256]: 1024 bytes explained, 1024 of chunk padding.
            alloc(10, 1, 2048, requested=1024, shape="[256]", dtype=1, reserved=512),
            # string [10]: 240 bytes of tstring headers no shape explains.
            alloc(20, 2, 256, requested=240, shape="[10]", dtype=7, reserved=512),
            # A temp buffer without a shape.
            alloc(30, 3, 4096, requested=4000, shape=None, dtype=None, region="temp", reserved=512),
            # A request larger than its shape: 400 explained, 100 unexplained.
            alloc(40, 4, 512, requested=500, shape="[100]", dtype=3, reserved=512),
        ]
    )
    part = prof.attribution.iloc[0]
    assert part["shape_explained_bytes"] == 1024 + 400
    assert part["shape_unknown_bytes"] == 4000  # not "beyond shape × dtype": it has none
    assert part["unexplained_request_bytes"] == 240 + 100
    assert part["padding_bytes"] == 1024 + 16 + 96 + 12
    assert part["reserved_bytes"] == 512
    assert part["before_capture_bytes"] == 0
    assert (
        sum(int(part[p]) for p in PARTS if pd.notna(part[p]))
        == part["in_use_bytes"]
        == 2048 + 256 + 4096 + 512 + 512
    )


def test_a_request_smaller_than_its_shape_never_makes_a_part_negative() -> None:
    prof = profile_of([alloc(10, 1, 256, requested=100, shape="[100]", dtype=1)])
    part = prof.attribution.iloc[0]
    assert part["shape_explained_bytes"] == 100
    assert part["unexplained_request_bytes"] == 0 and part["padding_bytes"] == 156


def test_a_dropped_free_ends_the_allocation_at_the_addresss_reuse() -> None:
    # The free of address 1 was lost: the second allocation at 1 replaces the first.
    prof = profile_of([alloc(10, 1, 1000, op="old"), alloc(20, 1, 3000, op="new")], before={GPU: 0})
    live = prof.live_at_peak()
    assert live["op"].tolist() == ["new"]
    part = prof.attribution.iloc[0]
    # The counter says 4000 (it saw both); the lost free shows up as before-capture bytes.
    assert part["in_use_bytes"] == 4000 and part["before_capture_bytes"] == 1000
    assert sum(int(part[p]) for p in PARTS if pd.notna(part[p])) == part["in_use_bytes"]


def test_lost_frees_make_before_capture_negative_and_say_so() -> None:
    trace = trace_of([alloc(10, 1, 1000), alloc(20, 2, 1000)])
    # The allocator's counter missed the first allocation: parts still sum exactly.
    trace.events.loc[1, "bytes_allocated"] = 1000
    prof = Profile([trace])
    part = prof.attribution.iloc[0]
    assert part["before_capture_bytes"] == -1000
    assert sum(int(part[p]) for p in PARTS if pd.notna(part[p])) == part["in_use_bytes"] == 1000
    (summary,) = prof.summary()
    assert any("lost some frees" in d for d in allocator_notes(summary))


def test_missing_counters_count_as_zero_and_missing_capacity_is_na() -> None:
    trace = trace_of([alloc(10, 1, 1000)])
    trace.events["bytes_reserved"] = pd.array([None], dtype="Int64")
    trace.events["bytes_available"] = pd.array([None], dtype="Int64")
    prof = Profile([trace])
    peak = prof.peak.iloc[0]
    assert peak["in_use_bytes"] == 1000
    assert pd.isna(peak["capacity_bytes"]) and pd.isna(peak["reserved_bytes"])
    assert prof.attribution.iloc[0]["reserved_bytes"] == 0
    (summary,) = prof.summary()
    assert summary.capacity_bytes is None and summary.utilisation is None


def test_a_capture_without_memory_events_gives_empty_tables() -> None:
    prof = profile_of([])
    for table in (prof.peak, prof.attribution, prof.live_at_peak(), prof.ops, prof.scopes(2)):
        assert table.empty
    assert prof.steps.empty
    assert "in_use_bytes" in prof.peak and "event" in prof.peak
    assert list(prof.attribution.columns[:3]) == ["host", "allocator", "in_use_bytes"]
    assert prof.summary() == []
    report = prof.leaks()
    assert report.verdict == "no memory events" and report.by_op.empty and report.growth.empty


def test_asking_for_an_allocator_the_capture_lacks_names_the_ones_it_has() -> None:
    prof = profile_of([alloc(10, 1, 1000)])
    with pytest.raises(UsageError, match=f"'GPU_1_bfc'.*{GPU}"):
        prof.live_at_peak("GPU_1_bfc")
    with pytest.raises(UsageError, match="host0"):
        prof.live_at_peak(host="elsewhere")


def test_peak_columns_and_types_follow_the_contract() -> None:
    prof = profile_of([alloc(10, 1, 1000)], markers=[(3, 0, 100)])
    expected = [
        "host",
        "allocator",
        "time_ps",
        "in_use_bytes",
        "heap_bytes",
        "reserved_bytes",
        "available_bytes",
        "capacity_bytes",
        "fragmentation",
        "step",
        "event",
    ]
    assert list(prof.peak.columns[: len(expected)]) == expected
    assert str(prof.peak["in_use_bytes"].dtype) == "Int64"
    assert str(prof.peak["time_ps"].dtype) == "int64"
    assert prof.peak.iloc[0]["step"] == 3
    attribution = prof.attribution
    assert [c for c in attribution.columns if c.endswith("_bytes")] == ["in_use_bytes", *PARTS]
    assert list(prof.live_at_peak().columns) == [*prof.allocations.columns, "in_peak_step"]
