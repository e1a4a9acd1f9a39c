"""What a change to the training program would do to the peak (docs/whatif.md).

A what-if is a resizing of the capture's allocations fed into the same
allocator replay as a batch-size prediction (``predict.Predictor``): each
allocation's request is multiplied by a factor (0 drops it), with a low and a
high factor where the change's effect on it is uncertain, and bytes the change
adds or removes for the whole step (optimizer slots, cast copies of the
weights, a recomputed layer's activations) are added to the counter. The
Predictor's BFC model then places every chunk, and its bounds replay the
counter with each chunk at its smallest and largest, so peak, bounds, moment
and parts come from the machinery ``predict`` uses.

Three changes, each a rule below that names the mechanism it models:

- ``precision``: ``mixed_float16`` / ``mixed_bfloat16`` / ``float32``
  (``precision_factors``);
- ``optimizer``: one of ``SLOTS`` (``optimizer_change``);
- ``remat``: ``all`` or layer names (``remat_factors``).
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.naming import (
    ACTIVATION,
    GRADIENT,
    OPTIMIZER_SCOPES,
    OPTIMIZER_STATE,
    OPTIMIZER_UPDATE,
    OTHER,
    UNKNOWN,
    WEIGHT,
)
from traceparse.analysis.naming.optimizers import SLOTS, captured_optimizer, optimizer_of_frames
from traceparse.analysis.predict import BEFORE, READ_BEFORE, Capture, Predictor, Replayed
from traceparse.analysis.predict.batch import CONV_WORKSPACE, by_value, dims, scratch_kinds
from traceparse.analysis.predict.weights import GRADIENT_TAPE
from traceparse.errors import UsageError

Key = tuple[object, object]

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
# Adafactor's slots per parameter: its full-size velocity, and the factored rows
# and columns of a matrix (r + c of r x c elements: at most 5% more for matrices
# whose dimensions are both 40 or more; a vector's r and c are scalars).
ADAFACTOR_SLOTS = (1.0, 1.0, 1.05)
OPTIMIZERS = tuple(k for k in SLOTS if k not in ("adamax", "nadam", "adadelta", "lamb"))

# Ops whose output Keras keeps in float32 under a mixed policy: the loss (a
# ``Loss`` computes in ``floatx()``, float32, converting ``y_pred`` to it:
# keras/src/losses/loss.py ``Loss.__call__``), so its cross-entropy; and the
# statistics of a normalisation (``tf.nn.moments`` and its ops), where the layer
# is not named (inside a named normalisation layer, ``NORM_LAYER`` applies).
# Not a softmax: Keras 3's ``Softmax`` layer (and ``MultiHeadAttention``'s,
# made with the layer's dtype policy) computes in the compute dtype
# (keras/src/layers/activations/softmax.py has no cast; only the mask's large
# negative number depends on float16), so an attention's probabilities halve.
FLOAT32_OPS = re.compile(
    r"SoftmaxCrossEntropy|compile_loss/|FusedBatchNorm|Mean|Variance|SquaredDifference|Rsqrt"
    r"|moments",
)
NORM_LAYER = re.compile(r"norm", re.IGNORECASE)
ATTENTION_LAYER = re.compile(r"attention", re.IGNORECASE)
# ``MultiHeadAttention``'s own Softmax/Dropout sublayers: the path without the
# float32 dot-product attention (``attention_scores``).
SUBLAYER_PATH = re.compile(r"/(softmax|dropout)(_\d+)?/")
HALF = ("float16", "bfloat16", "half")


@dataclass
class Change:
    """What to change: any of the three (None: as captured); ``fresh``: run the
    program in a fresh process (``advise`` offers it where earlier models show)."""

    precision: str | None = None
    optimizer: str | None = None
    remat: tuple[str, ...] | None = None  # ("all",) or layer names
    fresh: bool = False

    def label(self) -> str:
        parts = []
        if self.precision:
            parts.append(self.precision)
        if self.optimizer:
            parts.append(self.optimizer)
        if self.remat:
            parts.append("remat " + ",".join(self.remat))
        if self.fresh:
            parts.append("a fresh process")
        return " + ".join(parts) or "as captured"

    def __bool__(self) -> bool:
        return bool(self.precision or self.optimizer or self.remat or self.fresh)


def parse_change(
    precision: str | None,
    optimizer: str | None,
    remat: str | tuple[str, ...] | None,
    fresh: bool = False,
) -> Change:
    """A Change from user text; an unknown precision or optimizer is a UsageError."""
    if precision is not None and precision not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    if optimizer is not None:
        optimizer = optimizer.lower()
        if optimizer not in SLOTS:
            raise UsageError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    layers: tuple[str, ...] | None = None
    if remat is not None:
        names = remat.split(",") if isinstance(remat, str) else list(remat)
        layers = tuple(n.strip() for n in names if n.strip())
        if not layers:
            raise UsageError("--remat needs 'all' or layer names separated by commas")
    return Change(precision, optimizer, layers, fresh)


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


@dataclass
class Facts:
    """What the rules read off one capture (per allocation unless said)."""

    roles: np.ndarray
    layers: np.ndarray
    dtypes: np.ndarray
    op_types: np.ndarray
    ops: np.ndarray
    shapes: np.ndarray
    keys: list[Key]
    mine: dict[Key, np.ndarray]
    weight_shaped: np.ndarray  # the shape is a weight's or slot's
    steps: np.ndarray  # the step of each allocation (NaN: none)
    alloc_events: np.ndarray  # the timeline row of each allocation
    backward: np.ndarray  # allocated by an op of the gradient tape
    crosses: np.ndarray  # a forward tensor still live when its step's backward starts
    optimizer: str | None  # the captured optimizer's scope, if any op names one
    params: dict[Key, tuple[float, float]]  # float32 parameter bytes: (read, high)
    before: dict[Key, float]  # bytes held before the capture
    # A linked compiled program computes in a 16-bit dtype (its HLO buffers say so
    # where the allocations, the program's slabs, carry no dtype).
    half_program: bool = False
    # The timeline row after which each allocation is freed (None: not read, a
    # compiled program's buffers).
    ends: np.ndarray | None = None
    # The step runs as a compiled program (a slab): XLA updates the variables in
    # the buffers it aliases to them, no copy-on-write of TF's.
    compiled: bool = False
    # The capture shows training: a gradient, an optimizer's op or its name.
    trains: bool = True
    # A convolution's cuDNN workspace (``predict.batch.scratch_kinds``); None: none read.
    conv_workspaces: np.ndarray | None = None
    # Per allocator: bytes held before the capture beyond the model's own variables
    # where the process built other models first (``Predictor.held_columns``),
    # with that evidence in words.
    earlier: dict[Key, tuple[float, str]] = field(default_factory=dict)

    @property
    def mixed(self) -> bool:
        """Whether the captured program computes in a 16-bit dtype anywhere."""
        return bool(np.isin(self.dtypes, HALF).any()) or self.half_program

    # Read once per capture: every precision change (advise tries two or three) asks.
    @functools.cached_property
    def float32_kept(self) -> np.ndarray:
        """Made by an op a mixed-precision policy keeps in float32 (``FLOAT32_OPS``)."""
        return _matches(FLOAT32_OPS, self.ops, self.op_types)

    @functools.cached_property
    def layer_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Each allocation's layer as a code (-1: none) and the distinct layers: the
        layers of millions of allocations are compared as codes, read once."""
        return _factorized(self.layers)

    @functools.cached_property
    def in_norm_layer(self) -> np.ndarray:
        """Made inside a normalisation layer (``NORM_LAYER``)."""
        return _matches(NORM_LAYER, self.layers)


