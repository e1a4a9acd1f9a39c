"""Which allocations grow with the batch, and the batch size the capture was made at.

The rules, each the model of a mechanism (docs/predict.md, "How"):

- A shape that is also a weight's (an inventoried variable, an XLA parameter
  the program updates, an allocation of a weight's or the optimizer's op) is
  a weight, its gradient or an optimizer slot: it does not grow.
- The captured batch size (``find_batch``) is the candidate with the most
  bytes of evidence: the step's input and label tensors where recorded, else
  the tensors it leads in both the forward pass and its gradients (a loop's
  stacked tensors, [iterations, B, ...], by their second dimension); weak or
  tied evidence gives none (the caller asks for it).
- A tensor grows in proportion to the batch when one of its dimensions is the
  batch (the leading one, or another for time-major layouts) or when its
  leading dimension is the batch times a per-example size seen elsewhere
  (flattened tensors: ``[589824]`` = 16 x 36864).
- A scratch buffer (a rank-1 byte array: cuDNN's, cuBLAS's workspace) is sized
  by what its library does (``scratch_kinds``), its bounds covering the
  other reading.
- A tensor without a recorded shape (XLA argument copies, temp buffers) is
  unknown: it grows when its request is that of a growing tensor, or when no
  op made it (the step's inputs, copied from the host array outside any op),
  its request is a multiple of the batch and recurs (every step copies its
  input; the whole data set, copied once, does not grow); its bounds cover both.

Every allocation gets a ``Sizing``: its request as ``fixed + per_example * N``
under the chosen rule and under the alternative, and the basis of the choice.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from traceparse.analysis.naming import first_ids
from traceparse.analysis.predict.workspace import feature_maps, filter_shapes, winograd_fixed
from traceparse.tables.select import row_index_type

# How an allocation's size at another batch was found (the ``basis`` column).
BATCH_DIM = "shape: batch dimension"
FLATTENED = "shape: batch x per-example size"
NO_BATCH_DIM = "shape: no batch dimension"
WEIGHT_SHAPE = "shape: a weight's shape"
UNSHAPED_MATCH = "no shape: request of a growing tensor"
UNSHAPED_KEPT = "no shape: kept as captured"
UNSHAPED_INPUT = "no shape, no op: a step's input"
FITTED = "two captures: affine fit"
HLO = "HLO buffers' shapes"
CONV_WORKSPACE = "scratch: convolution workspace, per example"
WINOGRAD_WORKSPACE = "scratch: Winograd workspace, filter transform fixed"
BLAS_WORKSPACE = "scratch: cuBLAS workspace, fixed"
RNN_BUFFER = "scratch: cuDNN RNN reserve space or workspace, per example"
SCRATCH_KEPT = "scratch: an op's workspace, kept"
BASES = (
    BATCH_DIM,
    FLATTENED,
    NO_BATCH_DIM,
    WEIGHT_SHAPE,
    UNSHAPED_MATCH,
    UNSHAPED_KEPT,
    UNSHAPED_INPUT,
    FITTED,
    HLO,
    CONV_WORKSPACE,
    WINOGRAD_WORKSPACE,
    BLAS_WORKSPACE,
    RNN_BUFFER,
    SCRATCH_KEPT,
)
# Bases whose scaling is not read off a shape: their bounds cover both rules.
UNCERTAIN = frozenset(
    {
        WEIGHT_SHAPE,
        UNSHAPED_MATCH,
        UNSHAPED_KEPT,
        UNSHAPED_INPUT,
        CONV_WORKSPACE,
        WINOGRAD_WORKSPACE,
        BLAS_WORKSPACE,
        RNN_BUFFER,
        SCRATCH_KEPT,
    }
)
# A convolution's op (its type, or, where the type is not recorded, its name: TF's
# grappler remapper fuses Conv2D+BiasAdd+Relu into _FusedConv2D named after the
# last node fused, ``conv2d_1/Relu``); a matrix multiplication's.
_CONV = re.compile(r"Conv[23]D|DepthwiseConv|FusedConv|conv", re.IGNORECASE)
_BLAS = re.compile(r"MatMul|Einsum|Gemm|BlasLt")
# The dtypes of a scratch buffer: bytes (also read by ``predict.xla``).
SCRATCH_DTYPES = frozenset({"uint8", "int8"})
# cuDNN's recurrent kernels, forward and backward (tensorflow/core/kernels/cudnn_rnn_ops.cc),
# not its weight conversions (``CudnnRNNCanonicalToParams``: the weights, one flat buffer).
_RNN = re.compile(r"CudnnRNN(Backprop)?(V[23])?")

_DIMS = re.compile(r"-?\d+")


@lru_cache(maxsize=4096)
def dims(shape: object) -> tuple[int, ...] | None:
    """``[128,256]`` (or ``f32[128,256]{1,0}``, ``(128, 256)``) as a tuple; None when unknown."""
    if not isinstance(shape, str) or not shape:
        return None
    body = shape.split("{")[0]
    if "[" in body:
        body = body[body.index("[") :]
    texts = _DIMS.findall(body)
    # No more digits than an int64 holds: the text comes from the capture, which
    # may be hostile (Python refuses to convert thousands of digits at all).
    if any(len(t.lstrip("-")) > 18 for t in texts):
        return None
    found = tuple(int(t) for t in texts)
    if any(d < 0 for d in found):
        return None  # dynamic dimension: not a size
    return found


def shape_key(shape: object) -> tuple[int, ...] | None:
    """A shape for comparing weights: its dimensions, scalars and unknowns None."""
    found = dims(shape)
    return found if found else None


@dataclass
class Sizing:
    """Per allocation: the request at batch N is ``fixed + per_example * N`` (point),
    ``alt_fixed + alt_per_example * N`` (the other rule, for bounds), and ``basis``.

    Kept as the distinct rules and each allocation's rule (``rule``): a step
    repeats its allocations, so millions of them share a few thousand rules.
    The per-allocation columns (``fixed`` and the rest) are made when read."""

    rule: np.ndarray  # per allocation: its index into the rules' arrays below
    rule_fixed: np.ndarray
    rule_per_example: np.ndarray
    rule_alt_fixed: np.ndarray
    rule_alt_per_example: np.ndarray
    rule_basis: np.ndarray
    # Rows whose point is the largest of several lines (an XLA slab: the bytes live
    # at each step of its program's schedule): row -> [[fixed, per_example], ...].
    envelopes: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of_rows(
        cls,
        fixed: np.ndarray,
        per_example: np.ndarray,
        alt_fixed: np.ndarray,
        alt_per_example: np.ndarray,
        basis: np.ndarray,
    ) -> Sizing:
        """A rule of its own for every allocation."""
        rule = np.arange(len(fixed), dtype=row_index_type(len(fixed)))
        return cls(rule, fixed, per_example, alt_fixed, alt_per_example, basis)

    @property
    def fixed(self) -> np.ndarray:
        return self.rule_fixed[self.rule]

    @property
    def per_example(self) -> np.ndarray:
        return self.rule_per_example[self.rule]

    @property
    def alt_fixed(self) -> np.ndarray:
        return self.rule_alt_fixed[self.rule]

    @property
    def alt_per_example(self) -> np.ndarray:
        return self.rule_alt_per_example[self.rule]

    @property
    def basis(self) -> np.ndarray:
        return self.rule_basis[self.rule]

    def grows(self) -> np.ndarray:
        """Per allocation: whether either rule grows its request with the batch."""
        return ((self.rule_per_example != 0) | (self.rule_alt_per_example != 0))[self.rule]

    def point_grows(self) -> np.ndarray:
        """Per allocation: whether the point's rule grows its request with the batch
        (a weight's shape that could also be folded rows grows only in the bounds)."""
        return (self.rule_per_example != 0)[self.rule]

    def assign(
        self,
        rows: np.ndarray,
        fixed: np.ndarray | float,
        per_example: np.ndarray | float,
        alt_fixed: np.ndarray | float,
        alt_per_example: np.ndarray | float,
        basis: str,
    ) -> None:
        """Give ``rows`` rules of their own (values per row, or one for all), in place."""
        rows = np.asarray(rows, dtype=np.int64)
        first = len(self.rule_fixed)

        def grown(rules: np.ndarray, values: object) -> np.ndarray:
            added = np.broadcast_to(np.asarray(values, dtype=rules.dtype), rows.shape)
            return np.concatenate([rules, added])

        self.rule_fixed = grown(self.rule_fixed, fixed)
        self.rule_per_example = grown(self.rule_per_example, per_example)
        self.rule_alt_fixed = grown(self.rule_alt_fixed, alt_fixed)
        self.rule_alt_per_example = grown(self.rule_alt_per_example, alt_per_example)
        self.rule_basis = grown(self.rule_basis, basis)
        self.rule = self.rule.astype(row_index_type(len(self.rule_fixed)), copy=False)
        self.rule[rows] = np.arange(first, len(self.rule_fixed))

    def per_replica(self, replicas: int) -> None:
        """Sizes made per replica's share of the batch read as sizes at the global
        batch (``predict.replicas``): each grows by 1 / ``replicas`` of it."""
        if replicas == 1:
            return
        self.rule_per_example /= replicas
        self.rule_alt_per_example /= replicas
        for lines in self.envelopes.values():
            lines[:, 1] /= replicas

    def at(self, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Requested bytes at ``batch``: point, low, high (never below 0)."""
        # Each rule once, then each allocation's; in place after that (each array
        # is as long as the allocations: millions).
        point = self.rule_per_example * batch
        point += self.rule_fixed
        np.maximum(point, 0.0, out=point)
        point = point[self.rule]
        for row, lines in self.envelopes.items():
            point[row] = max(float((lines[:, 0] + lines[:, 1] * batch).max()), 0.0)
        other = self.rule_alt_per_example * batch
        other += self.rule_alt_fixed
        np.maximum(other, 0.0, out=other)
        other = other[self.rule]
        low = np.minimum(point, other)
        return point, low, np.maximum(point, other, out=other)


@dataclass(frozen=True)
class Evidence:
    """The recorded tensors that the captured batch is read from, as their distinct
    (shape, op, name) rows in the order each first appears, with their bytes: a
    training step repeats its tensors, and every rule that reads them (``_scores``,
    ``_leads``) reads each distinct one once. ``name`` is what a tensor is
    classified by (its op's name and type), ``sizes`` the sum of its positive
    bytes, ``unsized`` how many of it had none."""

    shapes: np.ndarray  # object
    ops: np.ndarray  # object
    names: np.ndarray  # object
    sizes: np.ndarray  # float64
    unsized: np.ndarray  # float64

    @classmethod
    def of_rows(
        cls,
        shapes: Iterable[object],
        ops: Iterable[object],
        sizes: Iterable[float] | None = None,
        names: Iterable[object] | None = None,
    ) -> Evidence:
        """The evidence of tensors given one by one (``names``: else ``ops``; no
        ``sizes``: none has bytes)."""
        shapes, ops = list(shapes), list(ops)
        named = ops if names is None else list(names)
        bytes_ = (
            np.full(len(shapes), np.nan)
            if sizes is None
            else np.asarray([float(x) for x in sizes], dtype=np.float64)
        )
        index: dict[tuple[object, object, object], int] = {}
        ids = [index.setdefault(row, len(index)) for row in zip(shapes, ops, named, strict=True)]
        rows = list(index)
        return cls._of(
            np.asarray(ids, dtype=np.int64),
            np.asarray([r[0] for r in rows] + [None], dtype=object)[:-1],
            np.asarray([r[1] for r in rows] + [None], dtype=object)[:-1],
            np.asarray([r[2] for r in rows] + [None], dtype=object)[:-1],
            bytes_,
        )

    @classmethod
    def _of(
        cls,
        ids: np.ndarray,
        shapes: np.ndarray,
        ops: np.ndarray,
        names: np.ndarray,
        sizes: np.ndarray,
    ) -> Evidence:
        """Rows ``ids`` (each tensor's distinct row, numbered by first appearance)
        with each tensor's bytes ``sizes``."""
        sized = sizes > 0  # NaN and 0 are no bytes
        count = len(shapes)
        return cls(
            shapes,
            ops,
            names,
            np.bincount(ids[sized], weights=sizes[sized], minlength=count).astype(np.float64),
            np.bincount(ids[~sized], minlength=count).astype(np.float64),
        )

    @classmethod
    def of_codes(
        cls,
        codes: tuple[np.ndarray, np.ndarray, np.ndarray],
        values: tuple[np.ndarray, np.ndarray, np.ndarray],
        sizes: np.ndarray,
        name_of: Callable[[object, object], object],
    ) -> Evidence:
        """The evidence of tensors given as codes (shape, op, op type: -1 missing)
        into ``values`` (object arrays), named ``name_of(op, op type)``: only the
        distinct rows are made into objects."""
        ids, first = first_ids(*codes)
        picked = []
        for code, value in zip(codes, values, strict=True):
            at = code[first]
            out = np.full(len(first), np.nan, dtype=object)
            out[at >= 0] = value[at[at >= 0]]
            picked.append(out)
        shapes, ops, types = picked
        names = np.asarray(
            [name_of(o, t) for o, t in zip(ops, types, strict=True)] + [None], dtype=object
        )[:-1]
        return cls._of(ids, shapes, ops, names, np.asarray(sizes, dtype=np.float64))

    def __add__(self, other: Evidence) -> Evidence:
        return Evidence(
            *(
                np.concatenate([getattr(self, f), getattr(other, f)])
                for f in ("shapes", "ops", "names", "sizes", "unsized")
            )
        )


def _leads(
    evidence: Evidence, weights: set[tuple[int, ...]]
) -> tuple[dict[int, set[object]], dict[tuple[object, tuple[int, ...]], set[int]]]:
    """Per leading dimension of the non-weight shapes, the ops that recorded it; per
    (op, trailing dimensions), the leading dimensions it was recorded with."""
    by_lead: dict[int, set[object]] = {}
    by_rest: dict[tuple[object, tuple[int, ...]], set[int]] = {}
    # Each distinct (shape, op) once (``Evidence``: a step repeats them); sets only.
    for shape, op in zip(evidence.shapes, evidence.ops, strict=True):
        found = dims(shape)
        if not found or found in weights or found[0] <= 1:
            continue
        by_lead.setdefault(found[0], set()).add(op)
        by_rest.setdefault((op, found[1:]), set()).add(found[0])
    return by_lead, by_rest


def _sharing(
    lead: int, by_rest: dict[tuple[object, tuple[int, ...]], set[int]]
) -> dict[int, set[object]]:
    """The other leading dimensions that ops recorded with the same trailing
    dimensions as they did ``lead``, each with those ops."""
    shared: dict[int, set[object]] = {}
    for (op, _), leads in by_rest.items():
        if lead in leads:
            for other in leads - {lead}:
                shared.setdefault(other, set()).add(op)
    return shared


def _partial(small: int, shared_ops: set[object], by_lead: dict[int, set[object]]) -> bool:
    """Whether ``small`` is a partial batch of a larger leading dimension with which it
    shares ``shared_ops``: most of its ops, two at least."""
    return len(shared_ops) >= 2 and 2 * len(shared_ops) > len(by_lead.get(small, ()))


def _twins(
    batch: int,
    by_lead: dict[int, set[object]],
    by_rest: dict[tuple[object, tuple[int, ...]], set[int]],
) -> tuple[int, ...]:
    """Smaller batch sizes the same program ran at (an epoch's partial last batch):
    leading dimensions that most of their ops, two at least, also recorded with
    the same trailing dimensions led by ``batch``."""
    found = [
        lead
        for lead, ops in _sharing(batch, by_rest).items()
        if 1 < lead < batch and _partial(lead, ops, by_lead)
    ]
    return tuple(sorted(found, reverse=True))


def flattens(big: tuple[int, ...], small: tuple[int, ...]) -> bool:
    """Whether ``big`` is ``small`` with its leading dimensions multiplied together:
    [512,128] of [8,64,128]."""
    if len(small) < 2 or len(big) >= len(small) or not big:
        return False
    product = small[0]
    for j, x in enumerate(small[1:], start=2):
        product *= x
        if product >= big[0]:
            return product == big[0] and small[j:] == big[1:]
    return False


# --- the captured batch: evidence weighed, not rules applied in order ----------------

# Ops whose outputs are the step's inputs and labels as they arrive: tf.data's
# iterator (``IteratorGetNext``, tensorflow/core/kernels/data/iterator_ops.cc) and,
# on a GPU, the host-to-device copy of them (``SameWorkerRecvDone``,
# tensorflow/core/common_runtime/rendezvous_mgr.cc; Keras' data adapters feed
# ``model.fit`` through such an iterator).
_INPUT_OPS = re.compile(r"IteratorGetNext|RecvDone|parameter \d+$")
# Ops of a backward pass: TF's tape and graph gradients are scoped
# ``gradient_tape/``, ``gradients/`` (tensorflow/python/eager/backprop.py,
# ops/gradients_util.py), their kernels are ``*Grad``/``*Backprop*``; JAX names
# the backward pass ``transpose(jvp(...))``.
_GRADIENT_OPS = re.compile(r"(^|/)gradient_tape/|(^|/)gradients/|Grad|Backprop|transpose\(jvp")
# A loss's per-example values and labels ([N] or [N,1]): Keras names loss ops by
# the loss (``sparse_categorical_crossentropy/...``, ``compile_loss/...``).
_LOSS_OPS = re.compile(r"loss|entropy|squared_error|absolute_error|hinge", re.IGNORECASE)
# Kernels that stack a loop's per-iteration tensors on a new leading axis: a
# ``tf.TensorArray`` is a TensorList whose ``stack()``/``unstack()``/``gather()``
# run ``TensorListStack``/``TensorListFromTensor``/``TensorListGather``
# (tensorflow/python/ops/tensor_array_ops.py, list_ops.py; TF1's TensorArray
# kernels ``TensorArrayGatherV3``/``TensorArrayPack``), and Keras' recurrent
# loop on TensorFlow writes each time step's [B, ...] output to one
# (keras/src/backend/tensorflow/rnn.py): the leading dimension counts
# iterations (the time steps), the batch is the next. Reading one element
# (``TensorListGetItem``) or concatenating them does not add that axis.
_STACKED_KERNELS = re.compile(
    r"TensorList(?:Stack|FromTensor|Gather)|TensorArray(?:GatherV\d|Pack)"
)


def stacked(name: str) -> bool:
    """Whether ``name`` (an op's ``name:type``, or its name alone) is a kernel that
    stacks a loop's iterations: its type where given, else its name's last part."""
    kind = name.rsplit(":", 1)[1] if ":" in name else name.rsplit("/", 1)[-1]
    return _STACKED_KERNELS.fullmatch(kind) is not None


# A runner-up within this share of the winner's bytes is reported as a near tie.
NEAR_TIE = 0.8


@dataclass(frozen=True)
class BatchReading:
    """The batch size read off a capture, and why: ``batch`` None when the evidence
    is too weak or tied (``evidence`` says which); ``candidates``: (leading
    dimension, bytes of evidence) best first."""

    batch: int | None
    evidence: str
    candidates: tuple[tuple[int, float], ...] = ()


@dataclass
class _Score:
    inputs: float = 0.0  # bytes of input and label tensors led by the dimension
    forward: float = 0.0  # bytes of forward-pass tensors led by it
    backward: float = 0.0  # bytes of backward-pass tensors led by it
    neutral: float = 0.0  # bytes of transposed pairs led by it (evidence for neither)

    @property
    def activations(self) -> float:
        return self.forward + self.backward


def _swapped(found: tuple[int, ...], recorded: set[tuple[int, ...]]) -> bool:
    """Whether ``found``'s first two dimensions are recorded the other way round: a
    transpose (a recurrent layer's time-major copy [T,B,F] of [B,T,F], Keras'
    ``backend.rnn``; a matmul's transposed operand [128,256] beside an activation
    [256,128]). Either dimension may be the batch: the pair is evidence for neither."""
    return len(found) >= 2 and found[0] != found[1] and (found[1], found[0], *found[2:]) in recorded


def _unflattened(recorded: set[tuple[int, ...]]) -> dict[int, int]:
    """Leading dimensions that are a smaller one's flattening, each to the smaller:
    ``tf.tensordot`` (Keras 2's Dense on a rank-3 input) reshapes [8,64,128] to
    [512,128] before its matmul, so every tensor that model computes on is led by
    512 = 8 x 64 where the batch is 8: a tensor [d, x1, .., xn] recorded beside
    one [d x1 .. xj, x(j+1), .., xn] moves d x1 .. xj's evidence to d."""
    # Every flattening each shape has, (d x1 .. xj, (x(j+1), .., xn)) -> the
    # smallest d: one pass over the shapes instead of comparing every pair.
    flat: dict[tuple[int, tuple[int, ...]], int] = {}
    for small in recorded:
        if len(small) < 2 or small[0] <= 1:
            continue
        product = small[0]
        for j, x in enumerate(small[1:], start=2):
            if x == 1:  # the same product as before: ``flattens`` takes the first
                continue
            product *= x
            key = (product, small[j:])
            flat[key] = min(small[0], flat.get(key, small[0]))
    out: dict[int, int] = {}
    for big in recorded:
        found = flat.get((big[0], big[1:])) if big else None
        if found is not None and found < big[0]:
            out[big[0]] = min(found, out.get(big[0], big[0]))
    return out


def _scores(evidence: Evidence, weights: set[tuple[int, ...]]) -> dict[int, _Score]:
    """Per leading dimension of the tensors that are not weights, the bytes of its
    evidence by kind (each distinct shape and name, as text, classified once, in
    the order they first appear)."""
    # (shape, name) as text -> [bytes, tensors without bytes]; ``Evidence`` holds
    # the distinct (shape, op, name) rows, so this loops over those, not tensors.
    # A tensor without a shape or a name (no op, no type) is no evidence.
    grouped: dict[tuple[str, str], list[float]] = {}
    for shape, name, size, unsized in zip(
        evidence.shapes, evidence.names, evidence.sizes, evidence.unsized, strict=True
    ):
        if _missing(shape) or _missing(name):
            continue
        entry = grouped.setdefault((str(shape), str(name)), [0.0, 0.0])
        entry[0] += float(size)
        entry[1] += float(unsized)
    parsed = {shape: dims(shape) for shape, _ in grouped}
    recorded = {p for p in parsed.values() if p and p not in weights}
    # Every shape, weights' too: a flattened activation may have a kernel's shape.
    flat = _unflattened({p for p in parsed.values() if p})
    scores: dict[int, _Score] = {}
    for (shape, name), (size, unsized) in grouped.items():
        found = parsed[shape]
        if not found or found in weights:
            continue
        # A loop's stacked tensors are led by its iterations: the batch is next.
        along = len(found) >= 2 and stacked(name)
        lead = found[1] if along else found[0]
        if lead <= 1:
            continue
        score = scores.setdefault(flat.get(lead, lead), _Score())
        # Where the bytes are not recorded, the elements stand for them.
        nbytes = float(size) + float(unsized) * float(np.prod(found, dtype=np.float64))
        label = len(found) == 1 or (len(found) == 2 and found[1] == 1)
        if _INPUT_OPS.search(name) or (label and _LOSS_OPS.search(name)):
            score.inputs += nbytes
        elif not along and _swapped(found, recorded):
            score.neutral += nbytes
        elif _GRADIENT_OPS.search(name):
            score.backward += nbytes
        else:
            score.forward += nbytes
    return scores


def _one_sided(scores: dict[int, _Score], most: int = 3) -> str:
    """What weak evidence did see, for the user choosing ``--from-batch``: the
    leading dimensions with the most bytes in one pass only, or in transposed
    pairs (``_swapped``), largest first; empty where there are none."""
    seen = sorted(
        ((d, s) for d, s in scores.items() if s.activations + s.neutral > 0),
        key=lambda x: (-(x[1].activations + x[1].neutral), x[0]),
    )[:most]
    if not seen:
        return ""

    def where(score: _Score) -> str:
        parts = [
            name
            for name, value in (
                ("the forward pass", score.forward),
                ("the gradients", score.backward),
                ("transposed pairs", score.neutral),
            )
            if value > 0
        ]
        return " and ".join(parts)

    leads = "; ".join(f"{d} leads {_mib(s.activations + s.neutral)} of {where(s)}" for d, s in seen)
    return f" (seen: {leads})"


def _missing(value: object) -> bool:
    """None, NaN or NA: a value the table does not have."""
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.3g} MiB"


def find_batch(
    shapes: Iterable[object],
    ops: Iterable[object],
    weights: set[tuple[int, ...]],
    sizes: Iterable[float] | None = None,
    names: Iterable[object] | None = None,
) -> BatchReading:
    """``read_batch`` of the tensors given one by one (``Evidence.of_rows``)."""
    return read_batch(Evidence.of_rows(shapes, ops, sizes, names), weights)


def read_batch(tensors: Evidence, weights: set[tuple[int, ...]]) -> BatchReading:
    """The batch size a capture was made at, by the bytes of the tensors that carry it.

    Each leading dimension of a tensor that is not a weight is a candidate, its
    evidence the bytes of the tensors it leads (``sizes``; elements where not
    given), by kind (``names``: the op's name and type, else ``ops``):

    - the step's inputs and labels (``_INPUT_OPS``, a loss's [N] or [N,1]):
      whatever a step reads is led by its batch; when any are recorded, the
      dimension leading most of their bytes is the batch;
    - otherwise the forward pass and its gradients: every activation [B, ...]
      has a gradient [B, ...] (backprop keeps the shape of what it
      differentiates), so the batch leads tensors in both passes; the
      dimension leading most bytes across both is the batch. One that leads
      only one pass is no consistent evidence (temporaries of ops outside
      any model, [512,512] beside [256,1024], say nothing of a batch).

    A loop's stacked tensors (``stacked``: [iterations, B, ...]) count for
    their second dimension. A transposed pair (``_swapped``) counts for neither
    of its dimensions; a
    flattened batch's tensors count for the batch (``_unflattened``).
    A runner-up within ``NEAR_TIE`` of the winner is reported; an exact tie is
    not broken (no batch), nor is weak evidence. Last, an epoch's partial batch
    (``Dataset.batch`` keeps the remainder unless ``drop_remainder=True``, and
    Keras' data adapters do too) runs the same ops with the same trailing
    dimensions as the full one: a larger dimension with which the winner shares
    most of its ops is the batch (``_partial``)."""
    scores = _scores(tensors, weights)
    if any(s.inputs > 0 for s in scores.values()):
        kind = "inputs and labels"
        ranked = sorted(
            ((d, s.inputs) for d, s in scores.items() if s.inputs > 0), key=lambda x: -x[1]
        )
    else:
        kind = "activations and their gradients"
        ranked = sorted(
            ((d, s.activations) for d, s in scores.items() if s.forward > 0 and s.backward > 0),
            key=lambda x: -x[1],
        )
    if not ranked:
        return BatchReading(
            None,
            "weak: no input or label tensors, and no leading dimension shared by the "
            "forward pass and its gradients" + _one_sided(scores),
        )
    candidates = tuple(ranked)
    best, top = ranked[0]
    if len(ranked) > 1 and ranked[1][1] >= NEAR_TIE * top:
        # Near tie: the other kind of evidence decides where it can.
        close = [d for d, v in ranked if v >= NEAR_TIE * top]
        decided = max(close, key=lambda d: scores[d].activations)
        others = [d for d in close if d != decided]
        if any(scores[d].activations == scores[decided].activations for d in others):
            tied = ", ".join(str(d) for d in sorted(close))
            return BatchReading(None, f"tie: {tied} lead equal bytes of the {kind}", candidates)
        evidence = (
            f"{kind}: {_mib(scores[decided].inputs or scores[decided].activations)} led by "
            f"{decided}, a near tie with {', '.join(map(str, others))} decided by the "
            f"activations ({_mib(scores[decided].activations)})"
        )
        best = decided
    else:
        evidence = f"{kind}: {_mib(top)} led by {best}"
        if len(ranked) > 1 and ranked[1][1] >= 0.01 * top:
            evidence += f" (next: {ranked[1][0]}, {_mib(ranked[1][1])})"
    by_lead, by_rest = _leads(tensors, weights)
    larger = [
        d
        for d, shared in _sharing(best, by_rest).items()
        if d > best and d in by_lead and _partial(best, shared, by_lead)
    ]
    if larger:
        full = max(larger)
        evidence += f"; {best} is the partial last batch of {full}"
        best = full
    return BatchReading(best, evidence, candidates)


def batch_twins(
    shapes: Iterable[object], ops: Iterable[object], weights: set[tuple[int, ...]], batch: int
) -> tuple[int, ...]:
    """``evidence_twins`` of the tensors given one by one."""
    return evidence_twins(Evidence.of_rows(shapes, ops), weights, batch)


def evidence_twins(
    evidence: Evidence, weights: set[tuple[int, ...]], batch: int
) -> tuple[int, ...]:
    """The captured batch, then the smaller batch sizes the same ops also ran at
    (an epoch's last partial batch): tensors led by any of them grow."""
    by_lead, by_rest = _leads(evidence, weights)
    return (batch, *_twins(batch, by_lead, by_rest))


def _per_example(shapes: Iterable[tuple[int, ...]], batch: int) -> set[int]:
    """Per-example sizes of tensors led by the batch: products of their trailing dims."""
    sizes: set[int] = set()
    for found in shapes:
        if len(found) >= 2 and found[0] == batch:
            product = 1
            for d in found[1:]:
                product *= d
                sizes.add(product)
    sizes.discard(1)
    return sizes


def whole_examples(shapes: Iterable[tuple[int, ...]], batch: int) -> set[int]:
    """Elements per example of tensors led by the batch: the product of all their
    trailing dims (what a reshape of one keeps per example)."""
    sizes: set[int] = set()
    for found in shapes:
        if len(found) >= 2 and found[0] == batch:
            sizes.add(int(np.prod(found[1:], dtype=np.int64)))
    return sizes


def grows(
    found: tuple[int, ...],
    batch: int,
    examples: set[int],
    twins: tuple[int, ...] = (),
    wholes: set[int] | None = None,
    folds: frozenset[int] = frozenset(),
) -> str | None:
    """The basis on which a (non-weight) shape grows with the batch, else None;
    ``twins``: smaller batch sizes the capture also ran (``batch_twins``);
    ``wholes``: ``whole_examples`` of the same shapes (else ``examples``).

    A flattened tensor is a reshape of a batch-led one (``tf.reshape``, Keras'
    ``Flatten``, ``TimeDistributed`` folding [B, T, ...] into [B*T, ...]), and a
    reshape keeps the element count (tensorflow/core/kernels/reshape_op.h): its
    leading dimension is the batch times a per-example size seen elsewhere, and
    its elements per example are too. A leading dimension that only happens to be
    a multiple of the batch does not qualify: a per-channel vector ([384] at
    batch 64) or a kernel in cuDNN's filter layout ([256,96,5,5] at 64: the
    [5,5,96,256] kernel that TF's GPU convolutions transpose to OIHW,
    ``functor::TransformFilter``, tensorflow/core/kernels/conv_2d_gpu.h), whose
    elements per example (6, 9600) no batch-led tensor has. ``folds``: leading
    dimensions of a dense layer's folded rows (``folded_leads``): a 2-D tensor
    led by one is a reshape's, whatever its last dimension."""
    if batch in found or any(t in found for t in twins):
        return BATCH_DIM
    lead = found[0] if found else 0
    if len(found) == 2 and lead in folds:
        return FLATTENED
    if lead > batch and lead % batch == 0 and lead // batch in examples:
        elements = lead // batch
        for d in found[1:]:
            elements *= d
        if elements in (examples if wholes is None else wholes):
            return FLATTENED
    return None


# A dense layer on a [B, T, ..., in] input (``tf.tensordot``: Keras 2's Dense,
# Keras 3's ``ops.matmul`` on TensorFlow) runs as one MatMul over its rows.
_TENSORDOT = re.compile(r"(?:^|/)Tensordot/")


def folded_leads(
    allocations: pd.DataFrame, parsed: Iterable[tuple[int, ...] | None], leads: tuple[int, ...]
) -> frozenset[int]:
    """The leading dimensions of a dense layer's folded rows: ``tf.tensordot``
    reshapes its [B, T, ..., in] input to [B x T x ..., in] rows, multiplies, and
    reshapes the [rows, out] product back (tensorflow/python/ops/math_ops.py
    ``tensordot``); a reshape shares its input's buffer (reshape_op.h), so the
    2-D product and, under the tape, its input's gradient are the only tensors
    recorded with ``out`` or ``in`` last, and no batch-led tensor has their
    elements per example. A 2-D tensor made under a ``Tensordot`` scope whose
    lead is a batch size in ``leads`` (the batch, an epoch's partial one) times
    the dimensions after the batch of some recorded batch-led tensor is such
    rows: ``grows`` scales every 2-D tensor it leads."""
    if "op" not in allocations or not len(allocations):
        return frozenset()
    under = by_value(
        allocations["op"],
        lambda op: op.fillna("").astype(str).str.contains(_TENSORDOT).to_numpy(dtype=bool),
    )
    if not under.any():
        return frozenset()
    rows = {
        d[0]
        for d in map(dims, pd.unique(allocations["shape"].astype(object)[under]))
        if d and len(d) == 2
    }
    folded: set[int] = set()
    for shape in parsed:
        if shape and len(shape) >= 3 and shape[0] in leads:
            product = shape[0]
            for d in shape[1:-1]:
                product *= d
                folded.add(product)
    return frozenset(rows & folded)


def scratch_kinds(allocations: pd.DataFrame) -> np.ndarray:
    """Per allocation, the basis of a scratch buffer (a rank-1 byte array an op asks
    for as its workspace, not a tensor), else None.

    - A convolution's (``Conv2D*``, ``Conv3D*``, ``DepthwiseConv*``, their
      backprops, fused): cuDNN's (MIOpen's) workspace for the algorithm TF's
      autotuner picked (``AutotuneConv``/``LaunchConvOp`` in
      tensorflow/core/kernels/conv_ops_gpu.cc, sized by
      ``cudnnGetConvolutionForwardWorkspaceSize`` and its backward twins, up to
      ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB``). Its algorithms' workspaces hold
      transformed inputs or outputs (im2col, FFT, Winograd tiles), which grow
      with the images in the batch: sized per example; the other reading, for
      the bounds, is kept as captured (an algorithm whose workspace holds only
      the filter's transform, or the autotuner picking another at the new size).
    - A matrix multiplication's: cuBLAS/cuBLASLt's workspace, a fixed size
      (TF's ``BlasLt`` scratch limit, ``CUBLAS_WORKSPACE_CONFIG``): kept, its
      bounds cover growing.
    - A cuDNN recurrent kernel's (``CudnnRNN``, ``CudnnRNNV2``/``V3`` and their
      backprops, what Keras' LSTM and GRU run on a GPU): the forward kernel's
      reserve space, an output of the layer's dtype and shape [bytes / itemsize]
      (``CudnnRnnAllocatorInOutput``), which keeps every layer's gate
      activations at every time step of every sequence for the backward pass,
      and the workspace (``CudnnRnnAllocatorInTemp<uint8>``); cuDNN sizes both
      from the input's descriptors, one per time step of [batch, features]
      (``cudnnGetRNNTrainingReserveSize``, ``cudnnGetRNNWorkspaceSize``): sized
      per example, kept as captured the other reading.
    - Any other op's (a batch norm's cuDNN workspace): kept, its bounds cover
      growing."""
    n = len(allocations)
    out = np.full(n, None, dtype=object)
    if "dtype" not in allocations or not n:
        return out
    rank1 = by_value(
        allocations["shape"],
        lambda shape: shape.astype(str).str.fullmatch(r"\[\d+\]").to_numpy(dtype=bool),
    )
    scratch = by_value(
        allocations["dtype"], lambda dtype: dtype.isin(SCRATCH_DTYPES).to_numpy(dtype=bool)
    )
    # A recurrent kernel's reserve space has the layer's dtype, not bytes.
    rnn = np.zeros(n, dtype=bool)
    for column in ("op", "op_type"):
        if column in allocations:
            rnn |= by_value(allocations[column], _rnn_kernel)
    mask = (scratch | rnn) & rank1
    if not mask.any():
        return out
    # Only the scratch buffers' ops are read (a few rows).
    op = allocations["op"].astype(object)[mask]
    kind = allocations["op_type"].astype(object)[mask] if "op_type" in allocations else op
    text = kind.where(kind.notna(), op).fillna("").astype(str)
    conv = text.str.contains(_CONV).to_numpy(dtype=bool)
    blas = text.str.contains(_BLAS).to_numpy(dtype=bool)
    found = np.full(len(text), SCRATCH_KEPT, dtype=object)
    found[blas] = BLAS_WORKSPACE
    found[conv] = CONV_WORKSPACE
    found[rnn[mask]] = RNN_BUFFER
    out[mask] = found
    return out


def kernel_names(text: pd.Series) -> pd.Series:
    """Each op's kernel as its name says it: the last part of a name (a type is
    one part) less the ``_N`` TensorFlow adds to make a name unique in its scope
    (``MatMul_1``)."""
    last = text.fillna("").astype(str).str.rsplit("/", n=1).str[-1]
    return last.str.replace(r"_\d+$", "", regex=True)


def _rnn_kernel(text: pd.Series) -> np.ndarray:
    """Whether each op (a type, or a name) is one of cuDNN's recurrent kernels (``_RNN``)."""
    return kernel_names(text).str.fullmatch(_RNN).to_numpy(dtype=bool)


def by_value(column: pd.Series, rule: Callable[[pd.Series], np.ndarray]) -> np.ndarray:
    """``rule`` (a vectorised test of object values) of every row of ``column``: of
    each category once where the column has categories (a missing value as NaN)."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return rule(column.astype(object))
    values = [*column.cat.categories.to_numpy(dtype=object), np.nan]
    return rule(pd.Series(values, dtype=object))[column.cat.codes.to_numpy(dtype=np.int64)]


def _filters(allocations: pd.DataFrame) -> set[tuple[int, int, int]]:
    """The capture's convolution filters (``predict_workspace.filter_shapes``),
    each op named by its type where recorded, else by its name."""
    op = allocations["op"].astype(object)
    kind = allocations["op_type"].astype(object) if "op_type" in allocations else op
    names = kind.where(kind.notna(), op)
    found = allocations[["shape"]].assign(name=names).drop_duplicates()
    return filter_shapes(found["shape"].astype(object), found["name"])


def _distinct(
    shapes: np.ndarray, scratch: np.ndarray, requested: np.ndarray, no_op: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per allocation, the index of its (shape, scratch kind, request, op recorded or
    not) among the distinct ones; and per distinct one, its first allocation.
    ``shapes`` may be given as integer codes already (a categorical column's)."""
    codes = [
        column.astype(np.int64) if column.dtype.kind == "i" else pd.factorize(column)[0]
        for column in (shapes, scratch, requested)
    ]
    return first_ids(no_op.astype(np.int64), *codes)


def sizing(
    allocations: pd.DataFrame,
    batch: int,
    weights: set[tuple[int, ...]],
    requested: np.ndarray,
    example_bytes: Iterable[int] = (),
    twins: tuple[int, ...] = (),
) -> Sizing:
    """The one-capture rule for every allocation at captured batch ``batch``;
    ``example_bytes``: bytes per example of inputs known otherwise (XLA parameters);
    ``twins``: smaller batch sizes the capture also ran, whose tensors scale in
    proportion too (N / ``batch``).

    The rules read only an allocation's shape, request, scratch kind and whether
    an op made it (and sets and counts over all of them): each distinct
    combination is sized once and its sizes given to every allocation that has
    it (a step repeats its allocations)."""
    n = len(allocations)
    # The shapes as codes (a categorical column's), made objects only where read.
    shape_column = allocations["shape"]
    if isinstance(shape_column.dtype, pd.CategoricalDtype):
        shape_codes = shape_column.cat.codes.to_numpy(dtype=np.int64)
        shape_values = np.asarray(
            [*shape_column.cat.categories.to_numpy(dtype=object), np.nan], dtype=object
        )
        shape_keys = shape_codes
    else:
        shape_values = shape_column.astype(object).to_numpy()
        shape_codes = np.arange(len(shape_values), dtype=np.int64)
        shape_keys = pd.factorize(shape_values)[0].astype(np.int64)
    all_no_op = (
        allocations["op"].isna().to_numpy(dtype=bool)
        if "op" in allocations
        else np.zeros(n, dtype=bool)
    )
    all_scratch = scratch_kinds(allocations)
    all_requested = np.asarray(requested)
    inverse, first = _distinct(shape_keys, all_scratch, all_requested, all_no_op)
    # How many allocations each distinct combination stands for.
    repeats = np.bincount(inverse, minlength=len(first))
    shapes, scratch, no_op = shape_values[shape_codes[first]], all_scratch[first], all_no_op[first]
    requested = all_requested[first]
    parsed = [dims(s) for s in shapes]
    examples = _per_example((p for p in parsed if p and p not in weights), batch)
    wholes = whole_examples((p for p in parsed if p and p not in weights), batch)
    folds = folded_leads(allocations, parsed, (batch, *twins))
    fixed = requested.astype(np.float64)
    per = np.zeros(len(first))
    alt_fixed, alt_per = fixed.copy(), per.copy()
    basis = np.full(len(first), NO_BATCH_DIM, dtype=object)
    # Bytes per example of the growing tensors: an unshaped request that is the
    # batch times one of them (an input copied without its shape) grows too.
    growing_sizes: set[int] = set(example_bytes)
    filters = _filters(allocations) if (scratch == CONV_WORKSPACE).any() else set()
    maps = feature_maps(pd.unique(shape_values[shape_codes]), batch) if filters else set()
    for i, found in enumerate(parsed):
        if found is None:
            continue
        if scratch[i] is not None:
            basis[i] = scratch[i]
            scaled = fixed[i] / batch
            if scratch[i] == CONV_WORKSPACE:
                # A Winograd workspace's filter transform does not grow (predict_workspace).
                transform = winograd_fixed(int(requested[i]), batch, filters, maps)
                if transform is not None:
                    basis[i] = WINOGRAD_WORKSPACE
                    scaled = (fixed[i] - transform) / batch
                per[i], fixed[i] = scaled, float(transform or 0)
                alt_fixed[i], alt_per[i] = float(requested[i]), 0.0
            elif scratch[i] == RNN_BUFFER:
                per[i], fixed[i] = scaled, 0.0
                alt_fixed[i], alt_per[i] = float(requested[i]), 0.0
            else:
                alt_fixed[i], alt_per[i] = 0.0, scaled
            continue
        how = grows(found, batch, examples, twins, wholes, folds)
        if how is None:
            if found in weights:
                basis[i] = WEIGHT_SHAPE
            continue
        if found in weights:  # a weight's shape that holds the batch size too: ambiguous
            basis[i] = WEIGHT_SHAPE
            alt_fixed[i], alt_per[i] = 0.0, fixed[i] / batch
            continue
        basis[i] = how
        lead = batch if batch in found else next((t for t in twins if t in found), batch)
        if requested[i] % lead == 0:
            growing_sizes.add(int(requested[i]) // lead)
        per[i], fixed[i] = fixed[i] / batch, 0.0
        alt_fixed[i], alt_per[i] = 0.0, per[i]
    # An input is copied every step: a request made once outside any op is
    # something else (the whole data set: Keras' array adapter builds its
    # tf.data pipeline with Dataset.from_tensor_slices, which converts the array
    # to one tensor once, keras/src/trainers/data_adapters/array_data_adapter.py).
    recurring: Counter[float] = Counter()
    for i, found in enumerate(parsed):
        if found is None and no_op[i]:
            recurring[float(requested[i])] += int(repeats[i])
    for i, found in enumerate(parsed):
        if found is not None:
            continue
        scaled = requested[i] / batch
        leads = [b for b in (batch, *twins) if requested[i] % b == 0]
        if any(int(requested[i]) // b in growing_sizes for b in leads):
            basis[i] = UNSHAPED_MATCH
            per[i], fixed[i] = scaled, 0.0
            alt_fixed[i], alt_per[i] = float(requested[i]), 0.0
        elif no_op[i] and leads and recurring[float(requested[i])] > 1:
            basis[i] = UNSHAPED_INPUT
            per[i], fixed[i] = scaled, 0.0
            alt_fixed[i], alt_per[i] = float(requested[i]), 0.0
        else:
            basis[i] = UNSHAPED_KEPT
            alt_fixed[i], alt_per[i] = 0.0, scaled
    rule = inverse.astype(row_index_type(len(first)), copy=False)
    return Sizing(rule, fixed, per, alt_fixed, alt_per, basis)
