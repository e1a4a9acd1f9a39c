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


@pytest.mark.parametrize(
    ("run", "earlier"),
    [
        # alex_net (a fresh kernel), alex_net_1, alex_net_3, alex_net_5: the model's
        # Keras name counts the AlexNets before it, five BatchNormalization each.
        ("gpu_alexnet_v100_128/plugins/profile/2020_12_21_18_07_00", None),
        ("gpu_alexnet_v100_128/plugins/profile/2020_12_21_18_20_31", 5),
        ("gpu_alexnet_v100_64/plugins/profile/2020_12_22_03_28_27", 15),
        ("gpu_alexnet_v100_16/plugins/profile/2020_12_21_21_38_38", 25),
    ],
)
def test_held_before_the_capture_is_split_into_the_models_and_the_rest(
    run: str, earlier: int | None
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