def facts_of(predictor: Predictor) -> Facts:
    a = predictor.base.allocations
    ops = _objects(a["op"], "")
    shapes = a["shape"].astype(object).to_numpy()
    weights = predictor.weights
    # Each distinct shape and op name read once (a capture repeats a few thousand
    # over millions of allocations).
    weight_shaped = by_value(
        a["shape"], lambda s: np.array([_weight_shaped(v, weights) for v in s], dtype=bool)
    )
    backward = by_value(a["op"], lambda o: o.map(_on_tape).to_numpy(dtype=bool))
    # Where each step's backward pass starts: its first gradient-tape allocation.
    steps = a["step"].to_numpy(dtype=np.float64, na_value=np.nan)
    start = a["alloc_event"].to_numpy(dtype=np.int64)
    ends = np.where(predictor.base.ends == STILL_LIVE, np.iinfo(np.int64).max, predictor.base.ends)
    first_back = (
        pd.Series(start[backward]).groupby(steps[backward]).min()
        if backward.any()
        else pd.Series(dtype=np.int64)
    )
    boundary = pd.Series(steps).map(first_back).to_numpy(dtype=np.float64, na_value=np.nan)
    crosses = (~backward) & ~np.isnan(boundary) & (start < boundary) & (ends >= boundary)
    keys = list(predictor.rows)
    mine = {k: predictor._mine(k) for k in keys}
    roles = predictor.roles
    base = predictor.base
    xla_ops = np.concatenate(
        [
            base.xla_buffers["tf_op"].astype(object).dropna().to_numpy()
            if len(base.xla_buffers)
            else np.array([], dtype=object),
            np.array(
                [
                    op
                    for text in base.xla_parameters.get("read_by", pd.Series(dtype=object)).dropna()
                    for op in str(text).split(", ")
                ],
                dtype=object,
            ),
        ]
    )
    optimizer = captured_optimizer(np.concatenate([_factorized(ops)[1], xla_ops]))
    if optimizer is None and base.stacks is not None and len(base.stacks):
        optimizer = optimizer_of_frames(base.stacks["frame"].astype(str))
    params: dict[Key, tuple[float, float]] = {}
    before: dict[Key, float] = {}
    last_step = np.nanmax(steps) if np.isfinite(steps).any() else np.nan
    for k in keys:
        before[k] = float(predictor._before(k))
        params[k] = _params(predictor, k, mine[k], roles, shapes, steps, last_step, optimizer)
    return Facts(
        roles,
        predictor.layers,
        _objects(a["dtype"], ""),
        _objects(a["op_type"], ""),
        ops,
        shapes,
        keys,
        mine,
        weight_shaped,
        steps,
        start,
        backward,
        crosses,
        optimizer,
        params,
        before,
        half_program=_half_program(base),
        ends=ends,
        compiled=bool(predictor.slabs),
        trains=bool(np.isin(roles, (GRADIENT, OPTIMIZER_STATE, OPTIMIZER_UPDATE)).any())
        or optimizer is not None,
        conv_workspaces=scratch_kinds(a) == CONV_WORKSPACE,
        earlier=_earlier(predictor, keys),
    )


