"""Predict each allocator's peak at another batch size (docs/predict.md).

From one capture: every allocation's request is sized at the new batch by
its shape (``predict_batch``), a linked XLA slab by its HLO buffers' shapes
(``predict_xla``), and the allocator's events are replayed in their captured
order through a model of the BFC allocator (``predict_bfc``), which places
every chunk; the bounds replay the captured counter with each chunk at its
smallest and largest (``predict_replay``). From two captures of the same program at two batch
sizes, allocations are matched by (host, allocator, step, op, occurrence) and
each request fitted affinely in the batch (``predict_fit``); the capture
nearer the target gives the order.

``Predictor.at(N)`` gives the table of ``Profile.predict``: a row per (host,
allocator) with the predicted peak, its bounds, its moment and its parts by
role; ``Predictor.breakdown(N)`` the parts by layer and role with their basis.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import held_bytes, requested_or_held
from traceparse.analysis.naming import (
    ACTIVATION,
    GRADIENT,
    NO_LAYER,
    OPTIMIZER_ROLES,
    OPTIMIZER_STATE,
    OPTIMIZER_UPDATE,
    OTHER,
    UNKNOWN,
    WEIGHT,
    KnownNames,
)
from traceparse.analysis.naming.optimizers import SLOTS, captured_optimizer
from traceparse.analysis.naming.place import place
from traceparse.analysis.peak import in_use
from traceparse.analysis.predict.batch import HLO, UNCERTAIN, Sizing, dims, sizing
from traceparse.analysis.predict.evidence import (
    BatchReading,
    Evidence,
    evidence_twins,
    flattens,
    read_batch,
)
from traceparse.analysis.predict.failed import FailedRequest, ran_before, with_failed
from traceparse.analysis.predict.fit import fit_two
from traceparse.analysis.predict.loops import LoopTemps, loop_temps
from traceparse.analysis.predict.low import LowBound, held_at_start
from traceparse.analysis.predict.parts import before_rows, buffer_places, roles_of, slab_rows
from traceparse.analysis.predict.replay import (
    Replayed,
    chunks,
    groups,
    largest_whole,
    live_at,
    replay,
    rounded,
    settled_of,
)
from traceparse.analysis.predict.simulate import (
    History,
    Simulated,
    calibrate,
    inventory_chunks,
    programs,
    simulate,
)
from traceparse.analysis.predict.weights import gradient_weights
from traceparse.analysis.predict.xla import (
    SlabBuffers,
    Spans,
    input_example_bytes,
    slab_sizing,
    xla_evidence,
)
from traceparse.errors import UsageError
from traceparse.tables.select import equal_to
from traceparse.tables.variables import CPU_POOL_BYTES

# The basis of a failed request's part (``failed``).
FAILED = "the request that failed (out of memory), asked again"
# The readings of a size: ``failed_chunks``' tuple.
POINT, LOW, HIGH = 0, 1, 2
ROLES = (WEIGHT, OPTIMIZER_STATE, OPTIMIZER_UPDATE, ACTIVATION, GRADIENT, OTHER, UNKNOWN)
ROLE_COLUMNS = {role: f"{role}_bytes" for role in ROLES}
# Ops of an optimizer's sparse update (an embedding's gradient rows).
SPARSE_UPDATES = ("UnsortedSegmentSum", "Unique", "UniqueV2", "ResourceScatterAdd", "ScatterAdd")
# oneDNN's CPU allocator sends requests under 256 KiB to a pool that emits no events.
POOLED_ALLOCATOR, POOLED_BELOW = "mklcpu", CPU_POOL_BYTES  # tables.variables says why


@dataclass
class Capture:
    """What prediction needs from one Profile (``Profile._predict_inputs``)."""

    allocations: pd.DataFrame
    timeline: pd.DataFrame
    ends: np.ndarray
    known: KnownNames
    shapes: dict[str, str]
    peak: pd.DataFrame
    breakdown: pd.DataFrame
    variables: pd.DataFrame | None
    xla_buffers: pd.DataFrame
    xla_parameters: pd.DataFrame
    # When each buffer of each linked slab is live (``predict_xla.slab_spans``).
    xla_fill: Spans
    # The recorded Python stacks (``Profile.stacks``), None without a source record.
    stacks: pd.DataFrame | None = None
    # The requests the capture ended in, refused for want of memory (``failed``).
    failed: tuple[FailedRequest, ...] = ()
    # The distinct names of the ops the capture's op events ran (``Profile.ops``'
    # compute counts), those whose outputs left no allocation record too: on a
    # CPU, oneDNN's pool takes every request under 256 KiB without one, so a small
    # model's optimizer may name itself only here (``optimizer``).
    op_names: frozenset[str] = frozenset()


def optimizer_named(capture: Capture) -> str | None:
    """The optimizer whose name scope the capture's ops carry (``captured_optimizer``):
    its allocations' ops, else the ops its op events ran (``Capture.op_names``),
    which hold the update ops whose outputs went to a pool without a record."""
    ops = capture.allocations["op"]
    names = ops.cat.categories if isinstance(ops.dtype, pd.CategoricalDtype) else ops.unique()
    return captured_optimizer(names) or captured_optimizer(capture.op_names)


def weight_shapes(capture: Capture, roles: np.ndarray) -> set[tuple[int, ...]]:
    """Shapes of the weights and optimizer slots: what the batch does not change.

    The optimizer's temporaries have its weights' shapes (a dense update works on
    the whole variable), except a sparse update's: an embedding lookup's gradient
    is ``tf.IndexedSlices`` whose values are one row per looked-up id, [B x T,
    64], and Keras' optimizers deduplicate them (``Unique`` +
    ``UnsortedSegmentSum``, keras/src/optimizers ``_deduplicate_sparse_grad``)
    before a scatter update. So where the optimizer made sparse updates, a shape
    that flattens another op's tensor ([64,80,64]) is such rows, not a weight's.
    Without a sparse update there are no such rows, and the shape is a weight's
    even where it happens to flatten an activation (a [512,128] kernel beside
    [8,64,128])."""
    found: set[tuple[int, ...]] = set()
    if capture.variables is not None and len(capture.variables):
        found |= {d for d in map(dims, capture.variables["shape"].astype(object)) if d}
    params = capture.xla_parameters
    if len(params):
        updated = params["updated"].fillna(False).to_numpy(dtype=bool)
        found |= {d for d in map(dims, params.loc[updated, "shape"].astype(object)) if d}
    shapes = capture.allocations["shape"].astype(object).to_numpy()
    optimizer = np.isin(roles, OPTIMIZER_ROLES)
    slots = {d for d in map(dims, shapes[optimizer]) if d} - found
    types = capture.allocations.loc[optimizer, "op_type"].astype(object)
    if not types.isin(SPARSE_UPDATES).any():
        return found | slots
    others = {d for d in map(dims, shapes[~optimizer]) if d} - found - slots
    return found | {s for s in slots if not any(flattens(s, o) for o in others)}


def _evidence(capture: Capture) -> Evidence:
    """Every recorded shape with its op, its bytes and the name to classify it by (op
    name and type): the allocations', then the XLA programs' (``xla_evidence``),
    as their distinct rows (``Evidence``): the allocations' from the table's
    category codes, so that no object is made per allocation."""
    a = capture.allocations
    extra = Evidence.of_rows(*xla_evidence(capture.xla_buffers, capture.xla_parameters))
    sizes = requested_or_held(a).astype(np.float64)
    columns = [a[c] if c in a else pd.Series(None, index=a.index, dtype=object) for c in _NAMED]
    if all(isinstance(c.dtype, pd.CategoricalDtype) for c in columns):
        codes = tuple(c.cat.codes.to_numpy(dtype=np.int64) for c in columns)
        values = tuple(c.cat.categories.to_numpy(dtype=object) for c in columns)
        return Evidence.of_codes(codes, values, sizes, _name) + extra
    shapes, ops, types = (c.astype(object) for c in columns)
    names = [_name(o, t) for o, t in zip(ops, types, strict=True)]
    return Evidence.of_rows(shapes, ops, sizes, names) + extra


# The allocations' columns a tensor's evidence reads (``_evidence``).
_NAMED = ("shape", "op", "op_type")


def _name(op: object, op_type: object) -> object:
    """What a tensor is classified by: its op's name and type, else its name."""
    return f"{op}:{op_type}" if isinstance(op_type, str) else op


