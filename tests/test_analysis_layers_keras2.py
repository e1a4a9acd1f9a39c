"""Layers in every Keras generation (issue 41): Keras 2 names as written, nested models opened.

The Keras 2 fixtures (``fixtures/make_keras2.py``, ``tf_keras`` under
``TF_USE_LEGACY_KERAS=1``) record in MANIFEST.json the model's name, its layers
and the path of every layer inside a nested model, read from the real Keras 2
objects: the ground truth the op names are checked against.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import FIXTURES, MANIFEST, run_traceparse
from helpers.trace import GPU, alloc, profile_of

import traceparse
from traceparse.analysis.naming import (
    EXPLICIT_ROWS,
    GRADIENT,
    NO_LAYER,
    OPTIMIZER_UNASSIGNED,
    OPTIMIZER_UPDATE,
    KnownNames,
    known_names,
    layer_path,
    place_op,
)
from traceparse.analysis.naming.generations import (
    ESTIMATOR,
    KERAS2,
    KERAS3,
    TF1,
    read_generation,
)
from traceparse.core.profile import Profile
from traceparse.errors import UsageError

# TensorFlow 2.21 with tf_keras 2.21, and the oldest pair the compat job uses (2.16).
KERAS2_FIXTURES = [
    "keras2_sequential",
    "keras2_functional",
    "keras2_subclassed",
    "keras2_mirrored",
    "keras2_tf216_functional",
    "keras2_tf216_mirrored",
]
KERAS3_FIXTURES = ["layers_cnn", "layers_functional", "layers_sequential", "keras_train"]
KINDS = [
    *("activation_bytes", "gradient_bytes", "weight_bytes", "optimizer_state_bytes"),
    *("optimizer_update_bytes", "other_bytes", "unknown_bytes"),
]
MARKERS = ("gradient_tape", "StatefulPartitionedCall")


def load(name: str) -> Profile:
    return traceparse.load(FIXTURES / name)


def assert_rows_sum_to_in_use(prof: Profile, table: pd.DataFrame) -> None:
    assert (table[KINDS].sum(axis=1) == table["live_at_peak_bytes"]).all()
    sums = table.groupby(["host", "allocator"], observed=True)["live_at_peak_bytes"].sum()
    for _, peak in prof.peak.iterrows():
        assert sums[(peak["host"], peak["allocator"])] == peak["in_use_bytes"]


def scopes_under_model(op: str, model: str) -> list[str] | None:
    """The scopes after the model's own scope, read off the op name independently of
    traceparse's parser: None when the op is not under ``model``."""
    parts = op.split("/")[:-1]
    if model not in parts:
        return None
    return parts[parts.index(model) + 1 :]


@pytest.mark.parametrize("name", KERAS2_FIXTURES)
def test_keras2_fixtures_are_read_as_keras2(name: str) -> None:
    assert MANIFEST["fixtures"][name]["versions"]["tf_keras"].startswith("2.")
    generation = load(name)._naming.generation
    assert (generation.name, generation.sure) == (KERAS2, True)


@pytest.mark.parametrize("name", KERAS3_FIXTURES)
def test_keras3_fixtures_are_read_as_keras3(name: str) -> None:
    generation = load(name)._naming.generation
    assert (generation.name, generation.sure) == (KERAS3, True)


@pytest.mark.parametrize("name", KERAS2_FIXTURES)
def test_every_keras2_op_under_a_layer_lands_in_that_layers_row_as_named(name: str) -> None:
    entry = MANIFEST["fixtures"][name]
    model, layers = entry["model"], set(entry["layers"])
    prof = load(name)
    rows = prof.breakdown
    under = 0
    for op, layer in zip(rows["op"].astype(object), rows["layer"].astype(object), strict=True):
        scopes = scopes_under_model(op, model) if isinstance(op, str) else None
        if scopes and scopes[0] in layers:
            assert layer == scopes[0], (op, layer)
            under += 1
    assert under > 0
    # Every allocation of the capture too, through the allocated bytes of each row.
    allocations = prof.allocations
    expected: dict[str, int] = {}
    for op, nbytes in zip(
        allocations["op"].astype(object), allocations["allocated_bytes"], strict=True
    ):
        scopes = scopes_under_model(op, model) if isinstance(op, str) else None
        if scopes and scopes[0] in layers and not op.split("/")[0][:1].isupper():
            expected[scopes[0]] = expected.get(scopes[0], 0) + int(nbytes)
    table = prof.layers().set_index("layer")
    for layer, nbytes in expected.items():
        assert table.loc[layer, "allocated_bytes"] == nbytes, layer