def _earlier(predictor: Predictor, keys: list[Key]) -> dict[Key, tuple[float, str]]:
    """Per allocator whose capture shows other models built first in the process
    (``Predictor.held_columns``: Keras' automatic layer names), the bytes held
    before the capture beyond the model's own variables, and that evidence."""
    found = {}
    for k in keys:
        held = predictor.held_columns(k)
        rest = float(held["other_held_bytes"])
        if held["earlier_layers"] and rest > 0:
            found[k] = (
                rest,
                f"Keras had built {held['earlier_layers']} layers of its kind before this "
                f"model's {held['earlier_layer']}",
            )
    return found


def _objects(column: pd.Series, missing: object) -> np.ndarray:
    """A column as an object array with ``missing`` for what it lacks, read once per
    category (``by_value``)."""
    return by_value(column, lambda v: v.fillna(missing).to_numpy(dtype=object))


def _weight_shaped(shape: object, weights: set[tuple[int, ...]]) -> bool:
    found = dims(shape)
    return bool(found) and found in weights


def _on_tape(op: object) -> bool:
    """Allocated by an op of the gradient tape (its name scope)."""
    return GRADIENT_TAPE in str(op)


def _half_program(base: Capture) -> bool:
    """Whether a program that allocated during the capture (a linked slab) holds
    16-bit HLO buffers: JAX and XLA programs compute in the dtype of their
    buffers, which the allocator's events do not record."""
    linked = base.allocations["xla_program"].dropna().astype(str).unique()
    buffers = base.xla_buffers
    if not len(linked) or not len(buffers):
        return False
    mine = buffers["program"].astype(str).isin(linked).to_numpy(dtype=bool)
    return bool(buffers["dtype"].astype(object).isin(HALF).to_numpy(dtype=bool)[mine].any())