# The name scope of a MirroredStrategy replica after the first (replica 0 has none).
_REPLICA = re.compile(r"(?:^|/)replica_(\d+)/")


def replicas(allocations: pd.DataFrame) -> int:
    """How many replicas of the step the capture ran: 1 + the replicas named
    ``replica_<k>/``.

    ``tf.distribute.MirroredStrategy`` runs the step once per device, each
    replica after the first under the name scope ``replica_<k>``
    (tensorflow/python/distribute/mirrored_run.py, ``_MirroredReplicaThread``),
    and splits each global batch ``fit`` is given evenly among them
    (``experimental_distribute_dataset``: ``rebatch`` to the global batch /
    replicas), so every tensor the capture records holds one replica's share."""
    names = {str(x) for x in allocations["op"].dropna().unique()}
    found = {int(m.group(1)) for name in names if (m := _REPLICA.search(name))}
    return 1 + len(found)


def captured_batch(
    capture: Capture, weights: set[tuple[int, ...]], evidence: Evidence | None = None
) -> BatchReading:
    """The global batch size the capture was made at (what ``fit`` was given: one
    replica's share read off the shapes, ``find_batch``, times the replicas,
    ``replicas``), and the evidence for it (``evidence``: ``_evidence(capture)``
    when already read). The one place the captured batch is found: a batch size
    recorded beside the capture enters here."""
    reading = read_batch(evidence if evidence is not None else _evidence(capture), weights)
    count = replicas(capture.allocations)
    if reading.batch is None or count == 1:
        return reading
    return BatchReading(
        reading.batch * count,
        f"{reading.evidence}, one of {count} replicas' share (MirroredStrategy)",
        reading.candidates,
    )


def _worst_cases(
    held_point: np.ndarray,
    worst: np.ndarray,
    read_high: np.ndarray,
    in_pool_point: np.ndarray,
    in_pool_high: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``Predictor.high_sizes`` from the point request's chunks (the point's and
    the largest handed out whole) and the high request's point chunks, in place."""
    worst[in_pool_point] = 0.0
    read_high[in_pool_high] = 0.0
    np.maximum(worst, held_point, out=worst)
    return worst, np.maximum(read_high, held_point, out=read_high)


