"""The synthetic memory-dense capture of benchmarks/make_dense.py decodes to
what its simulated allocator did (the benchmark's numbers rest on it)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import traceparse
from traceparse.core.profile import NO_SOURCES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from make_dense import write_capture

EVENTS = 10_000


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> tuple[traceparse.Profile, dict[str, int]]:
    path = tmp_path_factory.mktemp("dense") / "plugins" / "profile" / "run" / "vm.xplane.pb"
    expected = write_capture(EVENTS, path)
    return traceparse.load(path), expected


def test_every_event_decodes(dense: tuple[traceparse.Profile, dict[str, int]]) -> None:
    prof, expected = dense
    assert expected["events"] == EVENTS
    assert len(prof.timeline) == EVENTS
    assert len(prof.allocations) == expected["allocations"]
    # Every free releases an allocation made in the capture.
    assert prof.allocations["free_ps"].notna().sum() == expected["frees"]
    assert prof.frees_without_allocation.empty
    assert prof.allocations["op"].nunique() == expected["distinct_ops"]
    assert prof.diagnostics() == [NO_SOURCES + "."]  # a capture made elsewhere: nothing else


def test_counters_are_the_running_sums(dense: tuple[traceparse.Profile, dict[str, int]]) -> None:
    prof, expected = dense
    timeline = prof.timeline
    heap = timeline["heap_bytes"].to_numpy(dtype=np.int64)
    # bytes_allocated after each event is the sum of the events' signed sizes.
    assert np.array_equal(heap, np.cumsum(timeline["delta_bytes"].to_numpy(dtype=np.int64)))
    assert heap[-1] == expected["final_in_use"]
    peak = prof.peak
    assert len(peak) == 1
    assert int(peak["in_use_bytes"].iloc[0]) == expected["peak"]
    assert int(timeline["peak_bytes_in_use"].max()) == expected["peak"]
    # What is live at the peak adds up to it.
    assert int(prof.live_at_peak()["allocated_bytes"].sum()) == expected["peak"]
