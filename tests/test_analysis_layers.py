"""``Profile.layers``: every byte at the peak in exactly one row, layers named as users wrote them.

The Keras fixtures (fixtures/MANIFEST.json) record the model's layer names and
the ``.path`` of every model and optimizer variable, read from the real Keras 3
objects; the variable inventory frames here are built from those names.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, MANIFEST, MEMORY_FIXTURES
from helpers.trace import GPU, alloc, free, profile_of

import traceparse
from traceparse.analysis import layers_table
from traceparse.analysis.breakdown import breakdown_table
from traceparse.analysis.naming import (
    ACTIVATION,
    BEFORE_CAPTURE,
    GRADIENT,
    NO_LAYER,
    OPTIMIZER_STATE,
    OPTIMIZER_UNASSIGNED,
    OPTIMIZER_UPDATE,
    OTHER,
    KnownNames,
    known_names,
    place_op,
    unique_weight_shapes,
)
from traceparse.analysis.xla_live import slab_frame
from traceparse.core.profile import Profile

LAYER_FIXTURES = ["layers_cnn", "layers_functional", "layers_sequential"]
KINDS = [
    *("activation_bytes", "gradient_bytes", "weight_bytes", "optimizer_state_bytes"),
    *("optimizer_update_bytes", "other_bytes", "unknown_bytes"),
]
# On CPU, mklcpu serves requests under 256 KiB from a pool that records nothing.
RECORDED = 256 * 1024


def load(name: str) -> Profile:
    return traceparse.load(FIXTURES / name)


def inventory(name: str, host: str) -> pd.DataFrame:
    """A variables frame (issue 14's columns) from the fixture's real Keras variable paths."""
    entry = MANIFEST["fixtures"][name]
    model = entry["variables"][0]["path"].split("/")[0] if name == "layers_cnn" else None
    rows = []
    for role, variables in (("weight", entry["variables"]), ("optimizer", None)):
        for var in variables or entry["optimizer_variables"]:
            size = int(np.prod(var["shape"], dtype=np.int64)) * 4
            kind = role if var["shape"] else "other"  # iteration, learning_rate: scalars
            rows.append(
                {
                    "host": host,
                    "device": "/job:localhost/replica:0/task:0/device:CPU:0",
                    "name": var["name"],
                    "path": var["path"],
                    "role": kind,
                    "belongs_to": None,
                    "layer": None,
                    "model": model,
                    "dtype": "float32",
                    "shape": var["shape"],
                    "estimated_bytes": size,
                    "allocator": "mklcpu" if size >= RECORDED else None,
                }
            )
    return pd.DataFrame(rows)


def layers_of(
    prof: Profile,
    variables: pd.DataFrame | None = None,
    slabs: pd.DataFrame | None = None,
    live: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """``layers`` of ``prof`` as the breakdown groups it, with another inventory or slabs."""
    slabs = prof._xla_slabs if slabs is None else slabs
    live = prof.live_at_peak() if live is None else live
    ops = {str(o) for o in prof.allocations["op"].dropna()} | set(slabs["tf_op"].dropna())
    known = known_names(sorted(ops), variables, None)
    shapes = unique_weight_shapes(variables, known)
    rows = breakdown_table(prof.peak, live, slabs, known, shapes, variables)
    return layers_table(rows, prof.allocations, known, shapes)


def with_inventory(prof: Profile, frame: pd.DataFrame) -> pd.DataFrame:
    # Variables alive through the capture, as an inventory taken at start and stop says.
    return layers_of(prof, frame.assign(at_start=True, at_stop=True))


def assert_rows_sum_to_in_use(prof: Profile, table: pd.DataFrame) -> None:
    assert (table[KINDS].sum(axis=1) == table["live_at_peak_bytes"]).all()
    sums = table.groupby(["host", "allocator"], observed=True)["live_at_peak_bytes"].sum()
    for _, peak in prof.peak.iterrows():
        assert sums[(peak["host"], peak["allocator"])] == peak["in_use_bytes"]


@pytest.mark.parametrize("name", [*LAYER_FIXTURES, "layers_cnn_xla", *MEMORY_FIXTURES])
def test_every_byte_at_the_peak_is_in_exactly_one_row(name: str) -> None:
    prof = load(name)
    table = prof.layers()
    assert_rows_sum_to_in_use(prof, table)
    # Each live allocation is counted once; inventoried variables add tensors of
    # their own (at most one row each); allocations over the capture too.
    variables = table["live_tensors"].sum() - len(prof.live_at_peak())
    assert 0 <= variables <= len(prof.variables)
    assert table["allocated_bytes"].sum() == prof.allocations["allocated_bytes"].sum()
    assert not table.duplicated(["host", "allocator", "layer"]).any()


def test_the_cnn_names_its_layers_and_puts_the_largest_activation_first() -> None:
    entry = MANIFEST["fixtures"]["layers_cnn"]
    prof = load("layers_cnn")
    table = prof.layers()
    assert table["layer"].iloc[0] == entry["largest_activation_layer"] == "conv_a"
    conv_a = table.iloc[0]
    assert conv_a["activation_bytes"] >= entry["tensors"]["conv_a_activation"]["bytes"]
    layers = set(table["layer"]) - {OPTIMIZER_UNASSIGNED, NO_LAYER, BEFORE_CAPTURE}
    # Layer names as the user wrote them: dense_1 is the user's name, not a suffix.
    assert layers <= set(entry["layers"]) and {"conv_a", "conv_b", "dense_1"} <= layers
    before = prof.attribution["before_capture_bytes"].sum()
    assert table.set_index("layer").loc[BEFORE_CAPTURE, "live_at_peak_bytes"] == before


def test_an_inventory_gives_weights_and_about_twice_their_bytes_of_adam_state() -> None:
    prof = load("layers_cnn")
    frame = inventory("layers_cnn", prof.hosts[0])
    table = with_inventory(prof, frame)
    assert_rows_sum_to_in_use(prof, table)
    assert table["layer"].iloc[0] == "conv_a"  # still first with weights counted
    weighted = table[table["weight_bytes"] > 0].set_index("layer")
    assert "dense_1" in weighted.index
    kernel = MANIFEST["fixtures"]["layers_cnn"]["tensors"]["dense_1_kernel"]["bytes"]
    assert weighted.loc["dense_1", "weight_bytes"] == kernel
    for layer, row in weighted.iterrows():
        # Adam keeps two slots per weight (m and v): its state is twice the weights.
        assert row["optimizer_state_bytes"] == 2 * row["weight_bytes"], layer
        assert row["largest_bytes"] >= row["weight_bytes"] or row["largest_tensor"]
    # The named variables came out of the before-capture bytes, not on top of them.
    rest = table.set_index("layer")["live_at_peak_bytes"].get(BEFORE_CAPTURE, 0)
    named = frame.loc[frame["allocator"].notna(), "estimated_bytes"].sum()
    assert rest == prof.attribution["before_capture_bytes"].sum() - named


@pytest.mark.parametrize("name", LAYER_FIXTURES)
def test_an_inventory_without_model_names_still_finds_each_weights_layer(name: str) -> None:
    prof = load(name)
    frame = inventory(name, prof.hosts[0]).assign(model=None)  # paths only
    table = with_inventory(prof, frame)
    assert_rows_sum_to_in_use(prof, table)
    weighted = set(table.loc[table["weight_bytes"] > 0, "layer"])
    assert weighted and weighted <= set(MANIFEST["fixtures"][name]["layers"])


def test_belongs_to_ties_a_slot_to_its_weight_when_the_name_cannot() -> None:
    prof = load("layers_cnn")
    frame = inventory("layers_cnn", prof.hosts[0])
    slots = frame["role"] == "optimizer"
    frame.loc[slots, "path"] = [f"adam/slot_{i}" for i in range(int(slots.sum()))]
    untied = with_inventory(prof, frame).set_index("layer")
    assert (
        untied.loc[OPTIMIZER_UNASSIGNED, "optimizer_state_bytes"]
        >= 2 * untied.loc["dense_1", "weight_bytes"]
    )
    weights = frame.loc[frame["role"] == "weight", "path"].tolist()
    # Keras 3 names a slot <weight path with _ for />_<slot>: the owner is the longest match.
    frame.loc[slots, "belongs_to"] = [
        max((w for w in weights if name.startswith(w.replace("/", "_") + "_")), key=len)
        for name in frame.loc[slots, "name"]
    ]
    tied = with_inventory(prof, frame).set_index("layer")
    assert tied.loc["dense_1", "optimizer_state_bytes"] == 2 * tied.loc["dense_1", "weight_bytes"]


@pytest.mark.parametrize("name", LAYER_FIXTURES)
def test_functional_subclassed_and_sequential_models_give_their_layers_own_names(
    name: str,
) -> None:
    entry = MANIFEST["fixtures"][name]
    table = load(name).layers()
    layers = set(table["layer"]) - {OPTIMIZER_UNASSIGNED, NO_LAYER, BEFORE_CAPTURE}
    assert layers <= set(entry["layers"])
    captured = table[~table["layer"].isin([OPTIMIZER_UNASSIGNED, NO_LAYER, BEFORE_CAPTURE])]
    assert (captured["allocated_bytes"] > 0).all()
    expected = {
        "layers_cnn": {"conv_a", "conv_b", "dense_1"},
        "layers_functional": {"encoder", "shared", "block"},
        "layers_sequential": {"dense", "dense_1"},
    }[name]
    assert expected <= layers


# Real op names (from the fixtures) and where they go; KnownNames() means no inventory.
@pytest.mark.parametrize(
    ("op", "layer", "kind"),
    [
        ("mycnn_1/conv_a_1/Relu", "conv_a", ACTIVATION),
        ("gradient_tape/mycnn_1/dense_1_1/MatMul/MatMul_1", "dense_1", GRADIENT),
        ("sequential_1/dense_1/Relu", "dense", ACTIVATION),  # layer 'dense', trace suffix _1
        ("gradient_tape/sequential_1/dense_1_2/MatMul/MatMul", "dense_1", GRADIENT),
        ("net_1/shared_3/Relu", "shared", ACTIVATION),  # a layer called twice
        ("net_1/block_1/block_dense_1/Relu", "block", ACTIVATION),  # a nested model
        ("StatefulPartitionedCall/gradient_tape/mlp_1/hidden_1/MatMul/MatMul", "hidden", GRADIENT),
        ("adam/Sqrt_9", OPTIMIZER_UNASSIGNED, OPTIMIZER_UPDATE),
        ("adam/dense_kernel_momentum/Initializer/zeros", OPTIMIZER_UNASSIGNED, OPTIMIZER_STATE),
        ("augment/resize/ResizeBilinear", NO_LAYER, OTHER),  # a tf.name_scope, not a layer
        ("Fill", NO_LAYER, OTHER),
        ("compile_loss/sparse_categorical_crossentropy/Mul", NO_LAYER, OTHER),
        ("replica_1/mycnn_1/conv_a_1/Relu", "conv_a", ACTIVATION),
        ("gradient_tape/replica_2/mycnn_1/conv_b_1/Conv2DBackpropInput", "conv_b", GRADIENT),
        # mixed_float16: the loss-scaling optimizer updates inside a cond's branch
        (
            "StatefulPartitionedCall/cond/then/_34/cond/adam/Mul_19",
            OPTIMIZER_UNASSIGNED,
            OPTIMIZER_UPDATE,
        ),
        ("cond/then/_3/net_1/dense_1/Relu", "dense", ACTIVATION),
        ("cond/then/_3/Relu", NO_LAYER, OTHER),  # a branch's own op: no scope left
        # inside a layer, a loop's body is the layer's
        ("sequential_1/lstm_1/while/body/_1/sequential_1/lstm_1/while/MatMul", "lstm", ACTIVATION),
    ],
)
def test_ops_are_placed_under_their_layer(op: str, layer: str, kind: str) -> None:
    placed = place_op(op, KnownNames())
    assert (placed.layer, placed.kind) == (layer, kind)


def test_known_names_decide_between_a_suffix_and_a_users_name() -> None:
    # A layer the user called 'block_2' reached in a trace without a suffix.
    known = KnownNames(layers={"block_2", "head"}, models={"net"})
    assert place_op("net_1/block_2/Relu", known).layer == "block_2"
    assert place_op("net_1/head_4/MatMul", known).layer == "head"
    # A model named like a distribution prefix is not folded when the inventory names it.
    named = KnownNames(layers={"shared"}, models={"tower"})
    assert place_op("tower_1/shared_1/Relu", named).layer == "shared"


# A hand-built two-replica capture: replica 0 has no prefix, replica 1 has replica_1/.
REPLICA_EVENTS = [
    alloc(10, 1, 4096, op="mycnn_1/conv_a_1/Relu"),
    alloc(20, 2, 2048, op="replica_1/mycnn_1/conv_a_1/Relu"),
    alloc(30, 3, 1024, op="replica_1/gradient_tape/mycnn_1/conv_b_1/Conv2DBackpropInput"),
    alloc(40, 4, 512, op="adam/Mul_3"),
    alloc(50, 5, 256, op=None, shape=None, dtype=None, region=None),
    free(60, 4, 512),
]


def test_replicas_fold_into_one_layer_row_with_a_per_replica_breakdown() -> None:
    prof = profile_of(REPLICA_EVENTS)
    folded = prof.layers().set_index("layer")
    assert folded.loc["conv_a", "activation_bytes"] == 4096 + 2048
    assert folded.loc["conv_b", "gradient_bytes"] == 1024
    assert folded.loc[NO_LAYER, "live_at_peak_bytes"] == 256
    assert folded.loc[OPTIMIZER_UNASSIGNED, "optimizer_update_bytes"] == 512
    assert folded.loc[OPTIMIZER_UNASSIGNED, "allocated_bytes"] == 512
    split = prof.layers(by_replica=True)
    conv_a = split[split["layer"] == "conv_a"].set_index("replica")["activation_bytes"]
    assert conv_a.to_dict() == {0: 4096, 1: 2048}
    assert_rows_sum_to_in_use(prof, split)
    assert (split["allocator"] == GPU).all()


def test_a_capture_without_memory_events_has_an_empty_layers_table() -> None:
    table = load("no_memory").layers()
    assert table.empty and "activation_bytes" in table.columns


def test_expanded_xla_rows_are_placed_by_their_tf_op_names() -> None:
    """Issue 13's ``live_at_peak(expand_xla=True)`` contract: a slab becomes one row per
    HLO buffer (``op`` = the buffer's TF op, as the HLO metadata of a jit-compiled
    Keras 3 step names them) plus a slack row, together the slab's bytes."""
    prof = load("layers_cnn")
    live = prof.live_at_peak().copy()
    row, slab = live.index[0], live.iloc[0]
    live.loc[row, ["shape", "estimated_bytes"]] = pd.NA  # a slab has no shape of its own
    size = int(slab["allocated_bytes"])
    ops = [
        "mycnn_1/conv_a_1/convolution",
        "gradient_tape/mycnn_1/conv_a_1/BiasAdd/BiasAddGrad",
        "adam/Sqrt_11",
    ]
    sizes = [size // 2, size // 4, size // 8]
    head = (row, slab["host"], "p", 0)
    buffers = [
        (*head, i, True, n, f"fusion.{i}", op, None, "float32", None, n)
        for i, (op, n) in enumerate(zip(ops, sizes, strict=True))
    ]
    slack = (*head, None, False, size - sum(sizes), *[None] * 6)
    table = layers_of(prof, slabs=slab_frame([*buffers, slack]), live=live)
    assert_rows_sum_to_in_use(prof, table)
    by_layer = table.set_index("layer")
    assert by_layer.loc["conv_a", "gradient_bytes"] >= size // 4
    assert by_layer.loc[OPTIMIZER_UNASSIGNED, "optimizer_update_bytes"] == size // 8
    assert table["layer"].iloc[0] == "conv_a"


def test_an_optimizer_counter_recorded_by_the_allocator_is_not_a_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a GPU every variable is recorded, the 8-byte adam/iteration too.
    monkeypatch.setattr("traceparse.tables.variables.CPU_POOL_BYTES", 0)
    prof = load("layers_cnn")
    frame = inventory("layers_cnn", prof.hosts[0])
    frame.loc[frame["role"] == "other", "allocator"] = "mklcpu"
    # Leave a slot out so that the before-capture bytes have room for the counters.
    frame = frame[~frame["path"].str.endswith("dense_1_kernel_velocity")]
    table = with_inventory(prof, frame)
    assert "adam" not in set(table["layer"])
    counters = table.set_index("layer").loc[OPTIMIZER_UNASSIGNED]
    assert counters["other_bytes"] == 8  # iteration and learning_rate, 4 bytes each here
    assert_rows_sum_to_in_use(prof, table)


@pytest.mark.parametrize("name", ["keras_inventory", "keras_memory_callback"])
def test_a_real_inventory_gives_each_layer_its_weights_and_twice_their_bytes_of_adam_state(
    name: str,
) -> None:
    """The inventory written at capture time (not a hand-built frame) places each
    weight and its Adam slots under the weight's layer; Adam's update temporaries
    of the weight's shape are that layer's optimizer bytes too (issue 36)."""
    prof = load(name)
    assert not prof.variables.empty
    table = prof.layers().set_index("layer")
    rows = prof.breakdown
    for layer in ("hidden", "bottleneck"):  # the 1 MiB kernels; the rest is under 256 KiB
        row = table.loc[layer]
        assert row["weight_bytes"] == 1024 * 1024
        mine = rows[rows["layer"] == layer]
        slots = mine[mine["role"] == OPTIMIZER_STATE]
        assert slots["variable"].notna().all()
        assert slots["bytes"].sum() == 2 * row["weight_bytes"] == row["optimizer_state_bytes"]
        temporaries = mine[mine["role"] == OPTIMIZER_UPDATE]
        assert len(temporaries) and temporaries["variable"].isna().all()
        assert temporaries["op"].astype(str).str.contains("(?:^|/)adam/").all()
        assert row["optimizer_update_bytes"] == temporaries["bytes"].sum()
    assert_rows_sum_to_in_use(prof, prof.layers())


def test_a_jit_compiled_model_names_its_layers_through_its_xla_buffers() -> None:
    """xla_keras is compiled with jit_compile=True: at the peak one slab holds the
    step's buffers, and its HLO buffers' TF ops place them under the model's layers
    (conv2 holds the largest activation, then conv1, then pool). The max-pooling
    gradient's int32 index buffers carry no TF op: their reader, MaxPoolGrad, puts
    them under pool, which then holds the most."""
    prof = load("xla_keras")
    table = prof.layers()
    layers = [str(name) for name in table["layer"] if not str(name).startswith("(")]
    assert layers[:2] == ["pool", "conv2"]
    activations = table.set_index("layer").loc[layers, "activation_bytes"]
    assert activations[activations > 0].sort_values(ascending=False).index.tolist() == [
        "conv2",
        "conv1",
        "pool",
    ]
    assert_rows_sum_to_in_use(prof, table)


def _layer_order(table: pd.DataFrame) -> list[str]:
    return [str(name) for name in table["layer"] if not str(name).startswith("(")]


def test_the_jit_compiled_twin_orders_its_layers_as_the_eager_model() -> None:
    """layers_cnn_xla is layers_cnn compiled with jit_compile=True: at the peak one
    XLA slab holds the step's values, and its HLO buffers' TF ops (a transposed
    copy of conv_a's softplus output included) give the same order, conv_a first."""
    entry = MANIFEST["fixtures"]["layers_cnn_xla"]
    eager, xla = load("layers_cnn"), load("layers_cnn_xla")
    table = xla.layers()
    assert_rows_sum_to_in_use(xla, table)
    assert _layer_order(table) == _layer_order(eager.layers()) == ["conv_a", "conv_b", "dense_1"]
    assert table["layer"].iloc[0] == entry["largest_activation_layer"]
    conv_a = table.set_index("layer").loc["conv_a"]
    # Its convolution output and softplus output, each a [32,128,128,64] float32 tensor.
    assert conv_a["activation_bytes"] >= 2 * entry["tensors"]["conv_a_activation"]["bytes"]
    # The slab's bytes reach the layers through its buffers, not as one slab row.
    assert xla.live_at_peak()["xla_program"].notna().any()


def test_the_jit_compiled_twins_inventory_gives_twice_the_weights_of_adam_state() -> None:
    """The twin was captured with traceparse.profile(): its inventory names the
    weights and Adam slots made before the capture (dense_1's kernel is the only
    weight the CPU allocator records; the rest are under 256 KiB)."""
    prof = load("layers_cnn_xla")
    assert not prof.variables.empty
    table = prof.layers()
    weighted = table[table["weight_bytes"] > 0].set_index("layer")
    kernel = MANIFEST["fixtures"]["layers_cnn_xla"]["tensors"]["dense_1_kernel"]["bytes"]
    assert weighted.loc["dense_1", "weight_bytes"] >= kernel
    for layer, row in weighted.iterrows():
        ratio = row["optimizer_state_bytes"] / row["weight_bytes"]
        assert ratio == 2, (layer, ratio)
    assert BEFORE_CAPTURE not in set(table["layer"])  # the inventory names every byte