class Predictor:
    """Sizes every allocation of ``base`` at any batch, and replays them."""

    def __init__(
        self,
        base: Capture,
        from_batch: int | None = None,
        other: Capture | None = None,
        other_batch: int | None = None,
    ) -> None:
        self.base = base
        a = base.allocations
        self.roles, self.layers = roles_of(a, base.known, base.shapes)
        self.weights = weight_shapes(base, self.roles)
        evidence = _evidence(base)
        reading = captured_batch(base, self.weights, evidence)
        if from_batch is None and reading.batch is None:
            raise UsageError(
                "could not find the batch size this capture was made at: "
                f"{reading.evidence}; give it (from_batch=, --from-batch)"
            )
        self.batch = int(from_batch if from_batch is not None else reading.batch)  # type: ignore[arg-type]
        if self.batch <= 0:
            raise UsageError(f"the captured batch size must be positive, got {self.batch}")
        # Batch sizes here are global (what fit is given); each tensor holds one
        # replica's share, which is what the shapes are read against (``replicas``).
        self.replicas = replicas(a)
        share = self.batch / self.replicas
        if share != int(share):
            raise UsageError(
                f"the captured batch {self.batch} does not split evenly among the capture's "
                f"{self.replicas} replicas; give the global batch fit was given (--from-batch)"
            )
        self.share = share = int(share)  # one replica's share of the batch
        self.found_batch = reading.batch
        # What the shapes say (``find_batch``), kept for a batch given or recorded.
        self.found_evidence = reading.evidence
        # Which evidence decided the batch (``find_batch``), or that it was given;
        # core.profile's predictor_of names a batch the capture recorded instead.
        self.batch_evidence = (
            reading.evidence
            if from_batch is None or from_batch == reading.batch
            else f"given (--from-batch); read off the capture: {reading.evidence}"
        )
        # Smaller batches the capture also ran (an epoch's partial last batch).
        self.twins = evidence_twins(evidence, self.weights, share)[1:]
        self.requested = requested_or_held(a).astype(np.float64)
        self.held = held_bytes(a).astype(np.float64)
        self.settled = settled_of(a, self.requested, self.held)
        # The requests the capture ended in are sized among its own tensors (``failed``).
        failed = [f for f in base.failed if f.event < len(base.timeline)]
        self.sizing = sizing(
            with_failed(a, failed) if failed else a,
            share,
            self.weights,
            np.concatenate([self.requested, [f.requested_bytes for f in failed]])
            if failed
            else self.requested,
            input_example_bytes(base.xla_parameters, share, self.weights),
            self.twins,
        )
        self.failed_sizing: Sizing | None = None
        if failed:
            self.sizing, self.failed_sizing = self.sizing.split(len(a))
        self.slabs: dict[int, SlabBuffers] = {}
        slab_sizing(
            self.sizing,
            a,
            base.xla_buffers,
            base.xla_fill,
            share,
            self.weights,
            self.requested,
            self.slabs,
            self.twins,
        )
        self.sizing.per_replica(self.replicas)
        if self.failed_sizing is not None:
            self.failed_sizing.per_replica(self.replicas)
        self.buffer_places = buffer_places(base.xla_buffers, base.known, base.shapes)
        self.other_batch: int | None = None
        if other is not None:
            self.other_batch = _other_batch(other, other_batch)
            fit_two(self.sizing, base, self.batch, other, self.other_batch, self.requested)
        self.rows = groups(base.timeline)
        # Per (host, allocator): its failed request, its row in ``failed_sizing``,
        # and the position of its moment among the group's events.
        self.failed: dict[tuple[object, object], tuple[FailedRequest, int, int]] = {}
        # The failed requests whose op the capture shows going on before (``ran_before``).
        self.seen_past_failure: set[tuple[object, object]] = set()
        for i, request in enumerate(failed):
            events = self.rows.get(request.key)
            if events is None:
                continue
            at = int(np.searchsorted(events, request.event))
            if at < len(events) and events[at] == request.event:
                self.failed[request.key] = (request, i, at)
                if ran_before(a, request, base.ends):
                    self.seen_past_failure.add(request.key)
        self.pooled = equal_to(a["allocator"], POOLED_ALLOCATOR)
        # What no run peaks under, and what another could spare (``low``): read
        # off the captured events, shared with a what-if of this capture.
        self.low_bound = LowBound(
            a,
            base.timeline,
            base.ends,
            self.rows,
            self.requested,
            self.held,
            self._in_pool(self.requested),
            self.sizing,
        )
        # The allocator model (analysis/bfc.py, predict_bfc.py) places every chunk at
        # the new sizes, after the history it rebuilds (the chunks held before the
        # capture, a warm-up step), with the free regions the capture shows that
        # history lacks (``calibrate``). Its replay at the captured requests, against
        # the captured counter, is ``simulated_peaks`` (docs/predict.md, measured).
        self.programs = programs(
            base.timeline, a, base.ends, self.rows, inventory_chunks(base.variables)
        )
        self._runs: dict[int, dict[tuple[object, object], Simulated]] = {}
        self._sized: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # ``high_sizes`` of the batch ``sizes`` last made, until read.
        self._high_sized: tuple[int, np.ndarray, np.ndarray] | None = None
        self._loops: dict[tuple[object, object], LoopTemps | None] = {}
        self._read: dict[tuple[object, object], pd.DataFrame] = {}
        self._weights_read: dict[tuple[object, object], pd.Series] = {}
        self._held: dict[tuple[object, object], dict[str, Any]] = {}

    @cached_property
    def _calibrated(self) -> dict[tuple[object, object], tuple[History, int]]:
        """Per (host, allocator): what the rebuilt history needs (``calibrate``), and
        the model's peak replaying the capture at its own requests. Made when first
        needed: a prediction at the captured batch needs no model."""
        captured = in_use(self.base.timeline)
        sent = self._sent(self.requested)
        out = {}
        for key, program in self.programs.items():
            history, run = calibrate(program, sent, self.held, captured[self.rows[key]])
            out[key] = (history, round(float(run.in_use.max())))
        return out

    @property
    def histories(self) -> dict[tuple[object, object], History]:
        return {key: found[0] for key, found in self._calibrated.items()}

    @property
    def ghosts(self) -> dict[tuple[object, object], tuple[int, ...]]:
        return {key: found[0].ghosts for key, found in self._calibrated.items()}

    @property
    def simulated_peaks(self) -> dict[tuple[object, object], int]:
        return {key: found[1] for key, found in self._calibrated.items()}

    def _in_pool(self, requests: np.ndarray) -> np.ndarray:
        """Where oneDNN's CPU allocator serves a request from its pool, not its BFC
        allocator (under 256 KiB): it leaves (or stays out of) the counter."""
        return self.pooled & (requests < POOLED_BELOW)

    def _sent(self, requests: np.ndarray) -> np.ndarray:
        """The requests that reach the BFC allocator (0: none)."""
        sent = np.rint(requests)
        sent[self._in_pool(requests)] = 0.0
        return sent

    def _replayed(self, held: np.ndarray) -> Replayed:
        """The captured counter with each allocation holding ``held`` (``replay``)."""
        base = self.base
        return replay(base.timeline, base.allocations, base.ends, self.held, held, self.rows)

    def _simulate(
        self, requests: np.ndarray, only: set[tuple[object, object]]
    ) -> dict[tuple[object, object], Simulated]:
        sent = self._sent(requests)
        found = self.histories
        return {
            key: simulate(self.programs[key], sent, found[key].ghosts, found[key].first_region)
            for key in only
        }

    def runs(self, batch: int) -> dict[tuple[object, object], Simulated]:
        """The allocator model at ``batch``, per (host, allocator). The last batch's
        is kept (its point and its breakdown ask in turn); one only, and dropped
        before the next is made: each is a counter as long as the timeline."""
        if batch not in self._runs:
            point, _, _ = self.sizing.at(batch)
            self._runs.clear()
            self._runs[batch] = self._simulate(point, set(self.programs))
        return self._runs[batch]

    def point(self, batch: int) -> tuple[Replayed, np.ndarray]:
        """The predicted counter after every event, and the bytes each allocation
        holds, at ``batch``: the allocator model's (at the captured batch, the
        capture's own), with each failed request asked again at its moment."""
        counters, held = self._point(batch)
        return self._with_failed(counters, batch, POINT), held

    def _point(self, batch: int) -> tuple[Replayed, np.ndarray]:
        """``point`` without the failed requests."""
        if batch == self.batch:  # the prediction at the captured batch is the capture
            held, _, _ = self.sizes(batch)
            return self._replayed(held), held
        runs = self.runs(batch)
        held = np.zeros(len(self.held))
        for key, simulated in runs.items():
            mine = self._mine(key)
            held[mine] = simulated.chunks[mine]
        return Replayed(dict(self.rows), {key: run.in_use for key, run in runs.items()}), held

    def sizes(self, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bytes each allocation holds at ``batch``: point, low, high (each chunk at
        its largest, every size at its larger reading). The last batch's are kept
        (read-only): a replay and its extremes ask for the same batch in turn."""
        if batch not in self._sized:
            self._sized.clear()  # before the next are made: each is millions of rows
            found = self._sizes(batch)
            for array in found:
                array.flags.writeable = False
            self._sized[batch] = found
        return self._sized[batch]

    def _sizes(self, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        point, low, high = self.sizing.at(batch)
        # At the captured batch every allocation keeps the chunk it got: the
        # prediction is the capture itself.
        captured = batch == self.batch
        settled = self.held if captured else self.settled
        held_point, _, worst = chunks(point, self.requested, settled, self.held)
        _, held_low, _ = chunks(low, self.requested, self.settled, self.held)
        read_high, _, held_high = chunks(high, self.requested, self.settled, self.held)
        in_pool_point, in_pool_high = self._in_pool(point), self._in_pool(high)
        if not captured:  # ``high_sizes`` needs these very chunks: made once, kept for it
            worst_cases = _worst_cases(held_point, worst, read_high, in_pool_point, in_pool_high)
            self._high_sized = (batch, *worst_cases)
        else:
            del worst, read_high
        held_point[in_pool_point] = 0.0
        held_low[self._in_pool(low)] = 0.0
        held_high[in_pool_high] = 0.0
        np.minimum(held_low, held_point, out=held_low)
        return held_point, held_low, np.maximum(held_high, held_point, out=held_high)

    def high_sizes(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """The two worst cases the high bound covers, bytes per allocation: the point
        sizes with every chunk as large as the allocator hands out whole (its
        placement unknown), and the larger reading of every size whose scaling is
        unknown with the point rule's chunks (``chunks``). Made with ``sizes`` where
        it made them (once: each is millions of rows)."""
        if self._high_sized is not None and self._high_sized[0] == batch:
            _, worst, read_high = self._high_sized
            self._high_sized = None
            return worst, read_high
        point, _, high = self.sizing.at(batch)
        held_point, _, worst = chunks(point, self.requested, self.settled, self.held)
        read_high, _, _ = chunks(high, self.requested, self.settled, self.held)
        return _worst_cases(held_point, worst, read_high, self._in_pool(point), self._in_pool(high))

    def _high(self, batch: int) -> Replayed:
        """The high bound's peak (``Replayed.peaks``): per group the peak of the
        larger of the two worst cases' counters (``high_sizes``) at each event."""
        # One worst case at a time, each kept as its peak alone (``Replayed.peaks``):
        # each replay is a few arrays as long as the timeline.
        worst, read_high = self.high_sizes(batch)
        placed = self._counter(worst, batch, HIGH).peaks()
        del worst
        return placed.larger(self._counter(read_high, batch, HIGH).peaks())

    def replay(self, batch: int) -> tuple[Replayed, Replayed, Replayed, np.ndarray]:
        _, low, _ = self.sizes(batch)
        point, held = self.point(batch)
        return point, self._counter(low, batch, LOW), self._high(batch), held

    def failed_chunks(self, batch: int) -> dict[tuple[object, object], tuple[int, int, int]]:
        """Per (host, allocator) that ended in a refused request: the chunk it asks
        for at ``batch`` (point, low, high), sized by its shape (``failed``). It
        never got one, so the point is its rounded request; low its smaller
        reading, high the largest chunk handed out whole for its larger."""
        if self.failed_sizing is None or not self.failed:
            return {}
        point, low, high = (rounded(x) for x in self.failed_sizing.at(batch))
        high = largest_whole(np.maximum(high, point))
        return {
            key: (round(float(point[i])), round(float(low[i])), round(float(high[i])))
            for key, (_, i, _) in self.failed.items()
        }

    def _counter(self, held: np.ndarray, batch: int, reading: int) -> Replayed:
        """The captured counter with each allocation holding ``held`` (``_replayed``)
        and each failed request's ``reading`` at ``batch`` (``_with_failed``)."""
        return self._with_failed(self._replayed(held), batch, reading)

    def _with_failed(self, counters: Replayed, batch: int, reading: int) -> Replayed:
        """``counters`` (whole, not ``peaks``) with each failed request's chunk at
        ``batch`` (``failed_chunks``, its ``reading``) added at its moment."""
        if not self.failed:
            return counters
        sized = self.failed_chunks(batch)
        values = dict(counters.bytes)
        for key, (_, _, at) in self.failed.items():
            if key in values and at < len(values[key]):
                grown = np.array(values[key], dtype=np.float64)
                grown[at] += sized[key][reading]
                values[key] = grown
        return Replayed(counters.events, values)

    def at(self, batch: int) -> pd.DataFrame:
        """One row per (host, allocator): the predicted peak at ``batch`` and its parts."""
        if batch <= 0:
            raise UsageError(f"the batch size to predict must be positive, got {batch}")
        point, low, high, sizes = self.replay(batch)
        timeline = self.base.timeline
        captured = _captured_peaks(self.base.peak)
        rows: list[dict[str, Any]] = []
        bounds = self.bounds(batch, (point, low, high, sizes))
        for key in self.rows:
            event, peak, lo, hi = bounds[key]
            parts = self._parts(key, event, peak, sizes, batch)
            basis = parts.groupby("basis")["bytes"].sum().sort_values(ascending=False)
            by_role = parts.groupby("role")["bytes"].sum()
            row: dict[str, Any] = {
                "host": key[0],
                "allocator": key[1],
                "batch_size": batch,
                "from_batch": self.batch,
                "found_batch": self.found_batch,
                "batch_evidence": self.batch_evidence,
                "other_batch": self.other_batch,
                "captured_peak_bytes": captured.get(key, {}).get("in_use_bytes"),
                "capacity_bytes": captured.get(key, {}).get("capacity_bytes"),
                "predicted_peak_bytes": peak,
                "low_bytes": min(lo, peak),
                "high_bytes": max(hi, peak),
                "step": _cell(timeline["step"], event),
                "op": _cell(timeline["op"], event),
                "event": event,
                "basis": "; ".join(f"{b} {int(v)}" for b, v in basis.items() if v)
                + self._loop_basis(key, sizes),
                # Tensors of fewer bytes per example were requests under the pool's
                # limit at the captured batch: not in the capture, not predicted.
                "pooled_below_bytes": (
                    -(-POOLED_BELOW // self.share) if key[1] == POOLED_ALLOCATOR else None
                ),
                **self.held_columns(key),
                "dropped_held_bytes": round(self.dropped_held(key)),
                **self.failed_columns(key, event, batch),
            }
            row |= {ROLE_COLUMNS[r]: int(by_role.get(r, 0)) for r in ROLES}
            row |= self.change_columns()
            rows.append(row)
        return pd.DataFrame(rows)

    def failed_place(self, key: tuple[object, object]) -> tuple[object, object]:
        """(layer, role) of ``key``'s failed request, by its op's name and shape
        (``naming.place``, as every allocation's)."""
        request = self.failed[key][0]
        rows = pd.DataFrame(
            {"op": [request.op], "op_type": [request.op_type], "shape": [request.shape]}
        )
        place(rows, self.base.known, self.base.shapes)
        return rows["layer"].iloc[0], rows["role"].iloc[0]

    def failed_columns(self, key: tuple[object, object], event: int, batch: int) -> dict[str, Any]:
        """The request ``key``'s capture ended in (``failed_request``: op, dtype,
        shape; None without one), its chunk at ``batch`` (``failed_request_bytes``),
        whether the predicted peak is its moment (``peak_at_failure``), and whether
        what the step does after it is missing from the capture
        (``unseen_after_failure``: its op never ran before in the capture)."""
        if key not in self.failed:
            return {
                "failed_request": None,
                "failed_request_bytes": None,
                "peak_at_failure": False,
                "unseen_after_failure": False,
            }
        request = self.failed[key][0]
        return {
            "failed_request": request.label(),
            "failed_request_bytes": self.failed_chunks(batch)[key][POINT],
            "peak_at_failure": request.event == event,
            "unseen_after_failure": self.unseen_after_failure(key),
        }

    def refused_batch(self, key: tuple[object, object]) -> int | None:
        """The batch ``key``'s program ran out of memory at: the captured one, where
        the capture ended in a refused request on it; else None."""
        return self.batch if key in self.failed else None

    def unseen_after_failure(self, key: tuple[object, object]) -> bool:
        """Whether ``key``'s capture ended in a refused request whose op it never
        saw go on (``ran_before``): what the step holds after that moment (the rest
        of the forward pass, the gradients, the update) is not in it, so a batch
        that gets past the request may peak later, higher than predicted."""
        return key in self.failed and key not in self.seen_past_failure

    def change_columns(self) -> dict[str, str | None]:
        """The program change predicted (``analysis.whatif``) and what it assumes,
        one assumption a line: none for the captured program at another batch size."""
        return {"change": None, "assumptions": None}

    def bounds(
        self, batch: int, runs: tuple[Replayed, Replayed, Replayed, np.ndarray] | None = None
    ) -> dict[tuple[object, object], tuple[int, int, int, int]]:
        """Per (host, allocator): (event, predicted peak, low, high) at ``batch``; the
        bounds are ``extremes`` widened to hold the predicted peak."""
        point, low, high, _ = runs if runs is not None else self.replay(batch)
        extremes = self.extremes(batch, (low, high))
        out = {}
        for key in self.rows:
            event, peak = point.peak(key)
            lo, hi = extremes[key]
            out[key] = (event, peak, min(lo, peak), max(hi, peak))
        return out

    def extremes(
        self, batch: int, runs: tuple[Replayed, Replayed] | None = None
    ) -> dict[tuple[object, object], tuple[int, int]]:
        """Per (host, allocator): the low and high peaks at ``batch``, without the
        allocator model (a capacity search asks them of many batch sizes).

        Low: no chunk slack, the
        peak of the step that peaks lowest (ops that run in parallel interleave
        differently from run to run, and from step to step: a real run peaks at
        least where its steps do), and the largest growing allocation (not a
        slab) live at that peak left out (TensorFlow may write an op's output
        into a dying input's buffer, or free it sooner, in another run), never
        under ``floor`` (what was held before the capture and what every step
        holds throughout, which no run goes under). High:
        the larger of every chunk as large as the allocator hands out whole (the
        placement unknown) and every size at its larger reading (the scaling
        unknown), each with the other at its point; what was held before the
        capture added once more (its chunks too). Where a recurrent model's
        gradient loop computes a weight's gradient per iteration (``loops``), how
        many of them are live at once is the executor's draw in each run: the low
        keeps one of each, the high ``parallel_iterations`` of each while the loop
        runs (at the point rule's chunks: the count at its worst, the placement
        at its point). Where the capture ended in a refused request (``failed``),
        every counter asks it again at its moment, and the low is at least that
        moment's with one allocation spared: every run asks it there."""
        _, low_sizes, _ = self.sizes(batch)
        low, high = (
            runs if runs is not None else (self._counter(low_sizes, batch, LOW), self._high(batch))
        )
        grows = self.sizing.grows()
        # A compiled program's slab is no op's output to forward.
        a = self.base.allocations
        if "xla_program" in a:
            grows &= a["xla_program"].isna().to_numpy(dtype=bool)
        out = {}
        steps = self.base.timeline["step"].to_numpy(dtype=np.float64, na_value=np.nan)
        read: tuple[np.ndarray, Replayed] | None = None
        for key in self.rows:
            _, hi = high.peak(key)
            temps = self.loops(key)
            if temps is not None:  # a recurrent loop's gradients in flight (``loops``)
                rows = low.events[key]
                low = Replayed(
                    low.events, {**low.bytes, key: low.bytes[key] - temps.excess(low_sizes)[rows]}
                )
                # The loop's count at its worst with the placement at the point rule's
                # chunks (each unknown at its worst with the other at its point).
                if read is None:
                    sized = self.high_sizes(batch)[1]
                    read = sized, self._counter(sized, batch, HIGH)
                gained = read[1].bytes[key] + temps.gain(read[0])[rows]
                hi = max(hi, round(float(gained.max())) if len(gained) else 0)
            low_event, lo = self.low_bound.lowest_program_step(key, low, steps)
            if low_event >= 0:
                lo = self.low_bound.one_left_out(key, low, low_event, steps, low_sizes, grows)
            if key in self.failed:  # every run asks the failed request, in its step
                moment = self.failed[key][0].event
                lo = max(lo, self.low_bound.one_left_out(key, low, moment, steps, low_sizes, grows))
            out[key] = (max(lo, self.low_bound.floor(key, steps)), hi + self._before(key))
        return out

    def floor(self, key: tuple[object, object], steps: np.ndarray | None = None) -> int:
        """``LowBound.floor`` under its old name (moved: ``low_bound.floor``)."""
        warnings.warn(
            "Predictor.floor is deprecated: use Predictor.low_bound.floor "
            "(the old spelling goes in a later release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.low_bound.floor(key, steps)

    def loops(self, key: tuple[object, object]) -> LoopTemps | None:
        """The per-iteration weight gradients of ``key``'s recurrent gradient loops
        (``loops.loop_temps``: up to ``parallel_iterations`` of each in flight, as
        few as one, by the executor's order in that run), None without any."""
        if key not in self._loops:
            self._loops[key] = loop_temps(
                self.base.allocations,
                self.base.ends,
                self._mine(key),
                self.weights,
                len(self.base.timeline),
            )
        return self._loops[key]

    def _loop_basis(self, key: tuple[object, object], sizes: np.ndarray) -> str:
        """The ``basis`` note of a loop's gradients in flight, for the bounds."""
        temps = self.loops(key)
        if temps is None:
            return ""
        return (
            f"; bounds: a recurrent loop's per-iteration temporaries, 1 to {temps.parallel} "
            f"iterations in flight (while_v2 parallel_iterations; {int(temps.weighty.sum())} "
            f"weight gradients per iteration, {temps.bytes_in_flight(sizes)} bytes at most)"
        )

    def _mine(self, key: tuple[object, object]) -> np.ndarray:
        """The allocations of ``key`` (``LowBound.mine``: once per key, read-only)."""
        return self.low_bound.mine(key)

    def read_before(self, key: tuple[object, object]) -> pd.DataFrame:
        """The program's own variables among what ``key`` held when the capture
        started, where the capture names none (no inventory, no compiled program's
        parameters): per layer, its weights read off their gradients in the last
        step (``weights_read``), and the captured optimizer's
        slots of them (``SLOTS``). Keras builds both before the first step (the
        layers' variables in ``build``, the slots in ``optimizer.build``), so the
        capture of a later step finds them held; columns layer, role, bytes."""
        if key not in self._read:
            self._read[key] = self._read_before(key)
        return self._read[key]

    def _named_before(self, key: tuple[object, object]) -> pd.DataFrame:
        """The capture's own breakdown rows that name bytes held before it on ``key``:
        inventoried variables and compiled programs' parameters."""
        b = self.base.breakdown
        return b[
            (b["host"].astype(object) == key[0])
            & (b["allocator"].astype(object) == key[1])
            & b["holder"].isin(("variable", "xla_parameter"))
        ]

    def weights_read(self, key: tuple[object, object]) -> pd.Series:
        """Bytes per layer of the weights ``key``'s last step computed gradients for
        (``weights.gradient_weights``, float32): what a capture that names no
        variable says of them. Read once per key."""
        if key not in self._weights_read:
            a = self.base.allocations
            mine = self._mine(key)
            steps = a["step"].to_numpy(dtype=np.float64, na_value=np.nan)
            found = pd.Series(dtype=np.int64)
            if np.isfinite(steps[mine]).any():
                pick = mine & (steps == np.nanmax(steps[mine]))
                elements = gradient_weights(a, pick, self.sizing.point_grows(), self.layers)
                rows = np.flatnonzero(elements)
                layers = pd.Series(self.layers[rows], dtype=object).fillna(NO_LAYER).astype(str)
                found = pd.Series(4 * elements[rows]).groupby(layers.to_numpy()).sum()
            self._weights_read[key] = found.astype(np.int64)
        return self._weights_read[key]

    def _read_before(self, key: tuple[object, object]) -> pd.DataFrame:
        none = pd.DataFrame({"layer": [], "role": [], "bytes": []})
        if len(self._named_before(key)) or len(self.base.xla_parameters):
            return none
        weights = self.weights_read(key)
        if not len(weights):
            return none
        optimizer = optimizer_named(self.base)
        slots = SLOTS[optimizer][0] if optimizer in SLOTS else 0.0
        frame = pd.DataFrame(
            {"layer": weights.index, "role": WEIGHT, "bytes": weights.to_numpy(dtype=np.int64)}
        )
        if slots:
            state = frame.assign(
                role=OPTIMIZER_STATE, bytes=(frame["bytes"] * slots).astype(np.int64)
            )
            frame = pd.concat([frame, state], ignore_index=True)
        return frame

    def held_columns(self, key: tuple[object, object]) -> dict[str, Any]:
        """What ``key`` held when the capture started (``held_before_bytes``, kept at
        every batch size), how much of it the model's own variables account for
        (``own_held_bytes``: the inventory's, the compiled program's parameters,
        or those ``read_before`` off their gradients), the rest
        (``other_held_bytes``), and the evidence that the
        process built other models first (``earlier_layer``, ``earlier_layers``:
        ``earlier_builds``). Read once per key."""
        if key in self._held:
            return self._held[key]
        held = self._before(key)
        named = self._named_before(key)
        own = float((named if len(named) else self.read_before(key))["bytes"].sum())
        early = earlier_builds(self.layers[self._mine(key)])
        self._held[key] = {
            "held_before_bytes": held,
            "own_held_bytes": int(min(own, held)),
            "other_held_bytes": int(held - min(own, held)),
            "earlier_layer": early[0] if early else None,
            "earlier_layers": early[1] if early else None,
        }
        return self._held[key]

    def dropped_held(self, key: tuple[object, object]) -> float:
        """Bytes of what ``key`` held when the capture started that the prediction
        leaves out: none here (a what-if's fresh process leaves some out)."""
        return 0.0

    def _before(self, key: tuple[object, object]) -> int:
        """Bytes the allocator held when the capture started (``held_at_start``)."""
        return held_at_start(self.base.timeline, self.rows[key])

    def breakdown(self, batch: int) -> pd.DataFrame:
        """Per (host, allocator, layer, role, basis): bytes at the predicted peak."""
        point, _, _, sizes = self.replay(batch)
        frames = []
        for key in self.rows:
            event, peak = point.peak(key)
            parts = self._parts(key, event, peak, sizes, batch)
            grouped = parts.groupby(["layer", "role", "basis"], dropna=False, sort=False)
            table = grouped[["bytes", "captured_bytes"]].sum().reset_index()
            table.insert(0, "allocator", key[1])
            table.insert(0, "host", key[0])
            frames.append(table.sort_values("bytes", ascending=False, kind="stable"))
        if not frames:
            return pd.DataFrame(
                columns=["host", "allocator", "layer", "role", "basis", "bytes", "captured_bytes"]
            )
        return pd.concat(frames, ignore_index=True)

    def slab_factors(self, row: int) -> np.ndarray | None:
        """Per HLO buffer of the slab at allocation ``row``: what its bytes are
        multiplied by (None: as sized; a what-if resizes them)."""
        return None

    def _parts(
        self,
        key: tuple[object, object],
        event: int,
        peak: int,
        sizes: np.ndarray,
        batch: int,
    ) -> pd.DataFrame:
        """What holds the predicted peak: the live allocations at their new sizes, and
        the bytes from before the capture (named as the capture's breakdown names them)."""
        a = self.base.allocations
        if event < 0:
            return pd.DataFrame(columns=["layer", "role", "basis", "bytes", "captured_bytes"])
        mine = (
            (a["host"].astype(object).to_numpy() == key[0])
            & (a["allocator"].astype(object).to_numpy() == key[1])
            & live_at(a, self.base.ends, event)
        )
        live = pd.DataFrame(
            {
                "layer": self.layers[mine],
                "role": self.roles[mine],
                "basis": self.sizing.rule_basis[self.sizing.rule[mine]],
                "bytes": np.rint(sizes[mine]).astype(np.int64),
                "captured_bytes": self.held[mine].astype(np.int64),
            }
        )
        rest = peak - int(live["bytes"].sum())
        rows = [int(i) for i in np.flatnonzero(mine) if int(i) in self.slabs]
        opened = [
            slab_rows(
                self.slabs[i],
                self.buffer_places,
                batch,
                self.batch,
                round(float(sizes[i])),
                int(self.held[i]),
                self.slab_factors(i),
            )
            for i in rows
        ]
        if opened:  # a slab as its HLO buffers (by their TF ops' layer and role) and its rest
            slabs = np.isin(np.flatnonzero(mine), rows)
            live = pd.concat([live[~slabs], *opened], ignore_index=True)
        failed = self._failed_part(key, event, batch)
        if failed is not None:
            live = pd.concat([live, failed], ignore_index=True)
            rest -= int(failed["bytes"].sum())
        before = before_rows(self.base.breakdown, key, rest, self.read_before(key))
        return pd.concat([live, before], ignore_index=True)

    def _failed_part(
        self, key: tuple[object, object], event: int, batch: int
    ) -> pd.DataFrame | None:
        """The failed request of ``key`` as a part of the peak at ``event`` (its
        moment), by its op's layer and role; None elsewhere."""
        if key not in self.failed or self.failed[key][0].event != event:
            return None
        _, i, _ = self.failed[key]
        assert self.failed_sizing is not None  # a failed request has its sizing
        layer, role = self.failed_place(key)
        rule = self.failed_sizing.rule_basis[self.failed_sizing.rule[i]]
        return pd.DataFrame(
            {
                "layer": [layer],
                "role": [role],
                "basis": [f"{FAILED}: {rule}"],
                "bytes": [self.failed_chunks(batch)[key][POINT]],
                # Asked for at the captured batch too, and refused.
                "captured_bytes": [self.failed_chunks(self.batch)[key][POINT]],
            }
        )


# A Keras layer's automatic name: its class in snake case, then ``_N`` for the N
# layers of that class built before it in the process (Keras 3 ``auto_name``,
# tf.keras ``backend.unique_object_name``; ``keras.backend.clear_session()``
# resets the count).
_AUTO_NAME = re.compile(r"^(?P<base>[a-z][a-z0-9_]*?)(?:_(?P<number>\d+))?$")


def earlier_builds(layers: np.ndarray) -> tuple[str, int] | None:
    """The evidence that the process built layers before this model: per layer
    name stem, the lowest number among the capture's layers of that stem (a name
    without a number is 0); where two stems or more start above 0 (one could be
    a user's own numbering, ``block_1``), the layer that starts highest and its
    number: ``("conv2d_20", 20)`` says 20 Conv2D layers were built before this
    model's first. None where the model's layers start at their first names."""
    names = pd.unique(pd.Series(layers, dtype=object).dropna().astype(str))
    lowest: dict[str, tuple[int, str]] = {}
    for name in names:
        if "/" in name or name.startswith("("):
            continue
        match = _AUTO_NAME.match(name)
        if match is None:
            continue
        number = int(match["number"] or 0)
        base = match["base"]
        if base not in lowest or number < lowest[base][0]:
            lowest[base] = (number, name)
    started = sorted((n, name) for n, name in lowest.values() if n > 0)
    if len(started) < 2:
        return None
    number, name = started[-1]
    return name, number


def _captured_peaks(peak: pd.DataFrame) -> dict[tuple[object, object], dict[str, Any]]:
    out: dict[tuple[object, object], dict[str, Any]] = {}
    for row in peak.itertuples(index=False):
        out[(row.host, row.allocator)] = {
            "in_use_bytes": int(row.in_use_bytes),
            "capacity_bytes": None if pd.isna(row.capacity_bytes) else int(row.capacity_bytes),
        }
    return out


def _cell(column: pd.Series, row: int) -> Any:
    if row < 0:
        return None
    value = column.iloc[row]
    return None if pd.isna(value) else (int(value) if column.name == "step" else str(value))


def _other_batch(other: Capture, given: int | None) -> int:
    if given is not None:
        return given
    roles, _ = roles_of(other.allocations, other.known, other.shapes)
    found = captured_batch(other, weight_shapes(other, roles))
    if found.batch is None:
        raise UsageError(
            f"could not find the batch size the second capture was made at: "
            f"{found.evidence}; give it (other_batch=, --with-batch)"
        )
    return found.batch


def make_predictor(
    base: Capture,
    from_batch: int | None,
    other: Capture | None,
    target: int | None,
    other_batch: int | None = None,
) -> Predictor:
    """A Predictor of ``base`` (at ``from_batch``, else found), fitted through
    ``other`` (at ``other_batch``, else found) when given; with two captures the
    one nearer ``target`` (in ratio) gives the order of events."""
    if other is None:
        return Predictor(base, from_batch)
    first = Predictor(base, from_batch, other, other_batch)
    if target is None or first.other_batch is None:
        return first
    if abs(np.log(target / first.other_batch)) < abs(np.log(target / first.batch)):
        return Predictor(other, first.other_batch, base, first.batch)
    return first


__all__ = [
    "HLO",
    "UNCERTAIN",
    "Capture",
    "Predictor",
    "Sizing",
    "make_predictor",
]
