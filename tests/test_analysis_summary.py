"""``Profile.summary()``: the headline record per allocator, and its JSON form."""

from __future__ import annotations

import json
from dataclasses import fields

from helpers.trace import GPU, alloc, free, profile_of, trace_of

from traceparse import Profile
from traceparse.analysis import PARTS
from traceparse.analysis.attribution import OPTIONAL_PARTS
from traceparse.output.jsonvalues import json_value
from traceparse.output.sentences import allocator_notes
from traceparse.records import RECORD_VERSION, SECTIONS, AllocatorRecord
from traceparse.records.build import TOP_OP_COLUMNS, TOP_SCOPE_COLUMNS, TOP_TENSOR_COLUMNS

MiB = 1 << 20


def busy_profile() -> Profile:
    events = [
        alloc(10 + n, n, (n + 1) * MiB, op=f"model/layer{n % 3}/op{n}", shape=f"[{n + 1}]")
        for n in range(15)
    ]
    events += [free(100, 0, MiB), alloc(200, 99, 1000, allocator="gpu_host_bfc", op=None)]
    return Profile([trace_of(events, before={GPU: 2 * MiB}, markers=[(0, 0, 300)])])


def test_one_summary_per_allocator_with_the_headline_figures() -> None:
    prof = busy_profile()
    summaries = prof.summary()
    assert [(s.host, s.allocator) for s in summaries] == [("host0", GPU), ("host0", "gpu_host_bfc")]
    gpu = summaries[0]
    peak = prof.peak.iloc[0]
    assert gpu.peak_bytes == peak["in_use_bytes"] == 2 * MiB + sum(range(1, 16)) * MiB
    assert gpu.capacity_bytes == peak["capacity_bytes"]
    assert gpu.utilisation is not None and 0 < gpu.utilisation < 1
    assert gpu.peak_step == 0 and gpu.peak_time_ps == 24
    assert gpu.allocations == 15 and gpu.live_at_peak == 15
    assert sum(gpu.attribution.values()) == gpu.peak_bytes
    # variable_bytes is measured only with a variable inventory, which this capture lacks.
    assert list(gpu.attribution) == [p for p in PARTS if p not in OPTIONAL_PARTS]
    assert gpu.attribution["before_capture_bytes"] == 2 * MiB
    assert any("before the capture started" in d for d in allocator_notes(gpu))
    assert gpu.leak_verdict == "too few steps"


def test_top_tables_are_the_largest_at_the_peak() -> None:
    gpu = busy_profile().summary()[0]
    assert list(gpu.top_tensors.columns) == TOP_TENSOR_COLUMNS
    assert list(gpu.top_ops.columns) == TOP_OP_COLUMNS
    assert list(gpu.top_scopes.columns) == TOP_SCOPE_COLUMNS
    # Whole: every tensor and op live at the peak, for a renderer to cut.
    assert len(gpu.top_tensors) == len(gpu.top_ops) == 15
    assert gpu.top_tensors["allocated_bytes"].tolist() == [n * MiB for n in range(15, 0, -1)]
    assert gpu.top_ops["live_at_peak_bytes"].is_monotonic_decreasing
    assert gpu.top_scopes["scope"].astype(str).tolist() == ["model"]


def test_to_dict_is_plain_json() -> None:
    for summary in busy_profile().summary():
        record = json_value(summary.to_dict())
        # Every section is there, null when not made; fields the profile's own
        # tables carry (layers, steps) are not repeated.
        assert set(record) == {"record_version"} | {
            f.name for f in fields(AllocatorRecord) if f.metadata.get("json", True)
        }
        assert record["record_version"] == RECORD_VERSION
        assert all(record[name] is None for name in SECTIONS)
        text = json.dumps(record, allow_nan=False)
        back = json.loads(text)
        assert back["peak_bytes"] == summary.peak_bytes
        assert isinstance(back["top_tensors"], list)
    host = json_value(busy_profile().summary()[1].to_dict())
    # NA becomes None: the host allocator's only tensor has no op.
    assert host["top_tensors"][0]["op"] is None
    assert host["peak_step"] == 0


def test_a_capture_without_events_has_no_summaries() -> None:
    assert profile_of([]).summary() == []
