"""Which allocations grow with the batch (the batch the capture was made at is
``predict.evidence``'s).

The rules, each the model of a mechanism (docs/predict.md, "How"):

- A shape that is also a weight's (an inventoried variable, an XLA parameter
  the program updates, an allocation of a weight's or the optimizer's op) is
  a weight, its gradient or an optimizer slot: it does not grow.
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

import numpy as np
import pandas as pd

from traceparse.analysis.naming import first_ids

# What the batch a capture was made at is read from is ``predict.evidence``'s; this
# module's old name (``analysis.predict_batch``, an alias for a release) still
# answers those names: re-exported.
from traceparse.analysis.predict.evidence import BatchReading as BatchReading
from traceparse.analysis.predict.evidence import Evidence as Evidence
from traceparse.analysis.predict.evidence import batch_twins as batch_twins
from traceparse.analysis.predict.evidence import dims
from traceparse.analysis.predict.evidence import evidence_twins as evidence_twins
from traceparse.analysis.predict.evidence import find_batch as find_batch
from traceparse.analysis.predict.evidence import read_batch as read_batch
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

    def split(self, rows: int) -> tuple[Sizing, Sizing]:
        """The first ``rows`` allocations' sizing and the rest's, each with rules of
        its own (``per_replica`` and ``assign`` change one without the other)."""

        def part(rule: np.ndarray, envelopes: dict[int, np.ndarray]) -> Sizing:
            return Sizing(
                rule.copy(),
                self.rule_fixed.copy(),
                self.rule_per_example.copy(),
                self.rule_alt_fixed.copy(),
                self.rule_alt_per_example.copy(),
                self.rule_basis.copy(),
                envelopes,
            )

        head = {r: lines for r, lines in self.envelopes.items() if r < rows}
        tail = {r - rows: lines for r, lines in self.envelopes.items() if r >= rows}
        return part(self.rule[:rows], head), part(self.rule[rows:], tail)

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