def _params(
    predictor: Predictor,
    key: Key,
    mine: np.ndarray,
    roles: np.ndarray,
    shapes: np.ndarray,
    steps: np.ndarray,
    last_step: float,
    optimizer: str | None,
) -> tuple[float, float]:
    """Float32 parameter bytes of the model on ``key``: (read, high).

    Read: an inventory's trainable weights where there is one; else each weight's
    gradient (a tensor of the weight's shape the tape allocates once per step per
    variable, tensorflow/python/eager/backprop.py) counted once per (layer, shape)
    in the last step, at 4 bytes an element (Keras keeps variables float32 under
    every policy). Gradients under the oneDNN pool's limit are not in the capture,
    so the read is low; high: what was held before the capture shared among the
    weights and the captured optimizer's slots (Keras builds both before the first
    step, so they are there when a later step is captured)."""
    variables = predictor.base.variables
    read = 0.0
    if variables is not None and len(variables):
        v = variables[(variables["allocator"].astype(object) == key[1])]
        v = v[v["role"].astype(object) == "weight"]
        read = float(v["estimated_bytes"].to_numpy(dtype=np.float64, na_value=0).sum())
    params = predictor.base.xla_parameters
    if read == 0.0 and len(params):
        # A compiled step's weights are its parameters that it updates and that a
        # forward op reads; a slot is read by the optimizer's ops alone.
        p = params[params["allocator"].astype(object) == key[1]]
        p = p.drop_duplicates(["host", "module", "parameter_number"])
        updated = p["updated"].fillna(False).to_numpy(dtype=bool)
        forward = p["read_by"].astype(object).fillna("").map(_read_by_forward).to_numpy(dtype=bool)
        read = float(p.loc[updated & forward, "size_bytes"].to_numpy(dtype=np.float64).sum())
    if read == 0.0:
        pick = mine & np.isin(roles, (GRADIENT, OPTIMIZER_UPDATE)) & (steps == last_step)
        seen: set[tuple[object, tuple[int, ...]]] = set()
        for i in np.flatnonzero(pick):
            d = dims(shapes[i])
            if d and d in predictor.weights:
                seen.add((predictor.layers[i], d))
        read = 4.0 * float(sum(int(np.prod(d)) for _, d in seen))
        # Each read misses some weights (the first those under the oneDNN pool's
        # limit or not of a known weight shape, the second those of other
        # kernels) and neither counts one twice: the larger.
        read = max(read, float(predictor.weights_read(key).sum()))
    slots = SLOTS.get(optimizer or "sgd", (0.0, 1.0))[0]
    high = max(read, float(predictor._before(key)) / (1.0 + slots))
    return read, high


