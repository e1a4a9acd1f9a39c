"""The analyses on the real fixture captures: invariants, marked steps, leaks, empties.

Ground truth (marked steps, leaked bytes per step) comes from fixtures/MANIFEST.json.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, MANIFEST, xplane_files

import traceparse
from traceparse import Profile
from traceparse.analysis import PARTS
from traceparse.output.jsonvalues import json_value
from traceparse.output.sentences import leak_message

# Every readable capture; the corrupt fixtures belong to the error tests.
CAPTURES = xplane_files()
LEGACY = sorted(FIXTURES.glob("legacy*/**/*.memory_profile.*"))
SUMMED = ["requested_bytes", "allocated_bytes", "estimated_bytes", "padding_bytes"]


def manifest_captures() -> list[tuple[str, dict]]:
    return [
        (name, capture)
        for name, entry in MANIFEST["fixtures"].items()
        for capture in entry.get("captures", [])
    ]


def test_the_fixtures_are_there() -> None:
    assert CAPTURES, f"no .xplane.pb under {FIXTURES}"
    assert LEGACY, f"no pre-converted memory_profile under {FIXTURES}"


def load_profile(path: Path) -> Profile:
    return traceparse.load(path)


@pytest.mark.parametrize("path", CAPTURES + LEGACY, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_invariants_hold_on_every_capture(path: Path) -> None:
    prof = load_profile(path)
    allocations = prof.allocations
    attribution = prof.attribution
    assert (
        len(prof.peak)
        == len(attribution)
        == allocations[["host", "allocator"]].drop_duplicates().shape[0]
    )
    # Attribution parts sum exactly to the peak.
    parts = attribution[PARTS].sum(axis=1)
    assert (parts == attribution["in_use_bytes"]).all()
    assert (attribution["in_use_bytes"].to_numpy() == prof.peak["in_use_bytes"].to_numpy()).all()
    # Roll-ups lose no bytes.
    for table in (prof.ops, prof.scopes(1), prof.scopes(3)):
        for column in SUMMED:
            assert table[column].sum() == allocations[column].sum(), column
        assert table["count"].sum() == len(allocations)
        assert table["live_at_peak"].sum() == len(prof.live_at_peak())
    # Everything live at the peak is allocated by then and freed (if ever) after it.
    live = prof.live_at_peak()
    events = prof.peak.set_index(prof.peak["allocator"].astype(str))["event"]
    at = live["allocator"].astype(str).map(events).to_numpy(dtype=np.int64)
    assert (live["alloc_event"].to_numpy(dtype=np.int64) <= at).all()
    freed = live["free_event"].to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).max)
    assert (freed > at).all()
    # Steps: within each allocator, in time order, and consistent with the timeline.
    steps = prof.steps
    assert (steps["in_use_end_bytes"] - steps["in_use_start_bytes"] == steps["growth_bytes"]).all()
    assert (steps["peak_in_use_bytes"] >= steps["in_use_start_bytes"]).all()
    assert (steps["peak_in_use_bytes"] <= prof.peak["in_use_bytes"].max()).all()
    # The summary is plain JSON.
    for summary in prof.summary():
        assert sum(summary.attribution.values()) == summary.peak_bytes
        json.dumps(json_value(summary.to_dict()), allow_nan=False)


@pytest.mark.parametrize(
    ("name", "capture"),
    [(n, c) for n, c in manifest_captures() if c.get("memory_event_total")],
    ids=lambda v: v if isinstance(v, str) else v["run"],
)
def test_steps_are_exactly_the_marked_steps(name: str, capture: dict) -> None:
    prof = traceparse.load(FIXTURES / capture["path"])
    steps = prof.steps
    marked = sorted(capture["step_nums"])
    for allocator in capture["memory_events"]:
        mine = steps[steps["allocator"] == allocator]
        if not marked:  # no markers (a plain fit): steps, if any, are the allocator's ids
            assert not (mine["source"] == "marker").any(), (name, allocator)
            continue
        assert mine["step"].tolist() == marked, (name, allocator)
        assert (mine["source"] == "marker").all()
    if marked:
        assert set(prof.allocations["step"].dropna()) <= set(marked)


def test_the_leak_fixture_is_growing_by_what_it_keeps() -> None:
    entry = MANIFEST["fixtures"]["leak"]
    (capture,) = entry["captures"]
    prof = traceparse.load(FIXTURES / capture["path"])
    report = prof.leaks()
    assert report.verdict == "growing", leak_message(report)
    per_step = entry["expected_growth_bytes_per_step"]
    judged = report.growth[report.growth["judged"]]
    assert (judged["growth_bytes"] == per_step).all()
    (summary,) = prof.summary()
    assert summary.leak_verdict == "growing"
    assert summary.growth_bytes_per_step == per_step
    top = report.by_op.iloc[0]
    kept = entry["leaked_per_step"]
    assert top["shape"] == "[{},{}]".format(*kept["shape"]) and top["dtype"] == kept["dtype"]
    assert top["count"] == len(entry["steps"]) - 1
    assert top["bytes"] == kept["bytes"] * (len(entry["steps"]) - 1)


def test_the_keras_training_fixture_is_stable_and_has_its_layers() -> None:
    entry = MANIFEST["fixtures"]["keras_train"]
    (capture,) = entry["captures"]
    prof = traceparse.load(FIXTURES / capture["path"])
    assert prof.leaks().verdict == "stable", leak_message(prof.leaks())
    layers = prof.scopes(2)["scope"].dropna().astype(str).tolist()
    for layer in ("conv1", "pool1", "hidden"):
        assert any(layer in scope for scope in layers), (layer, layers)
    assert "augment" in prof.scopes(1)["scope"].astype(str).tolist()
    # Ops carry their type and, for graph ops, their compute time.
    ops = prof.ops
    assert ops["op_type"].notna().any() and ops["compute_ps"].notna().any()


def test_two_marked_steps_are_too_few_to_judge() -> None:
    prof = traceparse.load(FIXTURES / MANIFEST["fixtures"]["eager_ops"]["captures"][0]["path"])
    report = prof.leaks()
    assert report.verdict == "too few steps" and "too few" in leak_message(report)


def test_a_capture_without_memory_events_gives_empty_analyses() -> None:
    (capture,) = MANIFEST["fixtures"]["no_memory"]["captures"]
    prof = traceparse.load(FIXTURES / capture["path"])
    assert prof.peak.empty and prof.attribution.empty and prof.live_at_peak().empty
    assert prof.ops.empty and prof.scopes(2).empty and prof.steps.empty
    assert prof.summary() == []
    report = prof.leaks()
    assert report.verdict == "no memory events" and "no memory events" in leak_message(report)


@pytest.mark.parametrize("path", LEGACY, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_a_converted_profile_keeps_xprofs_peak(path: Path) -> None:
    if path.name.endswith(".json.gz"):
        stored = json.loads(gzip.decompress(path.read_bytes()))
    else:
        from google.protobuf.json_format import MessageToDict

        from traceparse._proto import memory_profile_pb2

        message = memory_profile_pb2.MemoryProfile.FromString(path.read_bytes())
        stored = MessageToDict(message)
    prof = traceparse.load(path)
    for allocator, per in stored["memoryProfilePerAllocator"].items():
        summary = per["profileSummary"]
        peak = prof.peak[prof.peak["allocator"] == allocator].iloc[0]
        assert peak["in_use_bytes"] == int(summary["peakStats"]["peakBytesInUse"])
        assert peak["capacity_bytes"] == int(summary["memoryCapacity"])
