"""Issue 36 item 4: a name cut to fit loses TensorFlow's wrapper scopes first, then
its middle scopes; the direction (``gradient_tape``) and the layer and op stay.

Issue 52: the layer outlasts the model's scope and the direction
(``sequential_1_1/…/MaxPool2d`` kept the model and lost the layer)."""

from __future__ import annotations

import pytest

from traceparse.output.cells import render_plain_table, shorten

GRADIENT = "StatefulPartitionedCall/gradient_tape/functional_1/dense_1/einsum_1/Einsum"
ADAM = "__inference_one_step_on_data_1132/StatefulPartitionedCall/adam/Sqrt_29"


@pytest.mark.parametrize(
    ("name", "width", "cut"),
    [
        (GRADIENT, 80, GRADIENT),
        (GRADIENT, 60, "…/gradient_tape/functional_1/dense_1/einsum_1/Einsum"),
        (GRADIENT, 40, "gradient_tape/…/dense_1/einsum_1/Einsum"),
        (GRADIENT, 32, "gradient_tape/…/dense_1/…/Einsum"),
        (GRADIENT, 30, "…/dense_1/einsum_1/Einsum"),
        (GRADIENT, 20, "…/dense_1/…/Einsum"),
        (GRADIENT, 16, "…/Einsum"),
        (ADAM, 20, "…/adam/Sqrt_29"),
        ("model/" + "x" * 40, 20, "model/xxxxxxxxxxxxxx"[:9] + "…" + "x" * 10),
    ],
)
def test_names_lose_wrappers_then_middle_scopes(name: str, width: int, cut: str) -> None:
    assert shorten(name, width) == cut
    assert len(cut) <= width


def test_the_issues_name_keeps_the_direction_and_the_layer() -> None:
    cut = shorten(GRADIENT, 40)
    # Was "StatefulPartitioned…n_1/einsum_1/Einsum": no gradient_tape, no layer.
    assert cut.startswith("gradient_tape/") and "dense_1" in cut and cut.endswith("/Einsum")


def test_sentences_and_single_words_still_lose_their_middle() -> None:
    sentence = "a sentence that names a/path and goes on and on"
    assert shorten(sentence, 21) == sentence[:10] + "…" + sentence[-10:]
    assert shorten("a" * 300, 20) == "a" * 9 + "…" + "a" * 10


def test_a_plain_table_shows_the_cut_name() -> None:
    lines = render_plain_table(["op", "bytes"], [[GRADIENT, "4 MiB"]], [False, True], width=50)
    assert all(len(line) <= 50 for line in lines)
    assert lines[2].split()[0] == shorten(GRADIENT, len(lines[2].split()[0]))
    assert lines[2].startswith("gradient_tape/…/") or lines[2].startswith("…/")


POOL = "StatefulPartitionedCall/sequential_1_1/max_pooling2d_1/MaxPool2d"
BACKWARD = "gradient_tape/mycnn_1/conv_a_1/Conv2D/Conv2DBackpropInput"


@pytest.mark.parametrize("width", range(27, len(POOL)))
def test_the_layer_survives_where_the_model_scope_goes(width: int) -> None:
    # Issue 52: at 80 columns `ops` showed sequential_1_1/…/MaxPool2d (the model's
    # scope, no layer); the layer and the op fit in 27 characters.
    cut = shorten(POOL, width)
    assert len(cut) <= width
    assert "/max_pooling2d_1/MaxPool2d" in cut, cut
    assert "StatefulPartitionedCall" not in cut


@pytest.mark.parametrize("width", range(33, len(BACKWARD)))
def test_a_backward_op_keeps_its_layer(width: int) -> None:
    cut = shorten(BACKWARD, width)
    assert len(cut) <= width
    assert "/conv_a_1/" in cut and cut.endswith("/Conv2DBackpropInput"), cut


@pytest.mark.parametrize(
    ("name", "layer"),
    [
        ("dense/Tensordot/MatMul", "dense"),  # no model scope: an op's scope follows
        ("gradients/dense/MatMul_grad/MatMul", "dense"),  # TF1's backward pass
        ("replica_1/functional/conv2d_3/Conv2D", "conv2d_3"),
        ("__inference_train_function_99/adam/Sqrt_29", "adam"),
    ],
)
def test_the_layer_is_the_scope_after_the_model(name: str, layer: str) -> None:
    last = name.rsplit("/", 1)[1]
    cut = shorten(name, len(f"…/{layer}/…/{last}"))
    assert f"{layer}/" in cut and cut.endswith(last), cut


def test_a_source_location_loses_its_directories_first() -> None:
    where = "/home/user/project/deep/dir/sources_model.py:60 train"
    assert shorten(where, 32) == "…/dir/sources_model.py:60 train"
    assert shorten(where, 28) == "…/sources_model.py:60 train"
    assert shorten("fixtures/sources_model.py:60 train", 34) == "fixtures/sources_model.py:60 train"


@pytest.mark.parametrize("width", range(30, 41))
def test_a_layer_too_long_is_cut_not_swapped_for_the_model(width: int) -> None:
    # A public AlexNet capture at 80 columns: alex_net_3/…/FusedBatchNormV3 for five
    # layers alike; the layer's number is what tells them apart.
    name = "alex_net_3/batch_normalization_12/FusedBatchNormV3"
    cut = shorten(name, width)
    assert len(cut) <= width and "alex_net_3" not in cut, cut
    assert cut.startswith("…/batch") and cut.endswith("_12/FusedBatchNormV3"), cut
