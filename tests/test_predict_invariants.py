"""The prediction's invariants, held on every fixture with memory events at
several batch sizes (a quarter of the captured batch to four times it):

- low <= point <= high on every (host, allocator);
- the low bound never goes under what no run of the program can go under: for
  some captured step, the bytes still held from before the capture when it
  starts plus the allocations live through that whole step whose size does not
  depend on the batch (variables, optimizer slots), each at its request rounded
  to the allocator's 256-byte granule. The reference below finds them step by step,
  independently of ``LowBound.floor``;
- at the captured batch the prediction is the capture: its peak is the captured
  peak, or, where the capture ended in a refused request, the allocator's counter
  at the failure (``Profile.failures``) plus that request rounded to the granule
  when that is more.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES, memory_fixtures
from helpers.predictors import fixture_predictor

import traceparse
from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.predict import Predictor

GRANULE = 256  # the BFC allocator's kMinAllocationSize (bfc_allocator.h)


def reference_floor(profile: traceparse.Profile, predictor: Predictor, key: tuple) -> int:
    """The most over the captured steps of: the bytes held from before the capture
    when the step starts (the counter before its first event, less the reservation
    and the capture's own allocations live then), plus the batch-independent
    allocations live from the step's first event to past its last. One loop per
    step; without steps, the bytes held when the capture started."""
    timeline, a, ends = profile.timeline, profile.allocations, profile._ends
    mine_rows = (timeline["host"].astype(object) == key[0]).to_numpy() & (
        timeline["allocator"].astype(object) == key[1]
    ).to_numpy()
    rows = np.flatnonzero(mine_rows)
    # In use before each event, less the reservation: the heap before it.
    counter = timeline["heap_bytes"].fillna(0).to_numpy(dtype=np.float64) - timeline[
        "delta_bytes"
    ].fillna(0).to_numpy(dtype=np.float64)
    mine = (a["host"].astype(object) == key[0]).to_numpy() & (
        a["allocator"].astype(object) == key[1]
    ).to_numpy()
    sizing = predictor.sizing
    fixed = mine & (sizing.per_example == 0) & (sizing.alt_per_example == 0)
    for row in sizing.envelopes:
        fixed[row] = False
    requested = predictor.requested
    pooled = (a["allocator"].astype(object) == "mklcpu").to_numpy() & (requested < 256 * 1024)
    size = np.where(pooled, 0.0, np.ceil(requested / GRANULE) * GRANULE)
    held = predictor.held
    start = a["alloc_event"].to_numpy(dtype=np.int64)
    steps = timeline["step"].iloc[rows].dropna()
    if steps.empty:
        return round(max(counter[rows[0]], 0.0))
    best = 0.0
    for _, members in steps.groupby(steps):
        lo, hi = int(members.index.min()), int(members.index.max())
        live_before = mine & (start < lo) & ((ends == STILL_LIVE) | (ends >= lo))
        kept = max(counter[lo] - float(held[live_before].sum()), 0.0)
        through = fixed & (start <= lo) & ((ends == STILL_LIVE) | (ends > hi))
        best = max(best, kept + float(size[through].sum()))
    return round(best)


def captured_demand(profile: traceparse.Profile, key: tuple, peak: int) -> int:
    """The captured peak, or the counter at the failure plus the request that
    failed (rounded to the granule) where ``key`` ran out of memory and that is more."""
    for failure in profile.failures():
        if (failure.host, failure.allocator) != key or not failure.out_of_memory:
            continue
        if failure.requested_bytes is None or failure.in_use_bytes is None:
            continue
        request = -(-failure.requested_bytes // GRANULE) * GRANULE
        return max(peak, failure.in_use_bytes + request)
    return peak


@pytest.mark.parametrize("name", memory_fixtures())
def test_bounds_hold_their_invariants(name: str) -> None:
    profile, predictor = fixture_predictor(FIXTURES / name)
    batch = predictor.batch
    floors = {key: reference_floor(profile, predictor, key) for key in predictor.rows}
    for target in sorted({max(batch // 4, 1), max(batch // 2, 1), batch, 2 * batch, 4 * batch}):
        table = predictor.at(target)
        for row in table.itertuples(index=False):
            key = (row.host, row.allocator)
            where = f"{name} {key} at {target} (captured at {batch})"
            low, point, high = row.low_bytes, row.predicted_peak_bytes, row.high_bytes
            assert low <= point <= high, where
            assert predictor.low_bound.floor(key) == floors[key], where
            assert low >= floors[key], where
            if target == batch:
                assert point == captured_demand(profile, key, row.captured_peak_bytes), where


def test_the_floor_under_its_old_name_warns_and_answers_the_same() -> None:
    _, predictor = fixture_predictor(FIXTURES / "whatif_cnn_base")
    (key,) = predictor.rows
    with pytest.warns(DeprecationWarning, match="low_bound.floor"):
        old = predictor.floor(key)
    assert old == predictor.low_bound.floor(key) > 0
