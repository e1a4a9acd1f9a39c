"""Diffs across different step counts, and check --baseline agreeing with diff.

fixtures/epoch_128 and epoch_256 are one Keras MLP over the same 768 examples
at batch 128 (6 steps) and 256 (3 steps): over the capture both ask for the
same activation bytes, while each step's activations double.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traceparse
from traceparse.cli.app import main
from traceparse.gate import Budgets, baseline_of, diff_figures, evaluate, figures_of
from traceparse.gate.baseline import Baseline
from traceparse.gate.figures import AllocatorFigures, OpFigures

REPO = Path(__file__).resolve().parent.parent
NO_SHAPE_CHANGED = "shapes changed (the rest is buffer reuse"


@pytest.fixture(scope="module")
def epochs() -> tuple[traceparse.Profile, traceparse.Profile]:
    return traceparse.load(REPO / "fixtures/epoch_128"), traceparse.load(
        REPO / "fixtures/epoch_256"
    )


def test_figures_count_steps(epochs: tuple[traceparse.Profile, traceparse.Profile]) -> None:
    small, large = (figures_of(p) for p in epochs)
    assert [f.steps for f in small] == [6] and [f.steps for f in large] == [3]
    # The trap: over the capture the activations of the two runs ask for the same bytes.
    relu = "mlp_1/wide_1/Relu"
    assert small[0].ops[relu].requested_bytes == large[0].ops[relu].requested_bytes


def test_a_diff_across_step_counts_names_the_shape_change(
    epochs: tuple[traceparse.Profile, traceparse.Profile],
) -> None:
    (diff,) = diff_figures(figures_of(epochs[0]), figures_of(epochs[1]))
    assert diff.per_step
    relu = next(r for r in diff.rows if r.key == "mlp_1/wide_1/Relu")
    assert relu.reshaped and relu.requested_delta == 128 * 2048 * 4  # one step's growth
    headline = diff.headline()
    assert NO_SHAPE_CHANGED not in headline
    assert "float32[128,2048] → float32[256,2048]" in headline
    assert "6 steps → 3" in headline and "per step" in headline
    assert relu in diff.explained_by


@pytest.mark.parametrize(
    "pair",
    [("batch_128", "batch_256"), ("epoch_128", "epoch_256"), ("epoch_256", "epoch_128")],
)
def test_no_headline_is_contradicted_by_a_row(pair: tuple[str, str]) -> None:
    before, after = (figures_of(traceparse.load(REPO / "fixtures" / name)) for name in pair)
    for diff in diff_figures(before, after):
        reshaped = [r for r in diff.rows if r.reshaped]
        assert reshaped  # the batch is in the activations' shapes
        assert NO_SHAPE_CHANGED not in diff.headline()
        assert diff.explained_by and all(r.reshaped for r in diff.explained_by)


def test_equal_step_counts_compare_over_the_capture() -> None:
    ops_a = {"x": OpFigures(0, 8, 2, 8, 0, ("float32[1]",))}
    ops_b = {"x": OpFigures(0, 16, 2, 16, 0, ("float32[2]",))}
    a = AllocatorFigures("h", "bfc", 100, ops=ops_a, steps=4)
    b = AllocatorFigures("h", "bfc", 100, ops=ops_b, steps=4)
    (diff,) = diff_figures([a], [b])
    assert not diff.per_step and diff.rows[0].requested_delta == 8
    (halved,) = diff_figures([a], [AllocatorFigures("h", "bfc", 100, ops=ops_b, steps=8)])
    assert halved.per_step and halved.rows[0].requested_delta == 0  # 16/8 - 8/4


def test_steps_survive_a_baseline_file(
    epochs: tuple[traceparse.Profile, traceparse.Profile],
) -> None:
    base = baseline_of(epochs[0])
    again = Baseline.from_json(base.to_json())
    assert [f.steps for f in again.allocators] == [6]
    data = json.loads(base.to_json())
    for entry in data["allocators"]:
        del entry["gate"]["steps"]  # a baseline written before steps were recorded
    old = Baseline.from_dict(data)
    assert [f.steps for f in old.allocators] == [None]


def test_check_and_diff_agree_on_new_ops() -> None:
    before = traceparse.load(REPO / "fixtures/batch_128")
    after = traceparse.load(REPO / "fixtures/batch_256")
    base = baseline_of(before)
    budgets = Budgets.from_options(baseline=base, tolerance="0%", compare="allocated")
    (result,) = evaluate(after, budgets)
    assert result.status == "fail" and result.contributors
    (diff,) = diff_figures(base.allocators, figures_of(after), compare="allocated")
    status = {r.key: r.status for r in diff.rows}
    for contributor in result.contributors:
        says_new = contributor.detail == "new"
        assert says_new == (status[contributor.name] == "new"), contributor
    in_baseline_idle = [
        c for c in result.contributors if c.detail.startswith("0 B -> ")
    ]  # in the baseline, not live at its peak: changed, not new
    assert all(status[c.name] == "changed" for c in in_baseline_idle)


def test_diff_command_headline_across_batch_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diff", str(REPO / "fixtures/epoch_128"), str(REPO / "fixtures/epoch_256")])
    out = capsys.readouterr().out
    assert code == 0
    headline = next(line for line in out.splitlines() if line.startswith("mklcpu"))
    assert "float32[128,2048] → float32[256,2048]" in headline
    assert "Δ requested per step" in out
