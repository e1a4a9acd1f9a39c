"""Which allocations grow with the batch, and the batch size the capture was made at.

The rule, from the shapes the allocator recorded (docs/predict.md):

- A shape that is also a weight's (an inventoried variable, an XLA parameter
  the program updates, an allocation of a weight's or the optimizer's op) is
  a weight, its gradient or an optimizer slot: it does not grow.
- The captured batch size is the leading dimension most of the other
  tensors (inputs, activations, their gradients) share, counted by distinct
  op; given by the caller when known.
- A tensor grows in proportion to the batch when one of its dimensions is the
  batch (the leading one, or another for time-major layouts) or when its
  leading dimension is the batch times a per-example size seen elsewhere
  (flattened tensors: ``[589824]`` = 16 x 36864).
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
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

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
)
# Bases whose scaling is not read off a shape: their bounds cover both rules.
UNCERTAIN = frozenset({WEIGHT_SHAPE, UNSHAPED_MATCH, UNSHAPED_KEPT, UNSHAPED_INPUT})

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
    ``alt_fixed + alt_per_example * N`` (the other rule, for bounds), and ``basis``."""

    fixed: np.ndarray
    per_example: np.ndarray
    alt_fixed: np.ndarray
    alt_per_example: np.ndarray
    basis: np.ndarray
    # Rows whose point is the largest of several lines (an XLA slab: the bytes live
    # at each step of its program's schedule): row -> [[fixed, per_example], ...].
    envelopes: dict[int, np.ndarray] = field(default_factory=dict)

    def at(self, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Requested bytes at ``batch``: point, low, high (never below 0)."""
        point = np.maximum(self.fixed + self.per_example * batch, 0.0)
        for row, lines in self.envelopes.items():
            point[row] = max(float((lines[:, 0] + lines[:, 1] * batch).max()), 0.0)
        other = np.maximum(self.alt_fixed + self.alt_per_example * batch, 0.0)
        return point, np.minimum(point, other), np.maximum(point, other)


def _leads(
    shapes: Iterable[object], ops: Iterable[object], weights: set[tuple[int, ...]]
) -> tuple[dict[int, set[object]], dict[tuple[object, tuple[int, ...]], set[int]]]:
    """Per leading dimension of the non-weight shapes, the ops that recorded it; per
    (op, trailing dimensions), the leading dimensions it was recorded with."""
    by_lead: dict[int, set[object]] = {}
    by_rest: dict[tuple[object, tuple[int, ...]], set[int]] = {}
    for shape, op in zip(shapes, ops, strict=True):
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


def _unflattened(
    lead: int, by_lead: dict[int, set[object]], recorded: set[tuple[int, ...]]
) -> int | None:
    """A smaller batch that ``lead`` is the flattening of: a tensor [d, x1, .., xn]
    beside one recorded as [d * x1 * .. * xj, x(j+1), .., xn] (Keras 2's Dense on
    [8,64,128] computes on [512,128]); of several, the one leading the most ops."""
    bigs = [big for big in recorded if big[0] == lead]
    found = {
        small[0]
        for small in recorded
        if small[0] in by_lead and small[0] < lead and any(flattens(b, small) for b in bigs)
    }
    return max(found, key=lambda d: (len(by_lead[d]), -d), default=None)


def _untransposed(
    lead: int, by_lead: dict[int, set[object]], parsed: list[tuple[int, ...]]
) -> int | None:
    """The batch where ``lead`` leads time-major copies of batch-major tensors: of
    the tensors led by ``lead`` or by a dimension it swaps places with ([60,64,48]
    beside [64,60,48], a recurrent layer's transposes), the first one's (a step
    starts from its batch-major input)."""
    recorded = set(parsed)

    def swapped(s: tuple[int, ...]) -> bool:
        return len(s) >= 2 and s[0] != s[1] and (s[1], s[0], *s[2:]) in recorded

    pairs = [s for s in parsed if lead in s[:2] and s[0] in by_lead and swapped(s)]
    if not pairs or all(s[0] == lead for s in pairs):
        return None
    return pairs[0][0]


def find_batch(
    shapes: Iterable[object], ops: Iterable[object], weights: set[tuple[int, ...]]
) -> int | None:
    """The leading dimension most non-weight tensors share (counted once per op),
    the smallest among equals; unless it is a time-major copy's leading dimension
    (``_untransposed``) or the flattening of a smaller one (``_unflattened``), or a
    larger one ran most of the same ops with the same trailing dimensions: that
    one is the batch, the other a partial last batch (which may count more ops: a
    compiled program's 32 filters lead some of its buffers too)."""
    shapes = list(shapes)
    by_lead, by_rest = _leads(shapes, ops, weights)
    if not by_lead:
        return None
    counts = {lead: len(found) for lead, found in by_lead.items()}
    best = max(counts.values())
    if best < 2:  # one op is no evidence of a shared batch dimension
        return None
    chosen = min(d for d, c in counts.items() if c == best)
    parsed = [found for found in map(dims, shapes) if found]
    recorded = set(parsed)
    chosen = _untransposed(chosen, by_lead, parsed) or chosen
    chosen = _unflattened(chosen, by_lead, recorded) or chosen
    larger = [
        d
        for d, ops in _sharing(chosen, by_rest).items()
        if d > chosen and d in by_lead and _partial(chosen, ops, by_lead)
    ]
    return max(larger, default=chosen)


def batch_twins(
    shapes: Iterable[object], ops: Iterable[object], weights: set[tuple[int, ...]], batch: int
) -> tuple[int, ...]:
    """The captured batch, then the smaller batch sizes the same ops also ran at
    (an epoch's last partial batch): tensors led by any of them grow."""
    by_lead, by_rest = _leads(shapes, ops, weights)
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


def grows(
    found: tuple[int, ...], batch: int, examples: set[int], twins: tuple[int, ...] = ()
) -> str | None:
    """The basis on which a (non-weight) shape grows with the batch, else None;
    ``twins``: smaller batch sizes the capture also ran (``batch_twins``)."""
    if batch in found or any(t in found for t in twins):
        return BATCH_DIM
    lead = found[0] if found else 0
    if lead > batch and lead % batch == 0 and lead // batch in examples:
        return FLATTENED
    return None


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
    proportion too (N / ``batch``)."""
    n = len(allocations)
    shapes = allocations["shape"].astype(object).to_numpy()
    no_op = (
        allocations["op"].isna().to_numpy(dtype=bool)
        if "op" in allocations
        else np.zeros(n, dtype=bool)
    )
    parsed = [dims(s) for s in shapes]
    examples = _per_example((p for p in parsed if p and p not in weights), batch)
    fixed = requested.astype(np.float64)
    per = np.zeros(n)
    alt_fixed, alt_per = fixed.copy(), per.copy()
    basis = np.full(n, NO_BATCH_DIM, dtype=object)
    # Bytes per example of the growing tensors: an unshaped request that is the
    # batch times one of them (an input copied without its shape) grows too.
    growing_sizes: set[int] = set(example_bytes)
    for i, found in enumerate(parsed):
        if found is None:
            continue
        how = grows(found, batch, examples, twins)
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
    # something else (the whole data set, copied when a dataset is built).
    recurring = Counter(
        float(requested[i]) for i, found in enumerate(parsed) if found is None and no_op[i]
    )
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
    return Sizing(fixed, per, alt_fixed, alt_per, basis)
