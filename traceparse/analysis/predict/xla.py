"""Compiled programs at another batch: a slab sized from its HLO buffers' shapes.

A linked XLA slab (``docs/xla.md``) has no shape of its own; the program's
buffer assignment lists the logical buffers placed in it, with their shapes
and, from the entry computation's schedule, when each is live
(``analysis.xla``). A buffer grows with the batch when a dimension is the
batch (weights, their gradients, optimizer slots and scalars do not). At batch
N the slab is predicted as the most bytes live at any step of the schedule,
each growing buffer scaled, plus what the captured slab held beyond its own
peak (alignment, fragmentation). The peak's moment can move: at a small batch
the weights' gradients may fill the slab, at a large one the activations.
XLA may plan the slab anew at another size (docs/predict.md measures how far
that goes). The bounds also cover the plainer rule: the slab split in the
proportion of all its buffers' bytes that grow.

A library call's workspace on a GPU is a buffer too, a rank-1 byte array
without a batch dimension (``_workspaces``), sized as TensorFlow's own kernels'
workspaces are (``batch.scratch_kinds``): a convolution's grows per example at
the point and is kept in the other reading; any other call's (cuBLAS's,
hipBLASLt's) is kept at the point and grows in the other reading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceparse.analysis.predict.batch import (
    HLO,
    SCRATCH_DTYPES,
    Sizing,
    _per_example,
    dims,
    grows,
    whole_examples,
)
from traceparse.analysis.xla import _in_place, _intervals
from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla import allocation_kind

# A program's module id, "(203)": the same function compiled for another shape (an
# epoch's partial last batch) gets another, and its instructions the same names.
_MODULE_ID = re.compile(r"\(\d+\)$")

# XLA's GPU convolution rewriter names each cuDNN (on ROCm, MIOpen) convolution's
# custom call after its kind (xla/service/gpu/transforms/conv_rewriter.cc:
# cudnn-conv, cudnn-conv-bw-input, cudnn-conv-bw-filter, cudnn-conv-bias-activation,
# made unique with ".N"); its result is a tuple whose second element, u8[bytes],
# is the workspace of the algorithm the autotuner picked for these shapes
# (GpuConvAlgorithmPicker), the same cuDNN workspaces TensorFlow's kernels ask for.
_CONV_CALL = re.compile(r"cudnn-conv(-bw-input|-bw-filter|-bias-activation)?(\.\d+)?")

# (host, program, allocation index) -> (the allocation's size, [(logical buffer,
# first, last schedule position, bytes)])
Spans = dict[tuple[str, str, int], tuple[int, list[tuple[int, int, int, int]]]]


def slab_spans(
    programs: Sequence[tuple[str, XlaProgram]], wanted: set[tuple[str, str, int]]
) -> Spans:
    """When each buffer of the ``wanted`` temp allocations is live in its program."""
    found: Spans = {}
    for host, program in programs:
        for alloc in program.assignment.buffer_allocations:
            key = (host, program.name, alloc.index)
            if key not in wanted or allocation_kind(alloc) != "temp":
                continue
            placed = {a.logical_buffer_id: (a.offset, a.size) for a in alloc.assigned}
            spans = _intervals(program, set(placed))
            timed = _in_place([(b, spans[b]) for b in placed if b in spans], placed)
            found[key] = (
                int(alloc.size),
                [(b, start, end, placed[b][1]) for b, (start, end) in timed],
            )
    return found


def xla_evidence(
    buffers: pd.DataFrame, parameters: pd.DataFrame
) -> tuple[list[object], list[object], list[float], list[object]]:
    """Shapes, who made them, bytes, and the names to classify them by (the TF op of
    an HLO buffer; a parameter the program does not update is the step's input) of
    the programs' buffers and inputs, for finding the batch; an instruction is
    named by its function, whatever shape it was compiled for. Library calls'
    workspaces (``_workspaces``) are left out: they are no tensors."""
    shapes: list[object] = []
    ops: list[object] = []
    sizes: list[float] = []
    names: list[object] = []
    conv, other = _workspaces(buffers)
    if (conv | other).any():  # a library's workspace is led by its bytes, not a batch
        buffers = buffers[~(conv | other)]
    if len(buffers):
        shapes += list(buffers["shape"].astype(object))
        made = [
            f"{_MODULE_ID.sub('', str(p))}/{i}"
            for p, i in zip(
                buffers["program"].astype(object),
                buffers["instruction"].astype(object),
                strict=True,
            )
        ]
        ops += made
        sizes += list(buffers["size_bytes"].to_numpy(dtype=np.float64, na_value=np.nan))
        names += [
            f"{t}:{k}" if isinstance(t, str) else m
            for t, k, m in zip(
                buffers["tf_op"].astype(object),
                buffers["tf_op_type"].astype(object),
                made,
                strict=True,
            )
        ]
    if len(parameters):
        inputs = parameters[~parameters["updated"].fillna(False).to_numpy(dtype=bool)]
        shapes += list(inputs["shape"].astype(object))
        made = [
            f"{_MODULE_ID.sub('', str(p))}/parameter {n}"
            for p, n in zip(
                inputs["program"].astype(object), inputs["parameter_number"], strict=True
            )
        ]
        ops += made
        names += made
        sizes += list(inputs["size_bytes"].to_numpy(dtype=np.float64, na_value=np.nan))
    return shapes, ops, sizes, names


def input_example_bytes(
    parameters: pd.DataFrame, batch: int, weights: set[tuple[int, ...]]
) -> set[int]:
    """Bytes per example of the programs' inputs (parameters not updated, led by the batch)."""
    if parameters.empty:
        return set()
    found: set[int] = set()
    inputs = parameters[~parameters["updated"].fillna(False).to_numpy(dtype=bool)]
    for shape, size in zip(inputs["shape"].astype(object), inputs["size_bytes"], strict=True):
        d = dims(shape)
        if d and d not in weights and batch in d and not pd.isna(size) and int(size) % batch == 0:
            found.add(int(size) // batch)
    return found


def slab_sizing(
    sizing: Sizing,
    allocations: pd.DataFrame,
    buffers: pd.DataFrame,
    spans: Spans,
    batch: int,
    weights: set[tuple[int, ...]],
    requested: np.ndarray,
    slabs: dict[int, SlabBuffers],
    twins: tuple[int, ...] = (),
) -> None:
    """Size each linked slab of ``allocations`` from its buffers (in place); ``slabs``
    gets, per slab row, its buffers' liveness for the breakdown at another batch.

    Point: the most bytes live at any schedule step (``spans``) with the growing
    buffers scaled, plus the slab's bytes beyond its captured peak. The other
    rule, for bounds: the slab split in the proportion of all its buffers'
    bytes that grow."""
    if buffers.empty or "xla_program" not in allocations:
        return
    linked = allocations["xla_program"].notna() & allocations["xla_allocation_index"].notna()
    if not linked.any():
        return
    conv, other = _workspaces(buffers)
    # A workspace's size is no tensor's: its bytes never read as a flattened batch.
    shaped = _growing(buffers, batch, weights, twins) & ~(conv | other)
    # The point grows the convolutions' workspaces; the other reading the rest.
    growing = shaped | conv
    shares = _growing_shares(buffers, growing)
    alt_shares = _growing_shares(buffers, shaped | other) if (conv | other).any() else shares
    by_buffer = dict(zip(_keys(buffers, "logical_buffer"), growing, strict=True))
    hosts = allocations["host"].astype(object).to_numpy()
    programs = allocations["xla_program"].astype(object).to_numpy()
    indices = allocations["xla_allocation_index"].to_numpy(dtype=np.float64, na_value=np.nan)
    rows, fixed, per, alt_fixed, alt_per = [], [], [], [], []
    for i in np.flatnonzero(linked.to_numpy(dtype=bool)):
        key = (hosts[i], programs[i], int(indices[i]))
        share = shares.get(key)
        if share is None:
            continue
        size = float(requested[i])
        rows.append(int(i))
        fixed.append(size * (1.0 - share))
        per.append(size * share / batch)
        alt = alt_shares.get(key, share)
        alt_fixed.append(size * (1.0 - alt))
        alt_per.append(size * alt / batch)
        found = spans.get(key)
        if found is not None and found[1]:
            sizing.envelopes[int(i)] = _envelope(found[1], key, by_buffer, size, batch)
            slabs[int(i)] = SlabBuffers.of(found[1], key, by_buffer, size, batch)
    if rows:  # both rules the slab split by its buffers (alike but for workspaces)
        sizing.assign(
            np.asarray(rows),
            np.asarray(fixed),
            np.asarray(per),
            np.asarray(alt_fixed),
            np.asarray(alt_per),
            HLO,
        )


@dataclass
class SlabBuffers:
    """One slab's buffers over its program's schedule, to say which hold it at batch N."""

    key: tuple[object, object, int]  # (host, program, allocation index)
    buffers: np.ndarray  # logical buffer ids
    start: np.ndarray
    end: np.ndarray
    size: np.ndarray
    growing: np.ndarray
    batch: int  # the captured batch
    rest: float  # the slab's bytes beyond its captured peak

    @classmethod
    def of(
        cls,
        spans: list[tuple[int, int, int, int]],
        key: tuple[object, object, int],
        growing: dict[tuple[object, object, int], bool],
        size: float,
        batch: int,
    ) -> SlabBuffers:
        table = np.array(spans, dtype=np.int64).reshape(-1, 4)
        grows = np.array([growing.get((key[0], key[1], int(b)), False) for b in table[:, 0]])
        found = cls(
            key, table[:, 0], table[:, 1], table[:, 2], table[:, 3].astype(float), grows, batch, 0.0
        )
        found.rest = max(size - found._live(batch)[1], 0.0)
        return found

    def _live(self, batch: int) -> tuple[np.ndarray, float]:
        """The buffers live at the schedule step with the most bytes at ``batch``,
        their bytes there, and those bytes' sum."""
        scaled = np.where(self.growing, self.size * batch / self.batch, self.size)
        top = int(self.end.max()) + 2 if len(self.end) else 1
        delta = np.zeros(top)
        np.add.at(delta, self.start, scaled)
        np.add.at(delta, self.end + 1, -scaled)
        at = int(np.argmax(np.cumsum(delta)))
        live = (self.start <= at) & (at <= self.end)
        return np.where(live, scaled, 0.0), float(scaled[live].sum())

    def at(self, batch: int) -> tuple[np.ndarray, float]:
        """Bytes of each buffer at the slab's peak at ``batch`` (0: not live), and the
        rest of the slab (its bytes beyond its buffers' peak)."""
        held, _ = self._live(batch)
        return held, self.rest


def _envelope(
    spans: list[tuple[int, int, int, int]],
    key: tuple[object, object, int],
    growing: dict[tuple[object, object, int], bool],
    size: float,
    batch: int,
) -> np.ndarray:
    """[[fixed, per example]] of the bytes live at each schedule step, the slab's
    bytes beyond its captured peak added to each."""
    top = max(end for _, _, end, _ in spans) + 2
    fixed = np.zeros(top)
    grown = np.zeros(top)
    for b, start, end, n in spans:
        target = grown if growing.get((key[0], key[1], b), False) else fixed
        target[start] += n
        target[end + 1] -= n
    fixed, grown = np.cumsum(fixed), np.cumsum(grown)
    rest = max(size - float((fixed + grown).max()), 0.0)
    lines = np.unique(np.stack([fixed + rest, grown / batch], axis=1), axis=0)
    return lines


def _keys(buffers: pd.DataFrame, last: str) -> list[tuple[object, object, int]]:
    return list(
        zip(
            buffers["host"].astype(object),
            buffers["program"].astype(object),
            buffers[last].astype(int),
            strict=True,
        )
    )


def _growing(
    buffers: pd.DataFrame, batch: int, weights: set[tuple[int, ...]], twins: tuple[int, ...]
) -> np.ndarray:
    """Whether each HLO buffer's shape grows with the batch (a program compiled for
    a partial last batch, ``twins``, grows in proportion too)."""
    parsed = [dims(s) for s in buffers["shape"].astype(object)]
    examples = _per_example((p for p in parsed if p and p not in weights), batch)
    wholes = whole_examples((p for p in parsed if p and p not in weights), batch)
    return np.array(
        [
            p is not None
            and p not in weights
            and grows(p, batch, examples, twins, wholes) is not None
            for p in parsed
        ],
        dtype=bool,
    )


def _workspaces(buffers: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per HLO buffer: whether it is a convolution's workspace, and whether it is
    another library call's: a rank-1 byte array a custom call makes (its result
    tuple's last element), the convolutions' named ``_CONV_CALL``."""
    none = np.zeros(len(buffers), dtype=bool)
    if buffers.empty or not {"instruction", "opcode", "dtype", "shape"} <= set(buffers):
        return none, none
    calls = buffers["instruction"].astype(object).fillna("").astype(str)
    conv = calls.str.fullmatch(_CONV_CALL).to_numpy(dtype=bool)
    made = conv | (buffers["opcode"].astype(object) == "custom-call").to_numpy(dtype=bool)
    if not made.any():
        return none, none
    bytes_ = buffers["dtype"].astype(object).isin(SCRATCH_DTYPES).to_numpy(dtype=bool)
    rank1 = buffers["shape"].astype(str).str.fullmatch(r"\[\d+\]").to_numpy(dtype=bool)
    scratch = made & bytes_ & rank1
    return scratch & conv, scratch & ~conv


def _growing_shares(
    buffers: pd.DataFrame, growing: np.ndarray
) -> dict[tuple[object, object, int], float]:
    """Per (host, program, allocation index): the share of its buffers' bytes that grows."""
    sizes = buffers["size_bytes"].to_numpy(dtype=np.float64, na_value=0.0)
    total: dict[tuple[object, object, int], float] = {}
    grown: dict[tuple[object, object, int], float] = {}
    for key, size, grows_ in zip(_keys(buffers, "allocation_index"), sizes, growing, strict=True):
        total[key] = total.get(key, 0.0) + size
        grown[key] = grown.get(key, 0.0) + (size if grows_ else 0.0)
    return {k: grown[k] / t for k, t in total.items() if t > 0}
