"""The issue-47 mechanisms one at a time: Keras' auto-numbered scopes across runs,
hosts across machines, Winograd workspaces, MirroredStrategy's global batch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.predict.fit import match_keys, program_names, same_host
from traceparse.analysis.predict.predictor import replicas
from traceparse.analysis.predict.workspace import feature_maps, filter_shapes, winograd_fixed
from traceparse.errors import UsageError


def test_two_runs_of_one_model_name_their_ops_alike() -> None:
    """The second model a notebook builds numbers the same layers higher."""
    first = pd.Series(["m/conv2d/Relu", "m/conv2d_1/Relu", "m/conv2d_1/Relu_1", None])
    second = pd.Series(["m_5/conv2d_13/Relu", "m_5/conv2d_14/Relu", "m_5/conv2d_14/Relu_1", None])
    assert program_names(first).tolist() == program_names(second).tolist()
    assert program_names(first).tolist() == [
        "m/conv2d/Relu",
        "m/conv2d_1/Relu",
        "m/conv2d_1/Relu_1",
        "",
    ]


def test_renumbering_keeps_distinct_layers_distinct() -> None:
    names = pd.Series(["net_2/dense_7/MatMul", "net_2/dense_9/MatMul", "net_2/dense_8/MatMul"])
    renamed = program_names(names)
    assert renamed.nunique() == 3
    assert renamed.tolist() == ["net/dense/MatMul", "net/dense_2/MatMul", "net/dense_1/MatMul"]


def test_one_host_each_side_is_the_same_machine_role() -> None:
    mine = pd.Series(["vm-a", "vm-a"])
    assert same_host(mine, pd.Series(["vm-b"] * 3)).tolist() == ["vm-a"] * 3
    several = pd.Series(["vm-b", "vm-c"])
    assert same_host(pd.Series(["vm-a", "vm-d"]), several).tolist() == ["vm-b", "vm-c"]


def _winograd(batch: int, r: int, m: int, c_in: int, c_out: int, side: int) -> int:
    """A non-fused Winograd workspace as cuDNN sizes it (predict_workspace)."""
    a = m + r - 1
    tiles = (-(-side // m)) ** 2
    return 4 * a * a * (c_in * c_out + batch * tiles * (c_in + c_out))


@pytest.mark.parametrize(
    ("r", "m", "c_in", "c_out", "side"),
    [(3, 4, 384, 384, 14), (3, 4, 16, 16, 8), (5, 9, 96, 256, 30)],
)
def test_a_winograd_workspace_keeps_its_filter_transform(
    r: int, m: int, c_in: int, c_out: int, side: int
) -> None:
    filters = {(r, c_in, c_out), (11, 1, 96)}
    maps = {(side, c_in), (side, c_out), (62, 96)}
    size = _winograd(64, r, m, c_in, c_out, side)
    fixed = winograd_fixed(size, 64, filters, maps)
    assert fixed == 4 * (m + r - 1) ** 2 * c_in * c_out
    # Its rest grows per image: the workspace at 16 is the formula's.
    assert fixed + (size - fixed) * 16 // 64 == _winograd(16, r, m, c_in, c_out, side)


def test_a_workspace_of_no_winograd_form_is_not_split() -> None:
    filters = {(3, 384, 384)}
    assert winograd_fixed(_winograd(64, 3, 4, 384, 384, 14) + 256, 64, filters, {(14, 384)}) is None
    # The right size over feature maps of other sides: not this algorithm's tiles.
    assert winograd_fixed(_winograd(64, 3, 4, 384, 384, 14), 64, filters, {(30, 384)}) is None


def test_filters_and_feature_maps_read_off_shapes() -> None:
    shapes = ["[3,3,384,256]", "[256,384,3,3]", "[64,384,14,14]", "[64,30,30,96]", "[7]"]
    ops = ["g/c/Conv2DBackpropFilter", "g/c/Conv2DBackpropFilter", "c/Relu", "p/MaxPool", "x"]
    assert filter_shapes(shapes, ops) == {(3, 384, 256)}
    assert feature_maps(shapes, 64) == {(14, 384), (30, 96)}


def test_a_real_winograd_workspace_shrinks_less_than_in_proportion() -> None:
    """On the AlexNet V100 capture at 64, the 3x3 convolutions' workspaces keep their
    filter transform at 16 (the capture at 16 shows the same form)."""
    profile = traceparse.load(next((FIXTURES / "gpu_alexnet_v100_64").rglob("*.xplane.pb")))
    breakdown = profile.predict(16).attrs["breakdown"]
    assert "scratch: Winograd workspace, filter transform fixed" in set(breakdown["basis"])


@pytest.mark.parametrize("name", ["keras2_mirrored", "keras2_tf216_mirrored"])
def test_a_mirrored_capture_speaks_in_the_global_batch(name: str) -> None:
    """Two replicas (``replica_1/``) each hold half the global batch: the batch read
    is the global one, and predicting twice it doubles each replica's tensors."""
    profile = traceparse.load(FIXTURES / name)
    assert replicas(profile.allocations) == 2
    at = profile.predict(16)
    assert int(at["found_batch"].iloc[0]) == 16
    assert int(at["predicted_peak_bytes"].iloc[0]) == int(at["captured_peak_bytes"].iloc[0])
    twice = profile.predict(32)
    grown = twice.attrs["breakdown"]
    assert (grown["bytes"] >= grown["captured_bytes"]).all()
    assert int(twice["predicted_peak_bytes"].iloc[0]) > int(at["predicted_peak_bytes"].iloc[0])


