"""The report's fast paths (issue 49) against the code they replaced, kept here
as the reference: ``groups`` (one allocator without a groupby), ``chunks``
(captured-only rules computed once, region doubling on region rows only), the
counter ``replay`` (only changed allocations moved, slices for a whole
timeline), ``lowest_step_peak`` (numpy instead of a pandas groupby), ``high_sizes``
made with ``sizes`` (against made alone) and
``instant_table``'s binary search per allocator (against the mask over every
row). Equal exactly, on every fixture with memory events and on random arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, memory_fixtures
from helpers.predictors import fixture_predictor

import traceparse
from traceparse.analysis.instant import _latest_by_mask, _order_of, instant_table
from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.peak import in_use
from traceparse.analysis.predict.bfc import GRANULE, MAX_INTERNAL_FRAGMENTATION, is_region
from traceparse.analysis.predict.replay import Replayed, chunks, groups, replay, rounded
from traceparse.analysis.whatif import Change, WhatIf

MiB = 1 << 20


def reference_chunks(
    new_requested: np.ndarray, requested: np.ndarray, settled: np.ndarray, allocated: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``chunks`` as it stood before issue 49's second round (every rule on every row)."""
    new = rounded(new_requested)
    same = new_requested == requested
    reuse = (new <= settled) & (settled < 2 * new)
    point = np.where(same | reuse, settled, new)
    whole = settled.astype(np.int64)
    region = is_region(whole) & (settled > rounded(requested)) & (new > settled)
    doubled = settled * 2.0 ** np.ceil(
        np.log2(np.divide(new, settled, out=np.ones_like(new), where=(settled > 0) & (new > 0)))
    )
    grown = region & (doubled < 2 * new)
    point = np.where(grown, doubled, point)
    low = np.minimum(point, new)
    whole = np.maximum(np.minimum(2 * new - GRANULE, new + MAX_INTERNAL_FRAGMENTATION), new)
    high = np.maximum(np.maximum(point, allocated * same), whole)
    return point, low, high


def reference_replay(
    timeline: pd.DataFrame,
    allocations: pd.DataFrame,
    ends: np.ndarray,
    held: np.ndarray,
    new_held: np.ndarray,
) -> Replayed:
    delta = np.zeros(len(timeline) + 1)
    change = np.asarray(new_held, dtype=np.float64) - np.asarray(held, dtype=np.float64)
    start = allocations["alloc_event"].to_numpy(dtype=np.int64)
    np.add.at(delta, start, change)
    stop = np.where(ends == STILL_LIVE, len(timeline), ends)
    np.add.at(delta, stop, -change)
    captured = in_use(timeline).astype(np.float64)
    rows = reference_groups(timeline)
    return Replayed(rows, {k: captured[e] + np.cumsum(delta[e]) for k, e in rows.items()})


def reference_groups(timeline: pd.DataFrame) -> dict[tuple[object, object], np.ndarray]:
    keys = timeline[["host", "allocator"]].astype(object)
    out: dict[tuple[object, object], np.ndarray] = {}
    for key, rows in keys.groupby(["host", "allocator"], sort=True, dropna=False).indices.items():
        out[(key[0], key[1])] = np.sort(np.asarray(rows, dtype=np.int64))
    return out


def reference_lowest_step_peak(
    found: Replayed, key: tuple[object, object], steps: np.ndarray
) -> tuple[int, int]:
    values, rows = found.bytes[key], found.events[key]
    mine = steps[rows]
    marked = np.flatnonzero(~np.isnan(mine))
    if len(np.unique(mine[marked])) < 2:
        return found.peak(key)
    tops = pd.Series(values[marked], index=marked).groupby(mine[marked]).idxmax().to_numpy()
    at = int(tops[int(np.argmin(values[tops]))])
    outside = np.flatnonzero(np.isnan(mine))
    if len(outside):
        top = int(outside[int(np.argmax(values[outside]))])
        at = top if values[top] >= values[at] else at
    return int(rows[at]), round(float(values[at]))


