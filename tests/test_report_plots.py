"""Charts: downsampling keeps the peak, SVG is inline-ready, labels cannot inject."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from traceparse.report.plots import (
    attribution_svg,
    bars_svg,
    downsample_minmax,
    timeline_svg,
)

HOSTILE = '<script>window.__pwned=1</script> $\\frac{1}{0}$ --> \\1 \\g<0> "quoted" & ]]>'


def random_walk(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.integers(1, 1000, n)).astype(np.int64) * 1000
    in_use = np.maximum(np.cumsum(rng.integers(-4096, 4097, n)), 0) + (64 << 20)
    return times, in_use


def test_downsampling_keeps_every_extreme() -> None:
    times, in_use = random_walk(500_000)
    keep = downsample_minmax(times, in_use, buckets=1000)
    assert len(keep) <= 4 * 1000
    assert np.all(np.diff(keep) > 0)  # in time order, no duplicates
    assert keep[0] == 0 and keep[-1] == len(times) - 1
    assert in_use[keep].max() == in_use.max()
    assert in_use[keep].min() == in_use.min()
    # Every bucket's own maximum survives, so no pixel column loses its peak.
    bucket = ((times - times[0]) / (times[-1] - times[0]) * 1000).astype(int).clip(0, 999)
    for b in (0, 137, 500, 999):
        mine = bucket == b
        assert in_use[keep][bucket[keep] == b].max() == in_use[mine].max()


def test_downsampling_picks_the_first_lowest_and_last_highest_of_each_bucket() -> None:
    """Ties (a counter that repeats its value) and NaN: against a sort of every point
    by (bucket, value), the definition the reduceat path must match."""

    def by_sorting(x: np.ndarray, y: np.ndarray, buckets: int) -> np.ndarray:
        bucket = np.minimum(((x - x[0]) / (x[-1] - x[0]) * buckets).astype(np.int64), buckets - 1)
        starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
        ends = np.r_[starts[1:], len(x)] - 1
        order = np.lexsort((y, bucket))
        return np.unique(np.concatenate([starts, ends, order[starts], order[ends]]))

    rng = np.random.default_rng(11)
    for case in range(500):
        n = int(rng.integers(50, 2000))
        buckets = int(rng.integers(1, 12))
        x = np.sort(rng.integers(0, int(rng.integers(2, 100)), n)).astype(np.float64)
        x[-1] = x[0] + 1 if x[-1] == x[0] else x[-1]
        y = rng.integers(0, int(rng.integers(1, 6)), n).astype(np.float64)
        if case % 7 == 0:
            y[rng.integers(0, n, 3)] = np.nan
        assert np.array_equal(downsample_minmax(x, y, buckets), by_sorting(x, y, buckets))


def test_few_points_are_all_kept() -> None:
    times = np.arange(10)
    assert downsample_minmax(times, times * 2).tolist() == list(range(10))


def test_timeline_of_millions_of_events_is_small_and_quick() -> None:
    times, in_use = random_walk(2_000_000)
    peak = int(np.argmax(in_use))
    started = time.process_time()
    svg = timeline_svg(
        times,
        in_use,
        peak_time_ps=int(times[peak]),
        peak_bytes=int(in_use[peak]),
        steps=[(i, int(times[i * 200_000]), int(times[i * 200_000 + 199_999])) for i in range(10)],
    )
    assert time.process_time() - started < 20
    assert len(svg) < 1_000_000
    assert "peak" in svg and "MiB" in svg and "step 3" in svg


def test_svg_is_ready_to_inline() -> None:
    times, in_use = random_walk(100)
    svg = timeline_svg(times, in_use, label=HOSTILE)
    assert svg.startswith("<svg ")
    assert "<?xml" not in svg and "<!DOCTYPE" not in svg and "<metadata>" not in svg
    opening = svg[: svg.index(">") + 1]
    assert "viewBox=" in opening and 'width="' not in opening
    assert 'aria-label="&lt;script&gt;' in opening
    assert "<script" not in svg


def test_hostile_labels_are_text_not_markup_or_mathtext() -> None:
    labels = [HOSTILE, "a/b/c" * 30, "$", "\n\r"]
    svg = bars_svg(labels, [4 << 20, 3 << 20, 1024, 1], label=HOSTILE)
    svg += attribution_svg([(HOSTILE, 10), ("other", 5)], label=HOSTILE)
    assert "<script" not in svg.lower()
    assert "&lt;script&gt;" in svg
    assert "frac" in svg  # drawn as written, not typeset
    assert not re.search(r"<text[^>]*>[^<]*<(?!/text)", svg)


def test_ids_differ_between_charts() -> None:
    times, in_use = random_walk(50)
    one = timeline_svg(
        times, in_use, peak_time_ps=int(times[3]), peak_bytes=int(in_use[3]), salt="a"
    )
    two = timeline_svg(
        times, in_use, peak_time_ps=int(times[3]), peak_bytes=int(in_use[3]), salt="b"
    )
    ids = set(re.findall(r'id="(p[0-9a-f]{8,}|m[0-9a-f]{8,})"', one))
    assert ids and not ids & set(re.findall(r'id="([^"]+)"', two))