def _read_by_forward(text: str) -> bool:
    """Whether a parameter's readers include an op outside an optimizer's scope."""
    for op in text.split(", "):
        first = re.sub(r"_\d+$", "", op.split("/")[0]).lower()
        if op and first not in OPTIMIZER_SCOPES:
            return True
    return False


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
    shapes = _factorized(facts.shapes)[0]  # codes: no string per allocation
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
    attention = _matches(ATTENTION_LAYER, facts.layers) & floating
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


def _matches(pattern: re.Pattern[str], *columns: np.ndarray) -> np.ndarray:
    """Per row, whether ``pattern`` is found in the row's ``columns`` joined by spaces:
    searched once per distinct row (a capture repeats a few thousand op names over
    its allocations)."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        codes, uniques = _factorized(column)
        key = key * (len(uniques) + 1) + (codes + 1)  # 0: missing
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    found = np.array(
        [bool(pattern.search(" ".join(str(c[i]) for c in columns))) for i in first], dtype=bool
    )
    return found[inverse] if len(found) else np.zeros(len(key), dtype=bool)


def _factorized(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` of a column of millions of rows holding a few thousand
    distinct values (code -1: missing), its hash table sized for the values: by
    default it is sized for the rows, and a missing value kept as a value of its
    own costs a copy of the column."""
    codes, uniques = pd.factorize(column, size_hint=4096)
    return codes, np.asarray(uniques, dtype=object)


def layer_names(facts: Facts) -> set[str]:
    """The layers the capture names (no placeholder rows such as ``(no layer)``)."""
    _, uniques = facts.layer_codes
    return {str(x) for x in uniques if not pd.isna(x) and not str(x).startswith("(")}


def _named(facts: Facts, wanted: set[str]) -> np.ndarray:
    """Whether each allocation's layer (as text) is one of ``wanted``: each distinct
    layer looked up once (``np.isin`` would sort millions of strings)."""
    codes, uniques = facts.layer_codes
    # The last: a missing layer (code -1), which no name is.
    found = np.array([str(u) in wanted for u in uniques] + [False], dtype=bool)
    return found[codes]


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
    kept = facts.crosses & _named(facts, wanted) & (facts.roles == ACTIVATION)
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
    kept = facts.crosses & _named(facts, wanted) & (facts.roles == ACTIVATION)
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