def assert_chunks_equal(
    new: np.ndarray, req: np.ndarray, settled: np.ndarray, got: np.ndarray
) -> None:
    for mine, theirs in zip(
        chunks(new, req, settled, got), reference_chunks(new, req, settled, got), strict=True
    ):
        assert mine.dtype == theirs.dtype
        assert np.array_equal(mine, theirs)


def test_chunks_equal_on_random_requests_across_regions() -> None:
    rng = np.random.default_rng(49)
    for _ in range(200):
        n = int(rng.integers(1, 400))
        requested = rng.choice([1.0, 255, 256, 257, 1 * MiB, 2 * MiB - 1, 3 * MiB], n)
        requested = requested * rng.choice([1, 1, 2, 3], n)
        # Settled chunks: the rounded request, a region (2 MiB doubled), or in between.
        settled = np.where(
            rng.random(n) < 0.4,
            2.0 * MiB * 2 ** rng.integers(0, 6, n),
            rounded(requested) * rng.choice([1, 1, 1.5, 2], n),
        )
        allocated = settled + GRANULE * rng.integers(0, 3, n)
        new = np.where(rng.random(n) < 0.3, requested, requested * rng.uniform(0, 40, n))
        assert_chunks_equal(new, requested, settled, allocated)
        # The same captured arrays again (the kept rules), with other requests.
        assert_chunks_equal(new * 2, requested, settled, allocated)


def _profile(name: str) -> traceparse.Profile:
    profile = traceparse.load(FIXTURES / name)
    if profile.timeline.empty:
        pytest.skip(f"{name}: no memory events")
    return profile


@pytest.mark.parametrize("name", memory_fixtures())
def test_replays_and_instants_equal_the_reference(name: str) -> None:
    profile = _profile(name)
    timeline, allocations, ends = profile.timeline, profile.allocations, profile._ends
    held = allocations["allocated_bytes"].to_numpy(dtype=np.float64, na_value=0.0)
    requested = allocations["requested_bytes"].to_numpy(dtype=np.float64, na_value=0.0)
    rng = np.random.default_rng(len(held))
    steps = timeline["step"].to_numpy(dtype=np.float64, na_value=np.nan)
    assert_chunks_equal(requested * 3, requested, held, held)
    mine_rows, their_rows = groups(timeline), reference_groups(timeline)
    assert [repr(k) for k in mine_rows] == [repr(k) for k in their_rows]
    for (_, rows), (_, expected) in zip(mine_rows.items(), their_rows.items(), strict=True):
        # Row numbers may be held narrower (int32 where they fit); their values are the same.
        assert rows.dtype.kind == expected.dtype.kind == "i" and np.array_equal(rows, expected)
    for new_held in (held, held * 2, held * rng.integers(0, 3, len(held)), held + 256.0):
        mine = replay(timeline, allocations, ends, held, new_held)
        theirs = reference_replay(timeline, allocations, ends, held, new_held)
        for key, theirs_key in zip(mine.events, theirs.events, strict=True):
            assert repr(key) == repr(theirs_key)
            assert np.array_equal(mine.events[key], theirs.events[theirs_key])
            assert mine.bytes[key].dtype == theirs.bytes[theirs_key].dtype
            assert np.array_equal(mine.bytes[key], theirs.bytes[theirs_key])
            assert mine.lowest_step_peak(key, steps) == reference_lowest_step_peak(
                theirs, theirs_key, steps
            )
    # Instants: each event's time, just before the first, after the last; each host.
    order = _order_of(timeline)
    times = timeline["time_ps"].to_numpy(dtype=np.int64)
    picked = np.unique(
        np.concatenate([rng.choice(times, 20), [times.min() - 1, times.max() + 1, times.min()]])
    )
    hosts = [None, *pd.unique(timeline["host"].astype(object)), "no such host"]
    for host in hosts:
        for time_ps in picked.tolist():
            expected, counts = _latest_by_mask(timeline, time_ps, host)
            if order.in_time_order:
                assert np.array_equal(order.latest(time_ps, host), expected)
                assert np.array_equal(order.counts, counts)
            assert len(instant_table(timeline, time_ps, host)) == int((expected >= 0).sum())


