"""Ops and scopes roll-ups on hand-built traces: nothing lost, liveness, timing, scope names."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import FIXTURES
from helpers.trace import GPU, alloc, free, profile_of

import traceparse
from traceparse import Profile, UsageError
from traceparse.analysis import NO_SCOPE, scope_of

SUMMED = ["requested_bytes", "allocated_bytes", "estimated_bytes", "padding_bytes"]

EVENTS = [
    alloc(10, 1, 4096, op="model/dense/MatMul", requested=4000, shape="[1000]"),
    alloc(20, 2, 1024, op="model/dense/MatMul", shape="[256]"),
    alloc(30, 3, 2048, op="StatefulPartitionedCall/model/conv/Conv2D", shape="[512]"),
    alloc(40, 4, 512, op="gradient_tape/model/dense/MatMul_1", shape=None, dtype=None),
    alloc(50, 5, 256, op=None, shape=None, dtype=None, region=None),
    alloc(55, 6, 768, op="Fill", shape="[192]"),
    free(60, 2, 1024),
    free(70, 4, 512),
    alloc(80, 7, 128, op="model/dense/BiasAdd", shape="[32]", allocator="gpu_host_bfc"),
]
OP_TYPES = {
    "model/dense/MatMul": "MatMul",
    "StatefulPartitionedCall/model/conv/Conv2D": "Conv2D",
    "Fill": "Fill",
}
OP_TIME = [
    ("model/dense/MatMul", 3, 9000),
    ("model/dense/BiasAdd", 3, 600),
    ("model/other/Relu", 1, 50),
]


@pytest.fixture
def prof() -> Profile:
    return profile_of(EVENTS, op_types=OP_TYPES, op_time=OP_TIME)


def test_ops_lose_no_bytes(prof: Profile) -> None:
    ops, allocations = prof.ops, prof.allocations
    for column in SUMMED:
        assert ops[column].sum() == allocations[column].sum(), column
    assert ops["count"].sum() == len(allocations)
    per_allocator = ops.groupby("allocator", observed=True)["allocated_bytes"].sum()
    assert per_allocator.to_dict() == {
        GPU: 4096 + 1024 + 2048 + 512 + 256 + 768,
        "gpu_host_bfc": 128,
    }


def test_an_op_row_has_its_counts_sizes_liveness_and_time(prof: Profile) -> None:
    ops = prof.ops.set_index(prof.ops["op"].astype(object))
    matmul = ops.loc["model/dense/MatMul"]
    assert matmul["op_type"] == "MatMul"
    assert matmul["count"] == 2 and matmul["allocated_bytes"] == 5120
    assert matmul["requested_bytes"] == 5024 and matmul["padding_bytes"] == 96
    assert matmul["largest_bytes"] == 4096
    # Peak of GPU_0_bfc: after the allocation at t=55 (4096+1024+2048+512+256+768).
    assert matmul["live_at_peak"] == 2 and matmul["live_at_peak_bytes"] == 5120
    assert matmul["live_at_end"] == 1 and matmul["live_at_end_bytes"] == 4096
    assert matmul["mean_lifetime_ps"] == 40
    assert matmul["compute_count"] == 3 and matmul["compute_ps"] == 9000
    grad = ops.loc["gradient_tape/model/dense/MatMul_1"]
    assert grad["unestimated"] == 1 and grad["estimated_bytes"] == 0
    conv = ops.loc["StatefulPartitionedCall/model/conv/Conv2D"]
    assert pd.isna(conv["compute_ps"])  # no timing for this op in the trace


def test_allocations_without_an_op_keep_their_own_row(prof: Profile) -> None:
    ops = prof.ops
    unnamed = ops[ops["op"].isna()]
    assert len(unnamed) == 1 and unnamed["allocated_bytes"].iloc[0] == 256


def test_ops_are_listed_by_bytes_live_at_the_peak(prof: Profile) -> None:
    gpu = prof.ops[prof.ops["allocator"] == GPU]
    assert gpu["live_at_peak_bytes"].is_monotonic_decreasing


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_scopes_lose_no_bytes(prof: Profile, depth: int) -> None:
    scopes, allocations = prof.scopes(depth), prof.allocations
    for column in SUMMED:
        assert scopes[column].sum() == allocations[column].sum(), column
    assert scopes["live_at_peak_bytes"].sum() == prof.ops["live_at_peak_bytes"].sum()
    assert scopes["ops"].sum() == allocations["op"].nunique()


def test_scopes_roll_up_by_prefix_without_call_wrappers(prof: Profile) -> None:
    one = prof.scopes(1, as_written=True)
    gpu = one[one["allocator"] == GPU].set_index(
        one["scope"].astype(object)[one["allocator"] == GPU]
    )
    assert gpu.loc["model", "allocated_bytes"] == 4096 + 1024 + 2048
    assert gpu.loc["gradient_tape", "allocated_bytes"] == 512
    assert gpu.loc[NO_SCOPE, "allocated_bytes"] == 768
    assert gpu.loc["model", "ops"] == 2
    # Op time of every op under the scope, with or without allocations.
    assert gpu.loc["model", "compute_ps"] == 9000 + 600 + 50
    two = prof.scopes(2, as_written=True)
    names = set(two["scope"].dropna().astype(str))
    assert {"model/dense", "model/conv", "gradient_tape/model", NO_SCOPE} <= names


def test_unsuffixed_scopes_with_a_backward_pass_are_keras2_layers(prof: Profile) -> None:
    # model/dense/... and gradient_tape/model/dense/...: Keras 2's functional model
    # 'model' (issue 41), so by default the scopes start at its layers, as written.
    one = prof.scopes(1)
    gpu = one[one["allocator"] == GPU].set_index(
        one["scope"].astype(object)[one["allocator"] == GPU]
    )
    assert gpu.loc["dense", "allocated_bytes"] == 4096 + 1024 + 512
    assert gpu.loc["conv", "allocated_bytes"] == 2048
    assert gpu.loc["dense", "compute_ps"] == 9000 + 600


def test_scope_names() -> None:
    # Under a Keras model layer: the layer by the user's name, forward and backward alike.
    assert scope_of("StatefulPartitionedCall/mlp_1/hidden_1/MatMul", 1) == "hidden"
    assert scope_of("StatefulPartitionedCall/gradient_tape/mlp_1/hidden_1/MatMul/M", 1) == "hidden"
    assert scope_of("gradient_tape/mlp_1/hidden_1/MatMul/MatMul_1", 2) == "hidden/MatMul"
    assert scope_of("replica_1/mycnn_1/conv_a_1/Relu", 1) == "conv_a"
    assert scope_of("sequential_1/dense_1_2/MatMul", 1) == "dense_1"  # the user's dense_1
    assert scope_of("net_1/block_1/block_dense_1/Relu", 2) == "block/block_dense_1"
    # Outside a model: as written, minus call wrappers.
    assert scope_of("PartitionedCall_3/StatefulPartitionedCall/a/b", 1) == "a"
    assert scope_of("__inference_train_step_123/a/b", 1) == "a"
    assert scope_of("adam/Square_2", 1) == "adam"
    assert scope_of("adam/hidden_kernel_momentum/Mul", 2) == "adam/hidden_kernel_momentum"
    assert scope_of("compile_loss/sparse_categorical_crossentropy/Mul", 1) == "compile_loss"
    assert scope_of("augment/resize/ResizeBilinear", 2) == "augment/resize"
    assert scope_of("sequential/dense/MatMul", 1) == "sequential"  # TF1: no Keras suffixes
    assert scope_of("mlp_1/Cast", 1) == "mlp_1"  # in the model, in no layer
    assert scope_of("Fill", 1) == NO_SCOPE
    assert scope_of("StatefulPartitionedCall/Add", 1) == NO_SCOPE
    # As written: the old grouping, model first.
    op = "StatefulPartitionedCall/mlp_1/hidden_1/MatMul"
    assert scope_of(op, 1, as_written=True) == "mlp_1"
    assert scope_of(op, 2, as_written=True) == "mlp_1/hidden_1"
    assert scope_of(op, 9, as_written=True) == "mlp_1/hidden_1"
    assert scope_of("gradient_tape/mlp_1/hidden_1/M", 1, as_written=True) == "gradient_tape"


def test_depth_one_scopes_are_the_layers_forward_and_backward_together() -> None:
    """layers_cnn: scopes(1) has one row per layer, its forward and backward ops
    together, as the layers table splits them; as written it is model, tape, optimizer."""
    prof = traceparse.load(FIXTURES / "layers_cnn")
    one = prof.scopes(1)
    by_scope = dict(zip(one["scope"].astype(object), one["live_at_peak_bytes"], strict=True))
    layers = prof.layers().set_index("layer")
    for layer in ("conv_a", "conv_b", "dense_1"):
        row = layers.loc[layer]
        assert by_scope[layer] == row["activation_bytes"] + row["gradient_bytes"]
    assert one["scope"].iloc[0] == "conv_a"
    written = set(prof.scopes(1, as_written=True)["scope"].astype(str))
    assert written == {"mycnn_1", "gradient_tape", "adam"}
    assert prof.scopes(2).equals(prof.scopes(2))  # cached per (depth, as_written)
    assert not prof.scopes(2).equals(prof.scopes(2, as_written=True))


@pytest.mark.parametrize("depth", [0, -1, 1.5, True])
def test_a_scope_depth_below_one_is_a_usage_error(prof: Profile, depth: object) -> None:
    with pytest.raises(UsageError, match="depth"):
        prof.scopes(depth)