def test_one_replica_is_no_replica_prefix() -> None:
    frame = pd.DataFrame({"op": ["model/dense/MatMul", None, "replica_1/model/dense/MatMul"]})
    assert replicas(frame.iloc[:2]) == 1
    assert replicas(frame) == 2


def test_match_keys_renumber_across_runs() -> None:
    def frame(ops: list[str], host: str) -> pd.DataFrame:
        return pd.DataFrame(
            {"host": host, "allocator": "GPU_0_bfc", "step": np.ones(len(ops)), "op": ops}
        )

    a = match_keys(frame(["n_2/conv2d_4/Relu", "n_2/conv2d_5/Relu"], "x"))
    b = match_keys(frame(["n_5/conv2d_13/Relu", "n_5/conv2d_14/Relu"], "x"))
    assert a["op"].tolist() == b["op"].tolist()


def test_a_global_batch_the_replicas_cannot_split_is_refused() -> None:
    profile = traceparse.load(FIXTURES / "keras2_mirrored")
    with pytest.raises(UsageError, match="2 replicas"):
        profile.predict(32, from_batch=15)


def test_a_multiple_of_the_batch_is_flattened_only_when_its_elements_per_example_are() -> None:
    # At batch 64 with [64,4] labels: the OIHW copy of a [5,5,96,256] kernel
    # ([256,96,5,5]: 4 x 64 leading, 9600 elements per example) and a per-channel
    # vector ([384]: 6 per example) are no reshape of a batch-led tensor; a
    # Flatten of [64,6,6,256] ([64 x 9216]) and a fold of [64,6,6,256] into
    # [384,6,256] are.
    from traceparse.analysis.predict.batch import FLATTENED, NO_BATCH_DIM, sizing

    shapes = ["[64,4]", "[64,6,6,256]", "[256,96,5,5]", "[384]", "[589824]", "[384,6,256]"]
    frame = pd.DataFrame({"shape": shapes, "op": ["labels", "pool", "t", "bn", "flat", "fold"]})
    elements = np.array([256, 589824, 614400, 384, 589824, 589824], dtype=np.float64)
    s = sizing(frame, 64, {(5, 5, 96, 256)}, elements * 4)
    assert list(s.basis[2:]) == [NO_BATCH_DIM, NO_BATCH_DIM, FLATTENED, FLATTENED]
    point, _, _ = s.at(128)
    assert point[2] == 4 * elements[2] and point[3] == 4 * elements[3]  # kept
    assert point[4] == 2 * 4 * elements[4]  # grows


def reference_could_skip(pr: Any, key: tuple) -> np.ndarray:
    """``LowBound.could_skip`` one allocation at a time: a workspace, or an output
    with an input of the same request freed from its allocation until the next
    allocation by another op."""
    prof_t, a, ends = pr.base.timeline, pr.base.allocations, pr.base.ends
    ops, kinds = prof_t["op"].astype(object).tolist(), prof_t["kind"].astype(object).tolist()
    allocs = [int(r) for r in pr.rows[key] if kinds[int(r)] == "allocation"]
    mine = pr._mine(key)
    out = np.zeros(len(a), dtype=bool)
    for i in np.flatnonzero(mine):
        if str(pr.sizing.basis[i]).startswith("scratch"):
            out[i] = True
            continue
        start = int(a["alloc_event"].iloc[i])
        own = ops[start]
        later = [r for r in allocs if r > start and ops[r] != own]
        run_end = later[0] if later else np.iinfo(np.int64).max
        out[i] = any(
            j != i
            and pr.requested[j] == pr.requested[i]
            and ends[j] != -1
            and start <= ends[j] < run_end
            for j in np.flatnonzero(mine)
        )
    return out