@pytest.mark.parametrize("name", KERAS2_FIXTURES)
def test_no_two_keras2_layers_share_a_row_and_rows_sum_to_the_peak(name: str) -> None:
    entry = MANIFEST["fixtures"][name]
    prof = load(name)
    for depth in (1, 2, 3):
        table = prof.layers(depth=depth)
        assert_rows_sum_to_in_use(prof, table)
        keys = ["host", "allocator", "layer", *(["path"] if depth > 1 else [])]
        assert not table.duplicated(keys).any()
        named = set(table["layer"]) - set(EXPLICIT_ROWS)
        assert named and named <= set(entry["layers"])
        if depth > 1:
            paths = set(table["path"]) - set(EXPLICIT_ROWS)
            assert paths <= set(entry["layer_paths"]), paths
            assert all(p.count("/") < depth for p in paths)
            assert (
                (
                    table.groupby("layer")[KINDS].sum()
                    == prof.layers().set_index("layer")[KINDS].groupby(level=0).sum()
                )
                .all()
                .all()
            )


def test_suffixed_keras2_layers_are_two_rows_not_one() -> None:
    # The Sequential fixture's layers are conv2d_2 and conv2d_3 (a first model took
    # conv2d and conv2d_1): Keras 3's rule would merge them into one row, conv2d.
    table = load("keras2_sequential").layers().set_index("layer")
    for layer in ("conv2d_2", "conv2d_3", "batch_normalization_2", "batch_normalization_3"):
        assert table.loc[layer, "live_at_peak_bytes"] > 0, layer
    assert "conv2d" not in table.index and "batch_normalization" not in table.index


@pytest.mark.parametrize("name", ["keras2_functional", "keras2_tf216_functional"])
def test_a_nested_model_is_one_row_and_opens_into_its_layers(name: str) -> None:
    prof = load(name)
    top = prof.layers().set_index("layer")
    assert "backbone" in top.index and "block" not in top.index
    deep = prof.layers(depth=3)
    backbone = deep[deep["layer"] == "backbone"]
    assert {"backbone/stem", "backbone/block/block_conv", "backbone/block/block_norm"} <= set(
        backbone["path"]
    )
    assert backbone["live_at_peak_bytes"].sum() == top.loc["backbone", "live_at_peak_bytes"]
    assert backbone["allocated_bytes"].sum() == top.loc["backbone", "allocated_bytes"]
    # A subclassed model's layers holding layers open the same way.
    paths = set(load("keras2_subclassed").layers(depth=2)["path"])
    assert {"layer_0/expand", "layer_1/expand", "layer_1/project"} <= paths


def test_a_keras3_nested_model_opens_by_its_users_names() -> None:
    prof = load("layers_functional")
    deep = prof.layers(depth=2)
    block = deep[deep["layer"] == "block"].set_index("path")
    assert set(block.index) <= {"block", "block/block_dense"}
    assert block.loc["block/block_dense", "gradient_bytes"] > 0
    # Weights and the optimizer temporaries tied to them by shape stay at the layer's
    # own path (docs/analyses.md: a variable is not placed in a sublayer).
    if "block" in block.index:
        own = block.loc["block"]
        assert own["activation_bytes"] == own["gradient_bytes"] == 0
    assert_rows_sum_to_in_use(prof, deep)
    # A plain layer's own op scopes (dense_1/MatMul) are not layers inside it.
    assert set(load("layers_cnn").layers(depth=3)["path"]) - set(EXPLICIT_ROWS) <= {
        "conv_a",
        "conv_b",
        "dense_1",
    }


