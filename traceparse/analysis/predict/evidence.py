"""The batch size a capture was made at, weighed off its tensors (``read_batch``).

The captured batch size is the candidate with the most bytes of evidence: the
step's input and label tensors where recorded, else the tensors it leads in both
the forward pass and its gradients (a loop's stacked tensors, [iterations, B,
...], by their second dimension); weak or tied evidence gives none, and the
caller asks for it (docs/predict.md, "How"). Smaller batches the same ops also
ran at (an epoch's partial last batch) are its twins (``evidence_twins``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from traceparse.analysis.naming import first_ids

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


# --- what the tensors are: inputs, gradients, losses, loop stacks -------------------

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

    @property
    def seen(self) -> float:
        """Bytes of every tensor it leads but inputs and labels."""
        return self.activations + self.neutral


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
        ((d, s) for d, s in scores.items() if s.seen > 0), key=lambda x: (-x[1].seen, x[0])
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

    leads = "; ".join(f"{d} leads {_mib(s.seen)} of {where(s)}" for d, s in seen)
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
