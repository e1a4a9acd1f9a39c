"""The low bound's readings of a capture's events (``Predictor.extremes``): what
no run of the program peaks under (``LowBound.floor``), the steps that ran the
step function (``LowBound.program_steps``), and what another run could spare at
a moment (``LowBound.could_skip``, ``LowBound.one_left_out``).

These read which allocations outlive a step, which ops could forward an input's
buffer, and which steps ran the program: facts of the captured events, not of
the sizes a prediction gives them. A what-if (``analysis.whatif``) resizes the
requests and keeps them, so it shares its Predictor's LowBound.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.peak import in_use
from traceparse.analysis.predict.batch import Sizing
from traceparse.analysis.predict.replay import Replayed, live_change, rounded
from traceparse.analysis.predict.simulate import column_at
from traceparse.tables.select import equal_to, row_index_type

Key = tuple[object, object]
# Moments of a step the low bound tries (``LowBound.one_left_out``): each costs a
# pass over the allocations.
_MOMENTS = 64
# A row after every other (no such event).
_NEVER = np.iinfo(np.int64).max // 4
# Steps ``LowBound.floor`` weighs at once (a block is allocations x steps booleans).
_STEP_BLOCK = 64


def allocations_of(allocations: pd.DataFrame, key: Key) -> np.ndarray:
    """Which allocations are (host, allocator) ``key``'s, read-only."""
    found = equal_to(allocations["host"], key[0], False)
    found &= equal_to(allocations["allocator"], key[1], False)
    found.flags.writeable = False
    return found


def held_at_start(timeline: pd.DataFrame, events: np.ndarray) -> int:
    """Bytes an allocator held when the capture started (its reservation aside):
    the counter at its first event (``events``, its timeline rows) less that
    event's change."""
    if not len(events):
        return 0
    first = int(events[0])
    delta = timeline["delta_bytes"].iloc[first]
    reserved = timeline["reserved_bytes"].iloc[first]
    before = float(in_use(timeline)[first]) - (0.0 if pd.isna(delta) else float(delta))
    return int(max(before - (0.0 if pd.isna(reserved) else float(reserved)), 0.0))


