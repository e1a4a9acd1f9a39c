"""The what-if rules: how each change resizes the capture's allocations and what
it adds for the whole run (``Resizing``, ``resizing``). Each rule names the
mechanism it models and a source pointer in its docstring (docs/whatif.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceparse.analysis.naming import (
    ACTIVATION,
    GRADIENT,
    OPTIMIZER_STATE,
    OPTIMIZER_UPDATE,
    OTHER,
    UNKNOWN,
    WEIGHT,
)
from traceparse.analysis.naming.optimizers import SLOTS
from traceparse.analysis.predict import Predictor
from traceparse.analysis.predict.batch import dims
from traceparse.analysis.whatif.change import Change
from traceparse.analysis.whatif.facts import (
    HALF,
    Facts,
    Key,
    factorized,
    facts_of,
    in_layers,
    layer_names,
    pattern_rows,
)
from traceparse.errors import UsageError

# Adafactor's slots per parameter: its full-size velocity, and the factored rows
# and columns of a matrix (r + c of r x c elements: at most 5% more for matrices
# whose dimensions are both 40 or more; a vector's r and c are scalars).
ADAFACTOR_SLOTS = (1.0, 1.0, 1.05)

ATTENTION_LAYER = re.compile(r"attention", re.IGNORECASE)

# ``MultiHeadAttention``'s own Softmax/Dropout sublayers: the path without the
# float32 dot-product attention (``attention_scores``).
SUBLAYER_PATH = re.compile(r"/(softmax|dropout)(_\d+)?/")


@dataclass
class Resizing:
    """Per allocation: request factors (point, low, high); per allocator: bytes added
    for the whole step (point, low, high), and the point's of them by role (what
    the prediction's parts name them); and what each rule assumed."""

    point: np.ndarray
    low: np.ndarray
    high: np.ndarray
    extra: dict[Key, list[float]] = field(default_factory=dict)
    by_role: dict[Key, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Bytes added only while a step's backward pass runs (the point's; the high
    # bound has them in ``extra`` for every event).
    # (first row, last row, bytes) per recomputed layer and step.
    backward: dict[Key, np.ndarray] = field(default_factory=dict)
    # Per compiled program's slab (its allocation row): each HLO buffer's point
    # factor (``slab_factors``), for the parts at the peak.
    slabs: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def identity(cls, n: int) -> Resizing:
        return cls(np.ones(n), np.ones(n), np.ones(n))

    def scale(self, mask: np.ndarray, point: float, low: float, high: float) -> None:
        self.point[mask] *= point
        self.low[mask] *= low
        self.high[mask] *= high

    def add(self, key: Key, point: float, low: float, high: float, role: str = OTHER) -> None:
        found = self.extra.setdefault(key, [0.0, 0.0, 0.0])
        found[0] += point
        found[1] += low
        found[2] += high
        roles = self.by_role.setdefault(key, {})
        roles[role] = roles.get(role, 0.0) + point


def optimizer_change(facts: Facts, target: str, out: Resizing) -> None:
    """Another optimizer: its slots (``SLOTS``) replace the captured one's, for every
    parameter, for the whole run (Keras creates them in ``optimizer.build``, before
    the first step, keras/src/optimizers/base_optimizer.py ``add_variable``); its
    update's elementwise temporaries (the allocations of the optimizer's scope)
    scale with the number of temporaries the update formula makes. The captured
    optimizer is read off the ops' scopes; none there reads as plain SGD (its
    update is one in-place ``assign_sub``), with Adam's slots as the high reading."""
    source = facts.optimizer
    if source is None:
        out.notes.append("optimizer: none named in the capture; read as SGD (bounds up to Adam)")
    old_slots, old_temps = SLOTS.get(source or "sgd", (0.0, 1.0))
    new_slots, new_temps = SLOTS[target]
    unknown_old = source is None
    lo_s, pt_s, hi_s = ADAFACTOR_SLOTS if target == "adafactor" else (new_slots,) * 3
    old_hi = 2.0 if unknown_old else old_slots
    # Copy-on-write: an assign to a variable whose buffer is still shared makes a
    # new buffer (tensorflow/core/kernels/training_op_helpers.h,
    # ``PrepareToUpdateVariable``: a copy unless the reference count is one). The
    # weight's ``assign_sub`` is such (the tape still holds the forward pass's
    # read of the kernel), the same under every optimizer: kept. Any other
    # optimizer-state allocation is a slot's buffer (a copy, or the slot made in
    # the capture): one per slot, scaled with the slot count.
    state = (facts.roles == OPTIMIZER_STATE) & (facts.op_types != "AssignSubVariableOp")
    per_slot = pt_s / old_slots if old_slots else 1.0
    out.scale(
        state,
        per_slot,
        min(lo_s / max(old_hi, 1.0), per_slot),
        max(hi_s / max(old_slots, 1.0), per_slot),
    )
    for k in facts.keys:
        read, high = facts.params[k]
        # The slots built before the capture live for the whole run, updated in
        # place: a constant. Slots fewer than captured can only remove what was
        # held before the capture (the slots' share of it); slots made inside the
        # capture are its allocations, resized above. A slot's chunk may be up to
        # twice its bytes (the BFC allocator hands out whole a free chunk under
        # twice the rounded request, tensorflow/core/common_runtime/
        # bfc_allocator.cc ``FindChunkPtr``; which one a run finds depends on
        # its history): the bounds add or remove up to that.
        point = read * (pt_s - old_slots)
        ends = [
            p * (s - o)
            for p in (read, high, 2.0 * read)
            for s in (lo_s, hi_s)
            for o in (old_slots, old_hi)
        ]
        floor = -facts.before[k] * old_hi / (1.0 + old_hi)
        point = max(point, floor)
        ends = [max(e, floor) for e in ends]
        out.add(k, point, min([*ends, point]), max([*ends, point]), OPTIMIZER_STATE)
    ratio = new_temps / old_temps
    update = facts.roles == OPTIMIZER_UPDATE
    value = update_values(facts)
    out.scale(update & ~value, ratio, min(ratio, 1.0), max(ratio, 1.0))
    # The value handed to the variable's assign is one full-size tensor under every
    # optimizer that computes it (``update_values``); momentum SGD hands its slot.
    keep = 0.0 if target == "momentum" else 1.0
    keep = ratio if source == "momentum" or unknown_old else keep
    out.scale(value, keep, min(ratio, keep, 1.0), max(ratio, keep, 1.0))
    # Copy-on-write of the weight (kept above at the point): whether the update runs
    # while the backward pass still holds the forward read of the kernel (a copy)
    # or after it (in place) is the executor's order of ready ops, which the
    # update's inputs change: low none of the captured copies, high a copy of
    # every parameter more.
    renewal = (facts.roles == OPTIMIZER_STATE) & (facts.op_types == "AssignSubVariableOp")
    out.scale(renewal, 1.0, 0.0, 1.0)
    for k in facts.keys if not facts.compiled else ():
        read, high = facts.params[k]
        out.add(k, 0.0, 0.0, max(read, high))
    out.notes.append(
        f"optimizer: {source or 'sgd (read)'} -> {target}: {pt_s:g} slot(s) per parameter "
        f"instead of {old_slots:g}, update temporaries x{ratio:.2f}"
    )


def update_values(facts: Facts) -> np.ndarray:
    """Per allocation: whether it is an update's value handed to its variable's
    assign: an optimizer-update allocation of the weight's shape live when, in the
    same step, the variable's copy-on-write buffer (``AssignSubVariableOp``'s
    allocation, ``PrepareToUpdateVariable`` in tensorflow/core/kernels/
    training_op_helpers.h) is made, the latest such. Keras 3's optimizers end
    ``update_step`` with ``assign_sub(variable, value)`` (keras/src/optimizers/
    adam.py, sgd.py, adafactor.py, ...): one full-size value whatever the formula,
    where plain SGD's ``gradient * lr`` reuses the gradient's buffer (an
    elementwise kernel forwards an input it holds the only reference to,
    tensorflow/core/kernels/cwise_ops_common.h ``forward_input_or_allocate_output``).
    Momentum SGD hands its slot (``assign_add(variable, m)``)."""
    found = np.zeros(len(facts.roles), dtype=bool)
    anchor = (facts.roles == OPTIMIZER_STATE) & (facts.op_types == "AssignSubVariableOp")
    update = (facts.roles == OPTIMIZER_UPDATE) & facts.weight_shaped
    if facts.ends is None or not anchor.any() or not update.any():
        return found
    steps = np.nan_to_num(facts.steps, nan=-1.0)
    shapes = factorized(facts.shapes)[0]  # codes: no string per allocation
    a = pd.DataFrame(
        {"step": steps[anchor], "shape": shapes[anchor], "at": facts.alloc_events[anchor]}
    )
    u = pd.DataFrame(
        {
            "step": steps[update],
            "shape": shapes[update],
            "start": facts.alloc_events[update],
            "end": facts.ends[update],
            "row": np.flatnonzero(update),
        }
    )
    both = a.merge(u, on=["step", "shape"])
    both = both[(both["start"] < both["at"]) & (both["end"] >= both["at"])]
    if both.empty:
        return found
    latest = both.sort_values("start").groupby(["step", "shape", "at"])["row"].last()
    found[latest.to_numpy(dtype=np.int64)] = True
    return found


def attention_scores(facts: Facts) -> np.ndarray:
    """Per allocation: an attention layer's scores or probabilities (or their
    gradients) that Keras 3 computes in float32 under a mixed policy.

    ``MultiHeadAttention`` without dropout on the scores and without returning
    them calls ``ops.dot_product_attention`` (keras/src/layers/attention/
    multi_head_attention.py ``_compute_attention``), whose TensorFlow version
    casts the logits to float32 (``result_type(query.dtype, "float32")``),
    takes the softmax in float32 and casts the probabilities back to the
    compute dtype for the einsum with the values (keras/src/backend/tensorflow/
    nn.py ``_dot_product_attention_xla``): the [batch, heads, query, key]
    tensors stay float32 and gain a 16-bit copy. They are read as the
    floating rank-4 tensors of an attention layer's largest rank-4 size (the scores
    outgrow the per-head projections where the key length exceeds the head
    size; a tie is left out). A layer whose ops have a ``softmax`` or
    ``dropout`` scope took the other path (its ``Softmax`` and ``Dropout``
    sublayers, in the compute dtype): not these."""
    found = np.zeros(len(facts.layers), dtype=bool)
    floating = (facts.dtypes == "float32") | np.isin(facts.dtypes, HALF)
    attention = pattern_rows(ATTENTION_LAYER, facts.layers) & floating
    if not attention.any():
        return found
    idx = np.flatnonzero(attention)
    shapes = [dims(str(s)) for s in facts.shapes[idx]]
    frame = pd.DataFrame(
        {
            "layer": facts.layers[idx].astype(str),
            "row": idx,
            "rank": [len(d) if d else 0 for d in shapes],
            "size": [int(np.prod(d)) if d else 0 for d in shapes],
            "sublayer": [bool(SUBLAYER_PATH.search(str(o))) for o in facts.ops[idx]],
        }
    )
    other_path = frame.groupby("layer")["sublayer"].transform("any")
    four = frame[(frame["rank"] == 4) & ~other_path]
    for _, mine in four.groupby("layer"):
        sizes = sorted(mine["size"].unique())
        if len(sizes) > 1:
            found[mine.loc[mine["size"] == sizes[-1], "row"].to_numpy(dtype=np.int64)] = True
    return found


def conv_workspace(facts: Facts, out: Resizing, high: float) -> None:
    """A convolution's cuDNN workspace under another precision: TF autotunes each
    convolution once per problem and caches the algorithm it picked under the
    convolution's parameters, its data type among them (``ConvParameters``,
    tensorflow/core/kernels/conv_ops_gpu.h), so a 16-bit convolution is tuned
    afresh among cuDNN's half-precision algorithms (Tensor Core implicit GEMMs,
    which need little or no workspace, beside FFT and Winograd ones) and a
    float32 one among float32's. Which it picks is measured on the GPU, so the
    workspace is unknown: point as captured, low none, high ``high`` times it
    (2 to float32: transformed tiles stored in the data's type double)."""
    if facts.conv_workspaces is None or not facts.conv_workspaces.any():
        return
    out.scale(facts.conv_workspaces, 1.0, 0.0, high)
    out.notes.append(
        "precision: convolution workspaces (cuDNN's) kept as captured: the autotuner picks "
        f"an algorithm afresh for the new dtype (bounds: none to {high:g}x)"
    )


def precision_factors(facts: Facts, target: str, out: Resizing) -> None:
    """A Keras mixed-precision policy (keras/src/dtype_policies/dtype_policy.py;
    https://keras.io/api/mixed_precision/policy/), or back to float32.

    To mixed: layers compute in the 2-byte dtype, so activations and their
    gradients in float32 halve, except what Keras keeps float32 (``FLOAT32_OPS``)
    and what a normalisation layer computes: ``BatchNormalization`` casts its
    input to float32 ("BN is prone to overflow with float16/bfloat16 inputs",
    keras/src/layers/normalization/batch_normalization.py ``call``), and
    ``LayerNormalization``'s float32 ``gamma``/``beta`` (``autocast=False``)
    promote its computation to float32 before its output is cast back
    (layer_normalization.py ``call``): point kept, low halved.
    Variables stay float32 (the policy's ``variable_dtype``), and so do the
    optimizer's slots and updates; each layer reads its kernel through a cast
    to the compute dtype (``AutocastVariable`` in Keras 2, ``autocast`` in
    Keras 3's ``Layer.__call__``), kept for the backward matmul: half the
    parameter bytes more (low: none live at the peak). A weight's gradient is
    computed in the compute dtype and cast to float32 for the update
    (``_CastGrad``, tensorflow/python/ops/math_grad.py: the gradient through
    the weight's cast is a cast back to the variable's dtype): the float32 cast
    is the gradient the update reads, with the float32 gradient's lifetime,
    and the 16-bit one it was cast from is freed once the cast has read it, so
    both are live only during the cast (point: 1x, high: 1.5x). A recurrent
    layer reads its kernels through the cast in every iteration of its
    ``tf.while_loop`` (keras/src/backend/tensorflow/rnn.py), so its per-iteration
    weight gradients are such float32 casts too; and the loop's gradient keeps
    each iteration's 16-bit kernel cast for that iteration's backward matmul
    (while_v2 accumulates the body's intermediates the gradient reads,
    tensorflow/python/ops/while_v2.py), consumed in reverse as the gradients
    pile up: how many of each are live at once is the executor's order, so not
    at the point; the high bound (1.5x) holds both.
    ``mixed_float16`` wraps the optimizer in ``LossScaleOptimizer``
    (keras/src/optimizers/loss_scale_optimizer.py): the gradients unscaled and
    checked finite (``IsFinite`` bool per element): up to one float32 copy of
    the gradients more (point: a quarter, high: one).
    To float32 (from a mixed capture): 2-byte tensors double; the 16-bit casts of
    the weights and loss scaling's checks go; a weight's gradient is the float32
    cast ``_CastGrad`` made (kept: in float32 the op that made the 16-bit gradient
    makes it in float32, live as long as the cast was), and the 16-bit weight
    gradient it was cast from goes (high: doubled, were it not cast).
    Either way, a convolution's cuDNN workspace on a GPU (``conv_workspace``) is
    the autotuner's afresh: unknown."""
    half = np.isin(facts.dtypes, HALF)
    floats = facts.dtypes == "float32"
    acts = np.isin(facts.roles, (ACTIVATION, GRADIENT, UNKNOWN, OTHER)) & ~facts.weight_shaped
    acts &= ~np.isin(facts.op_types, ("IteratorGetNext", "RecvDone", "_Recv"))
    if target == "float32":
        if not half.any():
            if not facts.half_program:
                out.notes.append(
                    "precision: the capture has no 16-bit tensors; float32 changes nothing"
                )
            elif (facts.dtypes == "").any():
                # A compiled program's arrays (JAX's, a cluster's results) are
                # allocations the capture records without a dtype.
                out.notes.append(
                    "precision: float32: the 16-bit tensors are a compiled program's; its "
                    "temp slab is resized through its HLO buffers, the arrays it takes and "
                    "returns (recorded without a dtype) are kept as captured"
                )
            return
        casts = facts.op_types == "Cast"
        weight_cast = casts & facts.weight_shaped
        half_wgrad = half & facts.weight_shaped & (facts.roles == GRADIENT) & ~casts
        # Attention scores: the float32 ones are the float32 program's; their
        # 16-bit copies go (high: doubled, were they the only ones).
        half_scores = half & attention_scores(facts)
        out.scale(half_scores, 0.0, 0.0, 2.0)
        half_wgrad &= ~half_scores
        out.scale(half & ~weight_cast & ~half_wgrad & ~half_scores, 2.0, 2.0, 2.0)
        out.scale(half_wgrad, 0.0, 0.0, 2.0)
        out.scale(weight_cast & half, 0.0, 0.0, 1.0)
        # The float32 cast of a weight's gradient: the float32 program's gradient
        # itself (kept); low: none, where the cast was of something else.
        out.scale(weight_cast & floats & (facts.roles == GRADIENT), 1.0, 0.0, 1.0)
        out.scale(facts.op_types == "IsFinite", 0.0, 0.0, 1.0)
        out.notes.append(
            "precision: float32: 16-bit tensors doubled, weight casts dropped, weight "
            "gradients kept as their float32 casts"
        )
        conv_workspace(facts, out, high=2.0)
        return
    if half.any():
        out.notes.append(f"precision: the capture is already mixed; {target} read as captured")
        return
    kept = facts.float32_kept
    norm = facts.in_norm_layer
    scores = attention_scores(facts)
    target_mask = acts & floats & ~kept
    out.scale(target_mask & ~norm & ~scores, 0.5, 0.5, 0.5)
    out.scale(target_mask & norm, 1.0, 0.5, 1.0)
    # Attention scores stay float32 (``attention_scores``); the forward ones gain
    # the probabilities' 16-bit cast, kept for the backward einsum with the
    # values; a gradient's 16-bit copy lives only until it is cast (high).
    scored = target_mask & scores & ~norm
    out.scale(scored & ~facts.backward, 1.5, 0.5, 1.5)
    out.scale(scored & facts.backward, 1.0, 0.5, 1.5)
    wgrad = floats & facts.weight_shaped & (facts.roles == GRADIENT)
    out.scale(wgrad, 1.0, 1.0, 1.5)
    for k in facts.keys:
        read, high = facts.params[k]
        out.add(k, 0.5 * read, 0.0, 0.5 * high, WEIGHT)  # the kernels' 16-bit casts
        if target == "mixed_float16":  # loss scaling's float32 copy of the gradients
            out.add(k, 0.25 * read, 0.0, 1.0 * high, GRADIENT)
    out.notes.append(
        f"precision: {target}: float32 activations and gradients halved, weights stay float32 "
        "with 16-bit cast copies"
    )
    conv_workspace(facts, out, high=1.0)


def remat_factors(facts: Facts, layers: tuple[str, ...], out: Resizing) -> None:
    """Rematerialisation of ``layers`` (or ``all``): ``tf.recompute_grad`` (which
    Keras 3's ``keras.remat`` and ``RematScope`` use on TensorFlow,
    keras/src/backend/tensorflow/core.py) keeps a wrapped call's inputs and
    drops every tensor made inside it, running the call again in the backward
    pass to get them (tensorflow/python/ops/custom_gradient.py
    ``recompute_grad``). So the forward tensors of those layers still live when
    the step's backward pass starts (``Facts.crosses``) are dropped, except each
    layer's last one (its output: the next layer's input, which that layer
    keeps); the low bound drops that too. During the backward pass one layer's
    tensors are made again at a time: the largest such set is added (point
    and high) where the peak then sits."""
    known = layer_names(facts)
    if not known:
        raise UsageError(
            "remat needs layer names, and this capture names no layers (a compiled "
            "program or ops without Keras scopes); nothing to rematerialise: leave "
            "--remat out, or capture the model without jit_compile to see its layers"
        )
    wanted = known if layers == ("all",) else set(layers)
    missing = sorted(wanted - known)
    if missing:
        shown = ", ".join(sorted(known)[:12])
        raise UsageError(
            f"no layer named {', '.join(missing)} in the capture; give 'all' or some of: {shown}"
        )
    layer = facts.layer_codes[0]  # codes: no string per allocation
    kept = facts.crosses & in_layers(facts, wanted) & (facts.roles == ACTIVATION)
    for k in facts.keys:
        mine = kept & facts.mine[k]
        idx = np.flatnonzero(mine)
        if not len(idx):
            continue
        frame = pd.DataFrame({"layer": layer[idx], "i": idx})
        last = frame.groupby("layer")["i"].max().to_numpy()
        inner = np.zeros(len(mine), dtype=bool)
        inner[idx] = True
        inner[last] = False
        out.scale(inner, 0.0, 0.0, 0.0)
        outputs = np.zeros(len(mine), dtype=bool)
        outputs[last] = True
        out.scale(outputs, 1.0, 0.0, 1.0)
        out.notes.append(
            f"remat: {int(inner.sum())} kept forward tensors of {len(wanted)} layer(s) dropped"
        )
    out.notes.append("remat: the largest recomputed layer's tensors added in the backward pass")


def recompute_extra(
    facts: Facts, layers: tuple[str, ...], requested: np.ndarray, out: Resizing
) -> None:
    """The bytes a remat layer's recomputation makes live again (``remat_factors``):
    ``tf.recompute_grad``'s gradient function runs the layer's forward call
    again when the tape reaches it, so its tensors are live again from the
    layer's first gradient-tape allocation to its last, in each step (point);
    the high bound has the largest such set for the whole run."""
    known = layer_names(facts)
    wanted = known if layers == ("all",) else set(layers)
    layer = facts.layer_codes[0]  # codes: no string per allocation
    kept = facts.crosses & in_layers(facts, wanted) & (facts.roles == ACTIVATION)
    start = facts.alloc_events
    for k in facts.keys:
        mine = kept & facts.mine[k]
        if not mine.any():
            continue
        frame = pd.DataFrame(
            {"step": facts.steps[mine], "layer": layer[mine], "bytes": requested[mine]}
        )
        sets = frame.groupby(["step", "layer"], dropna=False)["bytes"].sum()
        out.add(k, 0.0, 0.0, float(sets.max()))
        back = facts.backward & facts.mine[k]
        grads = pd.DataFrame({"step": facts.steps[back], "layer": layer[back], "row": start[back]})
        spans = grads.groupby(["step", "layer"], dropna=False)["row"].agg(["min", "max"])
        found = spans.join(sets.rename("bytes"), how="inner")
        rows = found[["min", "max", "bytes"]].to_numpy(dtype=np.float64)
        out.backward[k] = np.concatenate([out.backward.get(k, np.zeros((0, 3))), rows])


def fresh_process(facts: Facts, out: Resizing) -> None:
    """The same program in a fresh process: what the allocator held before the
    capture beyond the model's own variables (the inventory's, or those read off
    their gradients) is earlier work in the process where Keras' automatic names
    show other models built first (``earlier``): objects of earlier cells that
    Python still references keep their tensors, and TensorFlow frees a tensor only
    when its last reference goes. A fresh process holds none of it: those bytes
    go, at the point and both bounds."""
    for k, (rest, evidence) in facts.earlier.items():
        out.add(k, -rest, -rest, -rest)
        out.notes.append(
            f"a fresh process: the {rest / 2**20:.1f} MiB held before the capture beyond this "
            f"model's variables not held ({evidence}: earlier models' leftovers)"
        )
    if not facts.earlier:
        # What else was held may be this program's own (its data, variables the
        # capture does not name): a fresh process would make it again.
        out.notes.append(
            "a fresh process: no earlier models show in the capture (Keras' layer names "
            "start from this model's), so what was held before it is kept"
        )


def _rules(facts: Facts, change: Change, requested: np.ndarray, out: Resizing) -> None:
    if change.fresh:
        fresh_process(facts, out)
    if change.optimizer:
        optimizer_change(facts, change.optimizer, out)
    if change.precision:
        precision_factors(facts, change.precision, out)
    if change.remat:
        # What is recomputed is what the other changes made of it, before it is dropped.
        sized = requested * out.point
        remat_factors(facts, change.remat, out)
        recompute_extra(facts, change.remat, sized, out)


def resizing(predictor: Predictor, change: Change, facts: Facts | None = None) -> Resizing:
    """The Resizing a change makes on ``predictor``'s capture: the rules on each
    allocation, and on each compiled program's slab through its HLO buffers
    (``slab_factors``)."""
    facts = facts if facts is not None else facts_of(predictor)
    if change.optimizer and not facts.trains:
        raise UsageError(
            f"--optimizer {change.optimizer}: the capture shows no training step (no "
            "gradient, no optimizer op or slot), so an optimizer changes nothing in it"
        )
    out = Resizing.identity(len(predictor.requested))
    _rules(facts, change, predictor.requested, out)
    slab_factors(predictor, facts, change, out)
    return out


def slab_factors(predictor: Predictor, facts: Facts, change: Change, out: Resizing) -> None:
    """A compiled program's slab (XLA's buffer assignment packs the step's
    temporaries into one allocation, tensorflow/compiler/xla/service/
    buffer_assignment.cc) resized as the bytes of its HLO buffers live at the
    program's peak, each by the same rules as an allocation (its TF op's role,
    its dtype and shape), its slack kept: the factor is their new total over
    the old. XLA re-plans the slab for the changed program, which may pack it
    differently; the bounds take each buffer at its low and high factor.
    Rematerialisation is not modelled inside a slab (XLA has its own remat
    pass, which the capture's buffer assignment already reflects)."""
    if not predictor.slabs or (change.remat and not change.optimizer and not change.precision):
        return
    buffers = predictor.base.xla_buffers
    info = buffers.drop_duplicates(["host", "program", "logical_buffer"])
    # Each buffer's columns read once: a long capture runs its programs hundreds of
    # times, one slab each, and looking their buffers up per slab (a reindex of the
    # table) cost 10 ms a slab. The last entry stands for a buffer not in the table.
    position = {
        (host, program, int(buffer)): i
        for i, (host, program, buffer) in enumerate(
            zip(info["host"], info["program"], info["logical_buffer"], strict=True)
        )
    }
    missing = len(position)
    shape_of = np.append(info["shape"].astype(object).to_numpy(), np.nan)
    dtype_of, op_type_of, op_of = (
        np.append(info[c].astype(object).fillna("").to_numpy(), "")
        for c in ("dtype", "tf_op_type", "tf_op")
    )
    for row, slab in predictor.slabs.items():
        held, _ = slab.at(predictor.batch)
        keep = held > 0
        ids = [(slab.key[0], slab.key[1], int(b)) for b in slab.buffers[keep]]
        if not ids:
            continue
        at = np.array([position.get(i, missing) for i in ids], dtype=np.int64)
        places = [predictor.buffer_places.get(i, ("", OTHER)) for i in ids]
        shapes = shape_of[at]
        n = len(ids)
        key = (predictor.base.allocations["host"].iloc[row], facts.keys[0][1])
        sub = Facts(
            roles=np.array([p[1] for p in places], dtype=object),
            layers=np.array([p[0] for p in places], dtype=object),
            dtypes=dtype_of[at],
            op_types=op_type_of[at],
            ops=op_of[at],
            shapes=shapes,
            keys=[key],
            mine={key: np.ones(n, dtype=bool)},
            weight_shaped=np.array(
                [bool(d) and d in predictor.weights for d in map(dims, shapes)], dtype=bool
            ),
            steps=np.full(n, np.nan),
            alloc_events=np.zeros(n, dtype=np.int64),
            backward=np.zeros(n, dtype=bool),
            crosses=np.zeros(n, dtype=bool),
            optimizer=facts.optimizer,
            params={key: (0.0, 0.0)},
            before={key: 0.0},
        )
        inner = Resizing.identity(n)
        _rules(sub, Change(change.precision, change.optimizer, None), held[keep], inner)
        # XLA fuses an update's elementwise chain into one kernel
        # (xla/service/instruction_fusion.cc): its temporaries are fusion outputs,
        # about one per variable whatever the formula; the count ratio is a bound.
        update = sub.roles == OPTIMIZER_UPDATE
        inner.low[update] = np.minimum(inner.low[update], 1.0)
        inner.high[update] = np.maximum(inner.high[update], 1.0)
        inner.point[update] = 1.0
        out.slabs[row] = np.ones(len(held))
        out.slabs[row][keep] = inner.point
        total = float(predictor.requested[row])
        rest = max(total - float(held[keep].sum()), 0.0)
        for mine, factors in (
            (out.point, inner.point),
            (out.low, inner.low),
            (out.high, inner.high),
        ):
            mine[row] *= (rest + float((held[keep] * factors).sum())) / total if total else 1.0


def failed_request_factors(
    dtype: str | None, role: object, weight_shaped: bool, change: Change
) -> tuple[float, float, float]:
    """What ``change`` does to the request a capture ran out of memory at (point,
    low, high), which no allocation row holds (``Predictor.failed``): only the
    precision moves it, as ``precision_factors`` moves a tensor of its dtype and
    role. To a mixed policy a float32 activation or gradient (not a weight's
    shape) halves, unless Keras keeps it float32 (a normalisation's, a softmax's:
    its op alone does not say, so the high keeps it); to float32 a 16-bit one
    doubles. A new optimizer, remat (the request is the tensor its op is making
    then, recomputed or not) and a fresh process leave it as it is."""
    tensor = role in (ACTIVATION, GRADIENT, UNKNOWN, OTHER) and not weight_shaped
    if not change.precision or not tensor:
        return (1.0, 1.0, 1.0)
    if change.precision == "float32":
        return (2.0, 2.0, 2.0) if dtype in HALF else (1.0, 1.0, 1.0)
    return (0.5, 0.5, 1.0) if dtype == "float32" else (1.0, 1.0, 1.0)
