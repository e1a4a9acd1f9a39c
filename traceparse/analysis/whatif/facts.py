"""What the what-if rules read off one capture (``Facts``, ``facts_of``): per
allocation its role, layer, dtype, op and shape, whether it is on the tape and
whether it crosses into the backward pass; per allocator the optimizer, its
parameters and what was held before the capture."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.naming import (
    GRADIENT,
    OPTIMIZER_SCOPES,
    OPTIMIZER_STATE,
    OPTIMIZER_UPDATE,
)
from traceparse.analysis.naming.optimizers import SLOTS, captured_optimizer, optimizer_of_frames
from traceparse.analysis.predict import Capture, Predictor
from traceparse.analysis.predict.batch import CONV_WORKSPACE, by_value, dims, scratch_kinds
from traceparse.analysis.predict.weights import GRADIENT_TAPE

Key = tuple[object, object]

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

HALF = ("float16", "bfloat16", "half")


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
        return pattern_rows(FLOAT32_OPS, self.ops, self.op_types)

    @functools.cached_property
    def layer_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Each allocation's layer as a code (-1: none) and the distinct layers: the
        layers of millions of allocations are compared as codes, read once."""
        return factorized(self.layers)

    @functools.cached_property
    def in_norm_layer(self) -> np.ndarray:
        """Made inside a normalisation layer (``NORM_LAYER``)."""
        return pattern_rows(NORM_LAYER, self.layers)


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
    optimizer = captured_optimizer(np.concatenate([factorized(ops)[1], xla_ops]))
    if optimizer is None:  # its update ops may have left no allocation record
        optimizer = captured_optimizer(base.op_names)
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


def pattern_rows(pattern: re.Pattern[str], *columns: np.ndarray) -> np.ndarray:
    """Per row, whether ``pattern`` is found in the row's ``columns`` joined by spaces:
    searched once per distinct row (a capture repeats a few thousand op names over
    its allocations)."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        codes, uniques = factorized(column)
        key = key * (len(uniques) + 1) + (codes + 1)  # 0: missing
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    found = np.array(
        [bool(pattern.search(" ".join(str(c[i]) for c in columns))) for i in first], dtype=bool
    )
    return found[inverse] if len(found) else np.zeros(len(key), dtype=bool)


def factorized(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def in_layers(facts: Facts, wanted: set[str]) -> np.ndarray:
    """Whether each allocation's layer (as text) is one of ``wanted``: each distinct
    layer looked up once (``np.isin`` would sort millions of strings)."""
    codes, uniques = facts.layer_codes
    # The last: a missing layer (code -1), which no name is.
    found = np.array([str(u) in wanted for u in uniques] + [False], dtype=bool)
    return found[codes]
