"""What an allocator held when its capture started: the model's own variables, and
the evidence of earlier models in the process (``Predictor.held_columns``), on the
public GPU captures of a notebook that built AlexNet after AlexNet."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES
from helpers.public_models import ALEXNET_PARAMS

import traceparse
from traceparse.analysis.predict.predictor import earlier_builds
from traceparse.core.profile import predictor_of
from traceparse.output.predict import held_line


def test_earlier_builds_reads_keras_automatic_names() -> None:
    # The fifth AlexNet of a session: 20 Conv2D and 25 BatchNormalization before it.
    names = ["conv2d_20", "conv2d_21", "batch_normalization_25", "last_conv", "dense", None]
    assert earlier_builds(np.array(names, dtype=object)) == ("batch_normalization_25", 25)
    # A first model starts at each class's first name.
    assert earlier_builds(np.array(["conv2d", "conv2d_1", "batch_normalization"])) is None
    # One stem numbered from 1 may be the user's own numbering, not evidence.
    assert earlier_builds(np.array(["block_1", "block_2", "dense"])) is None
    # Placeholders and nested paths are not layer names.
    assert earlier_builds(np.array(["(no layer)", "model/conv2d_3", "dense"])) is None


# alex_net (a fresh kernel), alex_net_1, alex_net_3, alex_net_5: the model's Keras
# name counts the AlexNets before it, five BatchNormalization layers each.
RUNS = {
    None: "gpu_alexnet_v100_128/plugins/profile/2020_12_21_18_07_00",
    5: "gpu_alexnet_v100_128/plugins/profile/2020_12_21_18_20_31",
    15: "gpu_alexnet_v100_64/plugins/profile/2020_12_22_03_28_27",
    25: "gpu_alexnet_v100_16/plugins/profile/2020_12_21_21_38_38",
}


@pytest.mark.parametrize(("earlier", "run"), RUNS.items())
def test_held_before_the_capture_is_split_into_the_models_and_the_rest(
    earlier: int | None, run: str
) -> None:
    prof = traceparse.load(FIXTURES / run)
    predictor = predictor_of(prof)
    key = next(k for k in predictor.rows if k[1] == "GPU_0_bfc")
    held = predictor.held_columns(key)
    # The weights and Adam's two slots, counted from the architecture.
    assert held["own_held_bytes"] == 3 * 4 * ALEXNET_PARAMS
    assert held["held_before_bytes"] >= held["own_held_bytes"]
    assert held["earlier_layers"] == earlier
    row = prof.predict(64).set_index("allocator").loc["GPU_0_bfc"]
    line = held_line(row)
    if earlier is None:
        # A fresh kernel's 7.2 MiB beyond the variables: not worth a line.
        assert line is None
    else:
        assert line is not None and f"built {earlier} layers" in line


def _gpu_key(predictor: object) -> tuple[object, object]:
    return next(k for k in predictor.rows if k[1] == "GPU_0_bfc")  # type: ignore[attr-defined]


def test_advise_offers_a_fresh_process_where_earlier_models_hold_memory() -> None:
    from traceparse.analysis.whatif import Change, advice, candidates, facts_of

    fifth = predictor_of(traceparse.load(FIXTURES / RUNS[25]))
    key = _gpu_key(fifth)
    held = fifth.held_columns(key)
    rows = [r for r in advice(fifth, [key], None, search=False) if r["change"] == "a fresh process"]
    assert len(rows) == 1
    # At the captured batch the point is the capture less those bytes, exactly.
    assert rows[0]["saved_bytes"] == held["held_before_bytes"] - held["own_held_bytes"]
    assert "clear_session" in rows[0]["cost"] and "batch_normalization_25" in rows[0]["notes"][0]
    # A first model in its process: nothing to offer.
    first = predictor_of(traceparse.load(FIXTURES / RUNS[None]))
    assert Change(fresh=True) not in candidates(facts_of(first))


def test_a_fresh_process_against_real_first_model_runs() -> None:
    # The second AlexNet of its notebook at 128, asked for a fresh process, against
    # the two runs of the same model at 128 that were the first in theirs.
    from traceparse.analysis.whatif import Change, WhatIf

    second = predictor_of(traceparse.load(FIXTURES / RUNS[5]))
    key = _gpu_key(second)
    _, point, low, high = WhatIf.of(second, Change(fresh=True)).bounds(128)[key]
    captured = second.bounds(128)[key][1]
    assert point < captured
    for run in ("2020_12_21_18_07_00", "2020_12_21_18_35_48"):
        prof = traceparse.load(FIXTURES / "gpu_alexnet_v100_128/plugins/profile" / run)
        real = int(prof.peak.query("allocator == 'GPU_0_bfc'")["in_use_bytes"].iloc[0])
        assert low <= real <= high


@pytest.mark.parametrize(
    "fixture", ["layers_cnn", "layers_functional", "predict_mixed_16", "keras2_subclassed"]
)
def test_weights_and_slots_read_off_gradients_are_what_was_held(fixture: str) -> None:
    # CPU captures without an inventory, whose capture starts after the first step:
    # what the allocator held then is the model's variables and Adam's two slots
    # of each, to the byte (the counter is the allocator's own; the weights are
    # read off the last step's gradients, a shared layer's once). keras2_subclassed's
    # Dense kernels on [B, T, in] ([512,128] at batch 8) are a weight's shape that
    # could also be folded rows: the point reads them as weights, and so does this.
    predictor = predictor_of(traceparse.load(FIXTURES / fixture))
    key = next(iter(predictor.rows))
    read = predictor.read_before(key)
    assert set(read["role"]) == {"weight", "optimizer_state"}
    weights = int(read.loc[read["role"] == "weight", "bytes"].sum())
    assert int(read.loc[read["role"] == "optimizer_state", "bytes"].sum()) == 2 * weights
    assert int(read["bytes"].sum()) == predictor.held_columns(key)["held_before_bytes"]


def test_predict_fresh_leaves_out_what_earlier_models_held(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from traceparse.analysis.whatif import Change, WhatIf
    from traceparse.cli import main

    run = FIXTURES / RUNS[25]
    fifth = predictor_of(traceparse.load(run))
    key = _gpu_key(fifth)
    held = fifth.held_columns(key)
    dropped = held["held_before_bytes"] - held["own_held_bytes"]
    table = traceparse.load(run).predict(32, fresh=True).set_index("allocator")
    row = table.loc["GPU_0_bfc"]
    assert row["dropped_held_bytes"] == dropped
    assert row["predicted_peak_bytes"] == WhatIf.of(fifth, Change(fresh=True)).bounds(32)[key][1]
    assert (
        row["predicted_peak_bytes"]
        < traceparse.load(run)
        .predict(32)
        .set_index("allocator")
        .loc["GPU_0_bfc", "predicted_peak_bytes"]
    )
    assert main(["predict", str(run), "--batch", "32", "--fresh", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "with a fresh process" in out and "the prediction leaves out" in out
    # A first model in its process: nothing earlier to leave out, and it says so.
    first = FIXTURES / RUNS[None]
    assert main(["predict", str(first), "--fresh", "--no-color"]) == 0
    assert "no earlier models show" in capsys.readouterr().out


def test_the_report_splits_what_was_held_before_a_callback_capture() -> None:
    # No inventory and no compiled program: the report's "Before the capture" is the
    # prediction's reading, the variables off their gradients and earlier models.
    from traceparse.output.units import format_bytes
    from traceparse.report.view import build_view

    def before(run: str) -> str:
        view = build_view([traceparse.load(FIXTURES / run)], "test", top=5, predict=True)
        gpu = next(a for a in view.profiles[0].allocators if a.allocator == "GPU_0_bfc")
        (fact,) = [f for f in gpu.facts if f.label == "Before the capture"]
        held = gpu.summary.prediction["held"]  # type: ignore[attr-defined]
        assert held["own_held_bytes"] == 3 * 4 * ALEXNET_PARAMS
        assert fact.value == format_bytes(held["held_before_bytes"])
        return str(fact.detail)

    detail = before(RUNS[25])
    assert "read off their gradients" in detail and "batch_normalization_25" in detail
    assert "built 5 layers" in before(RUNS[5])
