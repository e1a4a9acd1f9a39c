"""The capacity search with fewer replays (analysis/predict_capacity.py): the
bracketed search finds what a scan of every batch finds on growing peaks, counts
its replays, and the report's replay budget says what it left out."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.predict.capacity import (
    MAX_BATCH,
    REPORT_REPLAY_EVENTS,
    _largest,
    report_budget,
    report_curves,
)
from traceparse.core.profile import predictor_of
from traceparse.report.predict import record_prediction_caption


def _scan(values: np.ndarray, capacity: float) -> int | None:
    """The largest n (1-based) with values[n-1] <= capacity, among a growing run."""
    fits = np.flatnonzero(values <= capacity)
    return None if not len(fits) else int(fits[-1]) + 1


@pytest.mark.parametrize("seed", range(200))
def test_the_search_finds_the_scans_answer_on_growing_peaks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(2, 5000))
    # Affine in the batch with steps (chunks rounded, regions doubling), never falling.
    steps = rng.integers(0, 3, size) * rng.integers(0, 1 << 20)
    values = rng.integers(1, 1 << 30) + np.cumsum(rng.integers(0, 1 << 22) + steps)
    capacity = float(rng.uniform(values[0] * 0.9, values[-1] * 1.1))
    asked: list[int] = []

    def value(n: int) -> float:
        asked.append(n)
        return float(values[n - 1])

    found = _largest(value, capacity, int(rng.integers(1, size + 1)), limit=size)
    assert found == _scan(values, capacity)
    # Fewer probes than a bisection over the range can need, twice over.
    assert len(set(asked)) <= 2 * (int(np.log2(size)) + 2)


def test_the_search_ends_on_a_boundary_where_peaks_step_down() -> None:
    rng = np.random.default_rng(7)
    values = np.cumsum(rng.normal(1.0, 3.0, 3000))  # falls now and then
    capacity = float(values[1500])
    found = _largest(lambda n: float(values[n - 1]), capacity, 10, limit=3000)
    assert found is not None and values[found - 1] <= capacity < values[found]


def test_nothing_fits_and_everything_fits() -> None:
    assert _largest(lambda n: 10.0 * n, 5.0) is None
    assert _largest(lambda n: 1.0, 5.0) == MAX_BATCH


def test_the_budget_grows_with_nothing_but_the_events() -> None:
    assert report_budget(1000) is None
    assert report_budget(REPORT_REPLAY_EVENTS) == 2
    assert report_budget(REPORT_REPLAY_EVENTS // 8) == 8


def test_a_report_over_budget_says_what_it_left_out() -> None:
    predictor = predictor_of(traceparse.load(FIXTURES / "keras_train"))
    whole = report_curves(predictor, budget=None)
    cut = report_curves(predictor, budget=2)
    ((key, full),) = whole.items()
    part = cut[key]
    assert "left_out" not in full
    left = part["left_out"]
    assert left["replayed"] == 2 and not left["searched"]
    assert left["events"] == len(predictor.base.timeline)
    # The two replayed are the captured batch's neighbours; the rest is named.
    shown = part["curve"]["batch_size"].tolist()
    captured = predictor.batch
    assert sorted(shown) == [captured // 2, captured, captured * 2]
    assert sorted(shown + left["batch_sizes"]) == sorted(
        n for n in full["curve"]["batch_size"].tolist() if n <= captured * 8
    )
    kept = full["curve"].set_index("batch_size").loc[shown]
    assert kept["peak_bytes"].tolist() == part["curve"]["peak_bytes"].tolist()
    caption = record_prediction_caption(part)
    assert "Left out" in caption and "--capacity" in caption and "Not even" not in caption
    assert str(left["batch_sizes"][0]) in caption