class LowBound:
    """The low bound's readings of one capture's events, per (host, allocator),
    each made once. ``rows``: each group's timeline rows; ``requested``, ``held``:
    per allocation, its request and its captured chunk; ``in_pool``: whether
    oneDNN's pool serves the request (it never reaches the counter); ``sizing``:
    which requests grow with the batch."""

    def __init__(
        self,
        allocations: pd.DataFrame,
        timeline: pd.DataFrame,
        ends: np.ndarray,
        rows: dict[Key, np.ndarray],
        requested: np.ndarray,
        held: np.ndarray,
        in_pool: np.ndarray,
        sizing: Sizing,
    ) -> None:
        self.allocations = allocations
        self.timeline = timeline
        self.ends = ends
        self.rows = rows
        self.requested = requested
        self.held = held
        self.in_pool = in_pool
        self.sizing = sizing
        self._mines: dict[Key, np.ndarray] = {}
        self._floors: dict[Key, int] = {}
        self._skippable: dict[Key, np.ndarray] = {}
        self._programs: dict[Key, np.ndarray | None] = {}
        self._op_runs: dict[Key, tuple[np.ndarray, ...]] = {}

    def mine(self, key: Key) -> np.ndarray:
        """The allocations of ``key`` (``allocations_of``, once per key)."""
        if key not in self._mines:
            self._mines[key] = allocations_of(self.allocations, key)
        return self._mines[key]

    @cached_property
    def _timeline_ops(self) -> np.ndarray:
        """Each timeline row's op as a code to compare rows by (``_next_op``): a
        missing op equals no other row's, as NaN does not."""
        column = self.timeline["op"]
        if not isinstance(column.dtype, pd.CategoricalDtype):
            return column.astype(object).to_numpy()
        kind = row_index_type(len(column))  # -len(column) at the least
        codes = column.cat.codes.to_numpy(dtype=kind, copy=True)  # written below
        missing = np.flatnonzero(codes < 0)
        codes[missing] = -1 - missing
        return codes

    def floor(self, key: Key, steps: np.ndarray | None = None) -> int:
        """Bytes no run of this program peaks under, at any batch: the most over the
        captured steps of what the allocator still held from before the capture
        when the step started, plus the allocations live through that whole step
        whose size does not depend on the batch (both readings kept: variables,
        optimizer slots, a step's fixed buffers), each at its rounded request (0
        where oneDNN's pool takes it). Without steps: what was held before the
        capture.

        What was held before the capture was made before any step ran: model
        building, the optimizer's slots, a dataset's copy. That is the same
        sequence of requests at every batch size, and the BFC allocator is
        deterministic for a given sequence (best fit over size-ordered bins, split
        when the free chunk is at least twice the rounded request:
        ``BFCAllocator::FindChunkPtr``, tensorflow/core/common_runtime/
        bfc_allocator.cc), so another run of the program holds the same chunks
        when its first step starts. The allocations live through a whole step are
        in use at each of its moments, so the step's peak is at least their sum
        with the bytes held before (the low bound replays them without slack).

        ``steps``: each timeline row's step, where the caller has them."""
        if key not in self._floors:
            if steps is None:
                steps = self.timeline["step"].to_numpy(dtype=np.float64, na_value=np.nan)
            self._floors[key] = self._floor(key, steps)
        return self._floors[key]

    def _floor(self, key: Key, steps: np.ndarray) -> int:
        events = self.rows[key]
        before = held_at_start(self.timeline, self.rows[key])
        if not len(events):
            return before
        timeline = self.timeline
        marked = events[~np.isnan(steps[events])]
        if not len(marked):
            return before
        # Each step's first and last event (timeline rows); steps may overlap (a
        # dataset's prefetch or an eager op marked with another step). A few hundred
        # steps: the hash table sized for them, not for the rows.
        step_of, distinct = pd.factorize(steps[marked], size_hint=1024)
        firsts = np.full(len(distinct), len(timeline), dtype=np.int64)
        lasts = np.full(len(distinct), -1, dtype=np.int64)
        # ``marked`` ascends: the last write of each step is its last row, and
        # written back to front its first (as ``first_ids``; ufunc.at is slower).
        firsts[step_of[::-1]] = marked[::-1]
        lasts[step_of] = marked
        del step_of, marked
        # Held from before the capture when each step starts: the counter just before
        # its first event, less the reservation and the capture's own allocations
        # live then (a chunk from before the capture may be freed during it).
        delta = column_at(timeline, "delta_bytes", firsts)
        reserved = column_at(timeline, "reserved_bytes", firsts)
        used = in_use(timeline)[firsts].astype(np.float64) - delta - reserved
        mine = self.mine(key)
        start = self.allocations["alloc_event"].to_numpy(dtype=np.int64)[mine]
        end = self.ends[mine]
        end = np.where(end == STILL_LIVE, len(timeline), end)
        # The capture's own allocations' bytes live after each row (as captured).
        live = live_change(start, end, self.held[mine], len(timeline))
        np.cumsum(live, out=live)
        kept = np.maximum(used - np.where(firsts > 0, live[np.maximum(firsts - 1, 0)], 0.0), 0.0)
        sizing = self.sizing
        fixed = ~sizing.grows()[mine]
        if sizing.envelopes:
            fixed[np.isin(np.flatnonzero(mine), list(sizing.envelopes))] = False
        fixed &= ~self.in_pool[mine]
        # Only what outlives some step can be live through one: among the steps that
        # start at or after an allocation, the earliest end must come before its own.
        order = np.argsort(firsts, kind="stable")
        soonest = np.minimum.accumulate(lasts[order][::-1])[::-1]
        after = np.searchsorted(firsts[order], start)
        spans = fixed & (after < len(order))
        spans[spans] = soonest[after[spans]] < end[spans]
        start, end = start[spans], end[spans]
        sizes = rounded(self.requested)[mine][spans]
        best = float(kept.max())
        for at in range(0, len(firsts), _STEP_BLOCK):  # a block of steps at a time
            first, last = firsts[at : at + _STEP_BLOCK], lasts[at : at + _STEP_BLOCK]
            through = (start[:, None] <= first[None, :]) & (end[:, None] > last[None, :])
            best = max(best, float((kept[at : at + _STEP_BLOCK] + sizes @ through).max()))
        return round(best)

    def program_steps(self, key: Key) -> np.ndarray | None:
        """The steps that ran the step function (step numbers), or None where every
        step counts (no op allocates in more than one step).

        Every step of a training loop runs the same step function, so the op that
        allocates the most bytes among the ops allocating in more than one step
        (the program's largest kernel) allocates in each of them. A "step" without
        it is other work carrying a step number: ``tf.data``'s prefetch makes the
        next batch (Keras' data adapter gathers it, ``GatherV2``) while the
        current step runs (``DataHandler`` ends its dataset with
        ``prefetch(AUTOTUNE)``, keras/src/engine/data_adapter.py) and records it
        under that batch's step number; or the edge of the capture. Its few
        allocations are no peak of the program's step."""
        a = self.allocations
        mine = self.mine(key) & a["step"].notna().to_numpy(dtype=bool)
        # Ops as codes (``_coded``; -1: none, left out), not a name per allocation.
        ops = _coded(a["op"])[0]
        mine &= ops >= 0
        frame = pd.DataFrame(
            {
                "op": ops[mine],
                "step": a["step"].to_numpy(dtype=np.float64, na_value=np.nan)[mine],
                "bytes": self.requested[mine],
            }
        )
        if frame.empty:
            return None
        per_op = frame.groupby("op", sort=False).agg(
            steps=("step", "nunique"), total=("bytes", "sum")
        )
        recurring = per_op[per_op["steps"] > 1]
        if recurring.empty:
            return None
        largest = recurring["total"].idxmax()
        return frame.loc[frame["op"] == largest, "step"].unique()

    def lowest_program_step(self, key: Key, low: Replayed, steps: np.ndarray) -> tuple[int, int]:
        """(timeline row, bytes) of the peak of the program's step that peaks lowest
        (``Replayed.lowest_step_peak`` over the steps that ran the step function,
        ``program_steps``); the rows of other steps take no part."""
        if key not in self._programs:
            self._programs[key] = self.program_steps(key)
        program = self._programs[key]
        if program is None:
            return low.lowest_step_peak(key, steps)
        rows = low.events[key]
        mine = steps[rows]
        # By hashing, not sorting the timeline's steps (a few hundred steps).
        keep = np.isnan(mine) | pd.Series(mine).isin(program).to_numpy(dtype=bool)
        part = Replayed({key: rows[keep]}, {key: low.bytes[key][keep]})
        return part.lowest_step_peak(key, steps)

    def _next_op(self, key: Key, rows: np.ndarray) -> np.ndarray:
        """Per timeline row of ``key``: the row of the first allocation after it by
        an op other than the row's (a very large number where none)."""
        if key not in self._op_runs:
            timeline = self.timeline
            events = self.rows[key]
            allocs = events[equal_to(timeline["kind"], "allocation", False)[events]]
            ops = self._timeline_ops[allocs]
            # Runs of consecutive allocations by one op; each run's next run's first row.
            change = np.concatenate([[True], ops[1:] != ops[:-1]]) if len(ops) else ops
            run = np.cumsum(change) - 1
            firsts = np.concatenate([allocs[change.astype(bool)], [_NEVER]]) if len(ops) else ops
            self._op_runs[key] = (allocs, ops, run, firsts)
        allocs, ops, run, firsts = self._op_runs[key]
        out = np.full(len(rows), _NEVER, dtype=np.int64)
        if not len(allocs):
            return out
        at = np.searchsorted(allocs, rows, side="right")  # the first allocation after
        has = at < len(allocs)
        first = np.minimum(at, len(allocs) - 1)
        same = ops[first] == self._timeline_ops[rows]
        out[has] = np.where(same, firsts[run[first] + 1], allocs[first])[has]
        return out

    def could_skip(self, key: Key) -> np.ndarray:
        """Per allocation: whether another run of its op could do without it.

        A workspace (``scratch:`` basis): cuDNN's autotuner may pick an algorithm
        that needs none (``cudnnGetConvolution*WorkspaceSize`` is 0 for some;
        tensorflow/core/kernels/conv_ops_gpu.cc). An output: the op writes it
        into an input's buffer instead where that input has the same bytes and
        its reference count is one (``forward_input_or_allocate_output``,
        tensorflow/core/framework/op_kernel.cc); the capture shows such an input
        as an allocation of the same request freed between the output's
        allocation and the next op's first allocation (the executor drops an
        op's inputs when it finishes). Others (a new tensor of a shape no input
        has, such as a convolution's output or its input gradient) always
        allocate. Of ``key``'s allocations; False elsewhere."""
        if key in self._skippable:
            return self._skippable[key]
        a, ends = self.allocations, self.ends
        mine = self.mine(key)
        # A workspace's basis, read once per distinct basis (a few), not per allocation.
        codes, bases = pd.factorize(self.sizing.rule_basis)
        scratch = np.array([str(b).startswith("scratch") for b in bases] + [False], dtype=bool)
        out = mine & scratch[codes][self.sizing.rule]
        del codes
        # The arrays below are as long as the allocations (millions): views where
        # ``key`` has every allocation, each freed once read.
        index: slice | np.ndarray = slice(None) if mine.all() else np.flatnonzero(mine)
        start = a["alloc_event"].to_numpy(dtype=np.int64)[index]
        if len(start):
            # An allocation's own row: the first allocation by another op after it.
            next_op = self._next_op(key, start)
            end = ends[index]
            freed = end != STILL_LIVE
            # (request, end) of the freed ones, sorted; each output's window searched.
            # Each request's number (any one-to-one numbering does): by hashing.
            rank = pd.factorize(self.requested[index], use_na_sentinel=False)[0]
            span = np.int64(len(self.timeline) + 2)
            keyed = np.sort(rank[freed].astype(np.int64) * span + end[freed])
            # Searched by request, then in time order (a stable sort: a radix sort
            # where the requests number under 2**15): the windows then come sorted
            # (both ends grow with the allocation's row), and each search starts
            # where the last ended (numpy's searchsorted), not from the whole range.
            order = np.argsort(
                rank.astype(np.int16) if rank.max(initial=0) < 2**15 else rank, kind="stable"
            )
            window = rank[order].astype(np.int64) * span
            del rank
            low = window + start[order]
            window += np.minimum(next_op[order], span - 1)  # each window's high end
            count = np.searchsorted(keyed, window, "left")
            count -= np.searchsorted(keyed, low, "left")
            del keyed, window, low
            found = np.empty(len(count), dtype=np.int64)
            found[order] = count
            del order, count
            found -= freed & (end >= start) & (end < next_op)  # not itself
            out[index] |= found > 0
        self._skippable[key] = out
        return out

    def one_left_out(
        self,
        key: Key,
        low: Replayed,
        event: int,
        steps: np.ndarray,
        sizes: np.ndarray,
        grows: np.ndarray,
    ) -> int:
        """The low counter's peak in ``event``'s step with, at each moment, the
        largest growing allocation that another run could spare then left out:
        the most of it that holds.

        Two things spare an allocation at a given moment, and neither lowers every
        moment at once. An op writes its output into a dying input's buffer where
        the input's reference count is one by then
        (``OpKernelContext::forward_input_or_allocate_output``,
        tensorflow/core/framework/op_kernel.cc), which depends on when the
        input's other consumers ran; and its workspace is whatever the algorithm
        cuDNN's autotuner picked needs (none for some). Both concern what the op
        running at that moment allocates, and only where it could happen
        (``could_skip``: an output of the size of an input freed as the op
        ends, or a workspace). And the executor frees a tensor when
        its last consumer finishes (the reference count drops,
        tensorflow/core/common_runtime/executor.cc), so a free recorded just after
        the moment, before any other op allocates, may come before it in another
        run. A buffer held across many ops (an activation kept for its gradient)
        is neither: no run spares it then. So the real run's peak is at least
        each moment's bytes less the largest of those allocations live then (made
        by the op at that moment, or freed before another op allocates), the
        largest over the step of these (not only at the step's own peak, where a
        large buffer may be live that a nearby moment lacks). Moments are tried
        from the highest down, at most ``_MOMENTS``, and stop where none can do
        better."""
        a = self.allocations
        rows, values = low.events[key], low.bytes[key]
        # Only ``key``'s growing allocations can be spared: each moment reads theirs,
        # the ops as codes (``_coded``), not every allocation's name.
        mine = np.flatnonzero(self.mine(key) & grows)
        ends = self.ends[mine]
        start = a["alloc_event"].to_numpy(dtype=np.int64)[mine]
        held = np.asarray(sizes)[mine]
        forwardable = self.could_skip(key)[mine]
        made_by, made_names = _coded(a["op"])
        made_by = made_by[mine]
        timeline_codes, timeline_names = _coded(self.timeline["op"])
        nothing = np.zeros(len(mine), dtype=bool)

        def spared(row: int) -> float:
            code = int(timeline_codes[row])
            op = timeline_names[code] if code >= 0 else None
            # The first allocation after ``row`` by another op (no other: the end).
            next_op = int(self._next_op(key, np.array([row]))[0])
            own = (
                (made_by == _code_in(made_names, op)) & forwardable
                if isinstance(op, str)
                else nothing
            )
            soon = (ends != STILL_LIVE) & (ends < next_op)
            live = (start <= row) & ((ends == STILL_LIVE) | (ends > row))
            growing = held[live & (own | soon)]
            return float(growing.max()) if len(growing) else 0.0

        at = int(np.flatnonzero(rows == event)[0])
        best = float(values[at]) - spared(event)
        step = steps[event]
        mask = np.ones(len(rows), dtype=bool)
        if not np.isnan(step):
            mask = np.isnan(steps[rows]) | (steps[rows] == step)
        order = np.flatnonzero(mask & (values > best))
        order = order[np.argsort(-values[order], kind="stable")][:_MOMENTS]
        for i in order:
            if values[i] <= best:
                break
            best = max(best, float(values[i]) - spared(int(rows[i])))
        return round(best)


def _coded(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """A column as integer codes (-1: missing) and the values they stand for: its
    categories where it has them (their codes as the column holds them, as narrow
    as the categories allow: no wider copy of millions of rows)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), column.cat.categories
    codes, uniques = pd.factorize(column.astype(object).to_numpy())
    return codes.astype(np.int64), pd.Index(uniques, dtype=object)


def _code_in(values: pd.Index, value: object) -> int:
    """The code of ``value`` among ``values`` (-2, which no row has, where absent)."""
    return int(values.get_loc(value)) if value in values else -2