@pytest.mark.parametrize("name", ["keras2_mirrored", "keras2_tf216_mirrored"])
def test_the_mirrored_fixture_keeps_replicas_apart_by_layer(name: str) -> None:
    prof = load(name)
    ops = set(prof.allocations["op"].dropna().astype(str))
    assert any(op.startswith("replica_1/") for op in ops)
    split = prof.layers(by_replica=True, depth=2)
    conv = split[split["layer"] == "conv"]
    assert set(conv["replica"]) == {0, 1}
    assert set(conv["path"]) == {"conv"}
    assert_rows_sum_to_in_use(prof, split)


# The names of issue 41's public captures (tf.keras 2 on GPUs), placed by Keras 2's rules.
PUBLIC_KERAS2_OPS = [
    "sequential_1/conv2d_3/Conv2D",
    "gradient_tape/sequential_1/conv2d_4/Conv2D/Conv2DBackpropFilter",
    "sequential_1/batch_normalization_4/FusedBatchNormV3",
    "sequential_1/batch_normalization_5/FusedBatchNormV3",
    "gradient_tape/sequential_1/batch_normalization_6/FusedBatchNormGradV3",
    "Adam/Adam/update_4/ResourceApplyAdam",
    "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_2/self_attention/einsum/Einsum",
    "gradient_tape/replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_2/"
    "self_attention/einsum/Einsum/Einsum_1",
]


def test_public_keras2_names_are_read_as_keras2_and_kept_as_written() -> None:
    known = known_names(PUBLIC_KERAS2_OPS, None, None)
    assert known.generation == KERAS2
    placed = [place_op(op, known) for op in PUBLIC_KERAS2_OPS]
    assert [p.layer for p in placed[:5]] == [
        "conv2d_3",
        "conv2d_4",
        "batch_normalization_4",
        "batch_normalization_5",
        "batch_normalization_6",
    ]
    assert (placed[1].kind, placed[5].kind) == (GRADIENT, OPTIMIZER_UPDATE)
    assert placed[5].layer == OPTIMIZER_UNASSIGNED
    assert (placed[6].layer, placed[6].replica, placed[7].kind) == ("bert_encoder_1", 4, GRADIENT)
    assert layer_path(PUBLIC_KERAS2_OPS[6], known, 4) == (
        "bert_encoder_1/transformer/layer_2/self_attention"
    )
    assert layer_path(PUBLIC_KERAS2_OPS[7], known, 9) == (
        "bert_encoder_1/transformer/layer_2/self_attention/einsum"
    )
    assert layer_path(PUBLIC_KERAS2_OPS[6], known, 1) == "bert_encoder_1"


def test_public_keras2_names_make_one_row_per_layer() -> None:
    events = [alloc(10 * i, i + 1, 1024 * (i + 1), op=op) for i, op in enumerate(PUBLIC_KERAS2_OPS)]
    prof = profile_of(events)
    table = prof.layers()
    assert {"conv2d_3", "conv2d_4", "batch_normalization_6", "bert_encoder_1"} <= set(
        table["layer"]
    )
    assert not table.duplicated(["layer"]).any()
    assert_rows_sum_to_in_use(prof, table)
    deep = prof.layers(depth=4)
    assert "bert_encoder_1/transformer/layer_2/self_attention" in set(deep["path"])
    assert_rows_sum_to_in_use(prof, deep)
    assert (deep["allocator"] == GPU).all()