@pytest.mark.parametrize(
    ("name", "target"),
    [("gpu_chess_64", 32), ("gpu_alexnet_v100_128", 64), ("gpu_alexnet_v100_64", 128)],
)
def test_the_low_bound_leaves_out_what_another_run_could_spare(name: str, target: int) -> None:
    # Every moment, brute force: its bytes less the largest growing allocation live
    # then that the op at that moment made (forwarding, another algorithm's
    # workspace) or that is freed before another op allocates (a free that may come
    # sooner). The low bound is the most of those (or the floor), never less; a
    # buffer held across the step (an activation kept for its gradient) is never
    # left out.
    from traceparse.analysis.predict.replay import live_at
    from traceparse.core.profile import predictor_of

    path = sorted((FIXTURES / name).rglob("*.xplane.pb"))[0]
    prof = traceparse.load(path)
    pr = predictor_of(prof, target)
    _, sizes, _ = pr.sizes(target)
    low = pr._replayed(sizes)
    grows = (pr.sizing.per_example != 0) | (pr.sizing.alt_per_example != 0)
    timeline, a, ends = prof.timeline, prof.allocations, prof._ends
    ops, kinds = timeline["op"].astype(object).tolist(), timeline["kind"].astype(object).tolist()
    made_by = a["op"].astype(object).to_numpy()
    for key in pr.rows:
        mine = pr._mine(key) & grows
        events = [int(r) for r in pr.rows[key]]
        skip = reference_could_skip(pr, key)
        assert np.array_equal(skip, pr.low_bound.could_skip(key)), key
        each = []
        for r, v in zip(events, low.bytes[key], strict=True):
            later = [e for e in events if e > r and kinds[e] == "allocation" and ops[e] != ops[r]]
            next_op = later[0] if later else np.iinfo(np.int64).max
            spare = ((made_by == ops[r]) & skip) | ((ends != -1) & (ends < next_op))
            each.append(float(v) - max(sizes[mine & spare & live_at(a, ends, r)], default=0.0))
        lo, _ = pr.extremes(target)[key]
        assert lo == max(round(max(each)), pr.low_bound.floor(key)), key
        event, top = low.peak(key)
        at_peak = max(sizes[mine & live_at(a, ends, event)], default=0.0)
        assert lo >= top - at_peak
    if name == "gpu_alexnet_v100_64":
        # conv2d_12's output [64,96,62,62] (180 MiB at 128) is live from the forward
        # pass to its gradient: the low keeps it.
        key = next(k for k in pr.rows if k[1] == "GPU_0_bfc")
        lo, _ = pr.extremes(target)[key]
        kept = a["op"].astype(str).str.endswith("conv2d_12/Conv2D").to_numpy().copy()
        kept &= pr._mine(key) & grows
        assert kept.any() and lo > round(low.peak(key)[1] - sizes[kept].max())


@pytest.mark.parametrize(
    ("name", "prefetch"), [("whatif_cnn_bf16", {2, 3, 4}), ("sources_fit", {1, 3, 4})]
)
def test_the_low_bound_weighs_only_the_steps_that_ran_the_step_function(
    name: str, prefetch: set[int]
) -> None:
    # Keras' data adapter gathers each batch (GatherV2) on tf.data's prefetch, under
    # that batch's step number, while the previous step runs: those "steps" hold one
    # allocation each and are no step of the program, so the lowest step is not one
    # of them (it was: the low fell to what was held before the capture).
    from traceparse.analysis.predict import Predictor

    prof = traceparse.load(FIXTURES / name)
    pr = Predictor(prof._prediction_input)
    (key,) = pr.rows
    a = prof.allocations
    steps = set(a["step"].dropna().astype(int))
    program = set(pr.low_bound.program_steps(key).astype(int))
    assert program == steps - prefetch
    assert set(a.loc[a["step"].isin(list(prefetch)), "op_type"]) == {"GatherV2"}
    _, sizes, _ = pr.sizes(pr.batch)
    low = pr._replayed(sizes)
    timeline_steps = prof.timeline["step"].to_numpy(dtype=np.float64, na_value=np.nan)
    event, value = pr.low_bound.lowest_program_step(key, low, timeline_steps)
    assert int(timeline_steps[event]) in program
    # Over every step, a prefetch "step" peaks lowest, under the program's steps.
    every, lowest = low.lowest_step_peak(key, timeline_steps)
    assert int(timeline_steps[every]) in prefetch and lowest < value