def test_instants_out_of_time_order_take_the_mask() -> None:
    """A timeline whose rows are not in time order within an allocator is answered
    by the mask over every row (the binary search would be wrong there)."""
    profile = _profile("leak")
    timeline = profile.timeline.copy()
    times = timeline["time_ps"].to_numpy(dtype=np.int64).copy()
    times[[0, -1]] = times[[-1, 0]]
    timeline["time_ps"] = times
    assert not _order_of(timeline).in_time_order
    middle = int(np.median(times))
    table = instant_table(timeline, middle)
    expected, _ = _latest_by_mask(timeline, middle, None)
    assert set(table["event"].tolist()) == set(expected[expected >= 0].tolist())


def test_instants_of_two_hosts_whose_clocks_restart() -> None:
    """Two hosts' timelines, each from its own capture start: the whole timeline's
    times go back at the second host, so each group searches its own times; the
    answers are the mask's at every instant."""
    timeline = _profile("leak").timeline
    second = timeline.copy()
    second["host"] = pd.Categorical(["second"] * len(second))
    both = pd.concat(
        [timeline.astype({"host": object}), second.astype({"host": object})], ignore_index=True
    )
    both["host"] = both["host"].astype("category")
    order = _order_of(both)
    assert not order.whole and order.in_time_order
    times = both["time_ps"].to_numpy(dtype=np.int64)
    for host in (None, "second"):
        for time_ps in np.unique(times)[:: max(1, len(times) // 40)].tolist():
            expected, counts = _latest_by_mask(both, time_ps, host)
            assert np.array_equal(order.latest(time_ps, host), expected)
            assert np.array_equal(order.counts, counts)


def test_the_larger_of_two_peaks_is_the_peak_of_the_larger_counter() -> None:
    """``Replayed.peaks`` and ``larger`` give what folding two counters into their
    elementwise maximum and taking its ``peak`` gives: ties, equal tops in both,
    empty groups."""
    rng = np.random.default_rng(47)
    for _ in range(2000):
        n = int(rng.integers(0, 12))
        rows = np.sort(rng.choice(100, n, replace=False)).astype(np.int64)
        a = rng.integers(0, 4, n).astype(np.float64)
        b = rng.integers(0, 4, n).astype(np.float64)
        key = ("host", "GPU_0_bfc")
        folded = Replayed({key: rows}, {key: np.maximum(a, b)})
        one, two = Replayed({key: rows}, {key: a}), Replayed({key: rows}, {key: b})
        assert one.peaks().larger(two.peaks()).peak(key) == folded.peak(key)
        assert two.peaks().larger(one.peaks()).peak(key) == folded.peak(key)
        assert one.peaks().peak(key) == one.peak(key)


@pytest.mark.parametrize("name", ["keras_train", "gpu_alexnet_v100_64", "layers_cnn_xla"])
def test_high_sizes_made_with_sizes_equal_high_sizes_made_alone(name: str) -> None:
    """``sizes`` makes ``high_sizes``' worst cases from its own chunks and keeps them
    for it: they equal those made alone, once read they are made anew, and a
    what-if (a copy of the predictor) never reads its base's."""
    _, kept = fixture_predictor(FIXTURES / name)
    _, alone = fixture_predictor(FIXTURES / name)
    for batch in (2 * kept.batch, max(kept.batch // 2, 1)):
        kept.sizes(batch)
        for _ in range(2):  # the kept ones, then ones made anew
            for got, want in zip(kept.high_sizes(batch), alone.high_sizes(batch), strict=True):
                assert np.array_equal(got, want)
    kept.sizes(3 * kept.batch)  # kept for the base, not for its what-if
    changed = WhatIf.of(kept, Change(optimizer="sgd"))
    fresh = WhatIf.of(alone, Change(optimizer="sgd"))
    for got, want in zip(
        changed.high_sizes(3 * kept.batch), fresh.high_sizes(3 * kept.batch), strict=True
    ):
        assert np.array_equal(got, want)