@pytest.mark.parametrize(
    ("ops", "generation", "sure"),
    [
        (["adam/Mul_3", "gradient_tape/mlp_1/hidden_1/MatMul/MatMul"], KERAS3, True),
        (["Adam/mul_3", "gradient_tape/mlp/hidden/MatMul/MatMul"], KERAS2, True),
        (["gradient_tape/sequential_1/dense_1_2/MatMul/MatMul"], KERAS3, True),
        (["gradients/dense/MatMul_grad/MatMul", "training/Adam/mul"], TF1, True),
        (["OptimizeLoss/gradients/dnn/hiddenlayer_0/MatMul_grad/MatMul"], ESTIMATOR, True),
        # Suffixed scopes alone fit both Keras generations: Keras 3, not surely.
        (["gradient_tape/sequential_1/conv2d_3/Conv2D/Conv2DBackpropInput"], KERAS3, False),
        # Clues both ways: the larger count wins, not surely.
        (["Adam/mul_3", "Adam/mul_4", "compile_loss/Mul"], KERAS2, False),
        (["Fill", "AddV2"], KERAS3, False),
    ],
)
def test_the_generation_is_read_from_the_op_names(
    ops: list[str], generation: str, sure: bool
) -> None:
    read = read_generation(ops)
    assert (read.name, read.sure) == (generation, sure)


def test_an_inventory_of_tensorflow_variable_names_says_keras2() -> None:
    read = read_generation(
        ["gradient_tape/sequential_1/dense_3/MatMul/MatMul"], ["dense_3/kernel:0"]
    )
    assert (read.name, read.sure) == (KERAS2, True)


def test_a_tf1_graph_places_ops_under_their_first_scope_as_written() -> None:
    ops = ["dense_1/MatMul", "gradients/dense_2/MatMul_grad/MatMul", "dense_2/Relu", "init/x"]
    known = known_names(ops, None, None)
    assert known.generation == TF1
    assert place_op("dense_1/MatMul", known).layer == NO_LAYER  # no backward pass: a plain scope
    assert place_op("dense_2/Relu", known).layer == "dense_2"
    assert place_op("gradients/dense_2/MatMul_grad/MatMul", known).kind == GRADIENT


def test_unsure_generations_are_said_in_the_diagnostics() -> None:
    ops = ["Adam/mul_3", "Adam/mul_4", "compile_loss/Mul", "gradient_tape/m/dense/MatMul/MatMul"]
    prof = profile_of([alloc(10 * i, i + 1, 1024, op=op) for i, op in enumerate(ops)])
    notes = [n for n in prof.diagnostics() if n.startswith("layer names:")]
    assert len(notes) == 1 and "keras 2" in notes[0] and "compile_loss/" in notes[0]
    for name in [*KERAS2_FIXTURES, *KERAS3_FIXTURES]:
        assert not any(n.startswith("layer names:") for n in load(name).diagnostics()), name


def test_a_depth_that_is_not_a_whole_number_of_levels_is_refused() -> None:
    prof = load("keras2_functional")
    for depth in (0, -1, 1.5, True):
        with pytest.raises(UsageError):
            prof.layers(depth=depth)  # type: ignore[arg-type]
    assert KnownNames().generation == KERAS3


def test_the_layers_command_opens_nested_models_with_depth() -> None:
    done = run_traceparse(
        "layers", "fixtures/keras2_functional", "--depth", "3", "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert "backbone/block/block_norm" in {row["path"] for row in rows}
    plain = run_traceparse("layers", "fixtures/keras2_functional", "--format", "json")
    assert plain.returncode == 0, plain.stderr
    assert all("path" not in row for row in json.loads(plain.stdout))


def test_a_keras2_loss_scope_is_not_a_model_and_tf1_updates_are_the_optimizers() -> None:
    ops = [
        "Adam/mul_3",
        "gradient_tape/mlp/hidden/MatMul/MatMul",
        "sparse_categorical_crossentropy/weighted_loss/Mul",
        "gradient_tape/sparse_categorical_crossentropy/weighted_loss/Mul/Mul",
    ]
    known = known_names(ops, None, None)
    assert known.models == {"mlp"}
    assert place_op(ops[3], known).layer == NO_LAYER
    tf1 = known_names(["gradients/dense/MatMul_grad/MatMul", "training/Adam/mul_1"], None, None)
    assert place_op("training/Adam/mul_1", tf1).kind == OPTIMIZER_UPDATE