class _Resized:
    """A ``Sizing`` with every request multiplied by the what-if's factors."""

    def __init__(self, inner: Any, change: Resizing) -> None:
        self._inner = inner
        self._change = change

    def at(self, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        point, low, high = self._inner.at(batch)
        c = self._change
        lo = np.minimum(low * c.low, point * c.low)
        hi = np.maximum(high * c.high, point * c.high)
        return point * c.point, lo, hi

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class WhatIf(Predictor):
    """A Predictor of the changed program: ``base``'s allocations resized by the
    change, replayed through its allocator model; bytes the change adds for the
    whole step are added to every event's counter."""

    change: Change
    resized: Resizing
    facts: Facts
    _sized: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]

    @classmethod
    def of(cls, base: Predictor, change: Change, facts: Facts | None = None) -> WhatIf:
        base.histories  # noqa: B018 - calibrate once, shared by every copy
        made = copy.copy(base)
        made.__class__ = cls
        assert isinstance(made, WhatIf)
        made.change = change
        made.facts = facts if facts is not None else facts_of(base)
        made.resized = resizing(base, change, made.facts)
        made._sized = {}
        made._high_sized = None
        made.sizing = _Resized(base.sizing, made.resized)  # type: ignore[assignment]
        made._runs = {}
        return made

    def sizes(self, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``Predictor.sizes``, made once per batch: ``bounds`` asks three times (the
        point, the low replay, the extremes), and each is three passes of ``chunks``
        over every allocation (read-only arrays to every caller)."""
        if batch not in self._sized:
            self._sized[batch] = super().sizes(batch)
        return self._sized[batch]

    def _extra(self, key: Key, which: int) -> float:
        return self.resized.extra.get(key, [0.0, 0.0, 0.0])[which]

    def dropped_held(self, key: Key) -> float:
        """Bytes held before the capture that a fresh process does not hold
        (``fresh_process``), where one is asked."""
        return (
            float(self.facts.earlier[key][0])
            if self.change.fresh and key in self.facts.earlier
            else 0.0
        )

    def change_columns(self) -> dict[str, str | None]:
        return {
            "change": self.change.label(),
            "assumptions": "\n".join(self.resized.notes) or None,  # one a line
        }

    def point(self, batch: int) -> tuple[Replayed, np.ndarray]:
        """At the captured batch: the captured counter with each allocation's change
        (its chunk at the new request, ``predict_replay.chunks``), as a prediction
        there is the capture itself; the allocator model's placement is not asked
        to explain what the capture already shows. Elsewhere: the allocator model
        at the new sizes, as for a batch-size prediction."""
        if batch == self.batch:
            held, _, _ = self.sizes(batch)
            found = self._replayed(held)
            counters = {k: v + self._added(k) for k, v in found.bytes.items()}
            return Replayed(found.events, counters), held
        runs = self.runs(batch)
        held = np.zeros(len(self.held))
        for key, simulated in runs.items():
            mine = self._mine(key)
            held[mine] = simulated.chunks[mine]
        counters = {key: run.in_use + self._added(key) for key, run in runs.items()}
        return Replayed(dict(self.rows), counters), held

    def _added(self, key: Key) -> np.ndarray | float:
        """Bytes the change adds after each of ``key``'s events: for the whole run,
        and while a recomputed layer's tensors are live (``Resizing.backward``)."""
        extra = self._extra(key, 0)
        spans = self.resized.backward.get(key)
        if spans is None or not len(spans):
            return extra
        rows = self.rows[key]
        delta = np.zeros(len(rows) + 1)
        np.add.at(delta, np.searchsorted(rows, spans[:, 0]), spans[:, 2])
        np.add.at(delta, np.searchsorted(rows, spans[:, 1], side="right"), -spans[:, 2])
        return extra + np.cumsum(delta)[:-1]

    def extremes(
        self, batch: int, runs: tuple[Replayed, Replayed] | None = None
    ) -> dict[Key, tuple[int, int]]:
        found = super().extremes(batch, runs)
        return {
            k: (round(lo + self._extra(k, 1)), round(hi + self._extra(k, 2)))
            for k, (lo, hi) in found.items()
        }

    def _parts(
        self, key: Key, event: int, peak: int, sizes: np.ndarray, batch: int
    ) -> pd.DataFrame:
        """The base's parts at the counter without the change's own bytes (so what
        was held before the capture is split as the capture held it), then those
        bytes by role (``changed_parts``): the rules' whole-run bytes
        (``Resizing.by_role``) and a recomputed layer's tensors live at ``event``."""
        changed = {r: b for r, b in self.resized.by_role.get(key, {}).items() if round(b)}
        again = self._recomputed(key, event)
        if again:
            changed[ACTIVATION] = changed.get(ACTIVATION, 0.0) + again
        parts = super()._parts(key, event, peak - round(sum(changed.values())), sizes, batch)
        if parts.empty or not changed:
            return parts
        return changed_parts(parts, changed, f"what-if: {self.change.label()}")

    def slab_factors(self, row: int) -> np.ndarray | None:
        return self.resized.slabs.get(row)

    def _recomputed(self, key: Key, event: int) -> float:
        """Bytes a recomputed layer's tensors add at ``event`` (``Resizing.backward``)."""
        added = self._added(key)
        if isinstance(added, float):
            return 0.0
        at = int(np.searchsorted(self.rows[key], event))
        return float(added[at]) - self._extra(key, 0)


def changed_parts(parts: pd.DataFrame, changed: dict[str, float], basis: str) -> pd.DataFrame:
    """``parts`` with a change's bytes per role: bytes it removes come off what was
    held before the capture in that role first (the slots an optimizer built
    before the first step; a fresh process's share of the earlier work, ``other``),
    then off the rest of what was held before (the change's counter takes them
    off every moment, and at this one less may be held than when the capture
    started); each such row in proportion, as a change of optimizer removes the
    same share of every parameter's slots. What is left, and what it adds, is a
    row of its own (layer ``(what-if)``). The rows' bytes still sum to the peak."""
    parts = parts.copy()
    before = parts["basis"].isin((BEFORE, READ_BEFORE)).to_numpy(dtype=bool)
    added = []
    for role, delta in changed.items():
        if delta < 0:
            delta += _take_off(parts, before & (parts["role"] == role).to_numpy(), -delta)
        if delta < 0:
            delta += _take_off(parts, before, -delta)
        if round(delta):
            row = {"layer": "(what-if)", "role": role, "basis": basis, "bytes": round(delta)}
            added.append(row | {"captured_bytes": 0})
    return pd.concat([parts, pd.DataFrame(added)], ignore_index=True) if added else parts


def _take_off(parts: pd.DataFrame, rows: np.ndarray, amount: float) -> int:
    """Takes up to ``amount`` bytes off ``parts``' ``rows``, each in proportion to its
    bytes, in place; returns the bytes taken."""
    have = parts.loc[rows, "bytes"].to_numpy(dtype=np.int64)
    total = int(have.sum())
    taken = min(round(amount), total)
    if taken <= 0:
        return 0
    kept = have - np.floor(have * (taken / total)).astype(np.int64)
    kept[np.argmax(kept)] -= int(kept.sum()) - (total - taken)  # the rounding's bytes
    parts.loc[rows, "bytes"] = kept
    return taken


def with_change(
    predictor: Predictor,
    precision: str | None = None,
    optimizer: str | None = None,
    remat: str | tuple[str, ...] | None = None,
    fresh: bool = False,
) -> Predictor:
    """``predictor``, or ``what_if`` it with the change given (``parse_change``), where
    one is: ``Profile.predict``'s keywords."""
    if precision is None and optimizer is None and remat is None and not fresh:
        return predictor
    return what_if(predictor, parse_change(precision, optimizer, remat, fresh))


def what_if(predictor: Predictor, change: Change) -> Predictor:
    """``predictor`` itself for no change, else the WhatIf of ``change``."""
    return WhatIf.of(predictor, change) if change else predictor


def half_policy(facts: Facts) -> str:
    """The mixed-precision policy to advise first: ``mixed_float16`` where the
    capture ran on a GPU, ``mixed_bfloat16`` elsewhere. Keras' mixed precision
    guide (keras.io/guides/mixed_precision: "on GPUs, use mixed_float16";
    bfloat16 computes natively only on TPUs, recent CPUs and GPUs of compute
    capability 8.0 and later, which the capture does not say) gives the rule;
    the bytes at the peak are the same either way, less float16's loss scaling."""
    gpu = any(str(allocator).startswith("GPU_") for _, allocator in facts.keys)
    return "mixed_float16" if gpu else "mixed_bfloat16"


# The changes ``advise`` tries alone, and the combinations it adds.
def candidates(facts: Facts) -> list[Change]:
    out: list[Change] = []
    mixed = facts.mixed
    half = half_policy(facts)
    out.append(Change(precision="float32" if mixed else half))
    if not mixed:
        out.append(
            Change(precision="mixed_bfloat16" if half == "mixed_float16" else "mixed_float16")
        )
    current = facts.optimizer or "sgd"
    for name in ("sgd", "momentum", "adafactor") if facts.trains else ():
        if name != current:
            out.append(Change(optimizer=name))
    has_layers = bool(layer_names(facts)) and facts.crosses.any()
    if has_layers:
        out.append(Change(remat=("all",)))
    out.append(
        Change(
            precision=None if mixed else half,
            optimizer="sgd" if current != "sgd" and facts.trains else None,
            remat=("all",) if has_layers else None,
        )
    )
    if facts.earlier:
        out.append(Change(fresh=True))
    # Each change once: where there is nothing else to combine the combination is
    # one of the single changes already listed.
    unique: list[Change] = []
    for change in out:
        if change and change not in unique:
            unique.append(change)
    return unique


COSTS = {
    "precision": "numerics: 16-bit activations and gradients (float16 needs loss scaling); "
    "speed gains only where the hardware has 16-bit units",
    "float32": "numerics: none lost; compute and bandwidth in float32",
    "optimizer": "convergence: a different optimizer may need other learning rates or more steps",
    "remat": "compute: the rematerialised layers run their forward pass twice (about a third "
    "more step time for all layers)",
    "fresh": "none to the program: run it in a fresh process (restart the notebook's kernel), "
    "or delete the earlier models and call keras.backend.clear_session() before building it",
}


def cost_of(change: Change) -> str:
    parts = []
    if change.precision:
        parts.append(COSTS["float32" if change.precision == "float32" else "precision"])
    if change.optimizer:
        parts.append(COSTS["optimizer"])
    if change.remat:
        parts.append(COSTS["remat"])
    if change.fresh:
        parts.append(COSTS["fresh"])
    return "; ".join(parts)


def advice(
    predictor: Predictor,
    keys: list[Key],
    capacity: int | None,
    *,
    search: bool = True,
    facts: Facts | None = None,
) -> list[dict[str, Any]]:
    """Each candidate change (``candidates``) on ``keys``: its predicted peak and
    bounds at the captured batch, bytes saved against the capture, its cost, and
    the largest batch that fits ``capacity`` (default: the allocator's), ranked by
    bytes saved (largest first) per allocator. ``search=False`` leaves the largest
    batch None: the search replays the allocator model at several batches per
    change, where the rest are counter replays at the captured batch (the report
    skips it past its replay budget). ``facts``: ``facts_of(predictor)``, when the
    caller has it already.

    The largest batch is ``capacity_fit``'s answer (the allocator model's search,
    ``_largest``, from the captured batch, on the change's shared replays) without
    the two searches of the bounds and the breakdown at the batch it also makes,
    which no row shows: a third of the replays."""
    from traceparse.analysis.predict.capacity import _largest, partial_point, replays_of

    facts = facts if facts is not None else facts_of(predictor)
    batch = predictor.batch
    base = predictor.bounds(batch)
    # A capacity the capture does not give is NA (events naming no allocator): None here.
    capacities = {
        (row.host, row.allocator): None if pd.isna(row.capacity_bytes) else row.capacity_bytes
        for row in predictor.base.peak.itertuples()
    }
    rows: list[dict[str, Any]] = []
    for change in candidates(facts):
        made = WhatIf.of(predictor, change, facts)
        found = made.bounds(batch)
        for key in keys:
            _, peak, low, high = found[key]
            cap = capacity if capacity is not None else capacities.get(key)
            largest = None
            if search and cap is not None and cap == cap:
                largest = _largest(partial_point(replays_of(made), key), int(cap), batch)
            rows.append(
                {
                    "host": key[0],
                    "allocator": key[1],
                    "batch_size": batch,
                    "change": change.label(),
                    "captured_peak_bytes": base[key][1],
                    "peak_bytes": peak,
                    "low_bytes": low,
                    "high_bytes": high,
                    "saved_bytes": base[key][1] - peak,
                    "largest_batch": largest,
                    "capacity_bytes": None if cap is None or cap != cap else int(cap),
                    "cost": cost_of(change),
                    "notes": made.resized.notes,
                }
            )
    rows.sort(key=lambda r: (str(r["host"]), str(r["allocator"]), -r["saved_bytes"]))
    return rows
