"""The Predictor's construction per distinct key (issue 49, third round) against the
code it replaced, kept here as the reference: the captured batch's evidence
(``_evidence``, ``find_batch``'s scores and leads, per allocation before),
the settled chunks (``match_keys``' object columns before), the roles and
layers (``naming.place`` on every allocation before), and the low bound's hot
paths (``ReferenceLowBound``: ops and steps as objects per allocation and per
event before). Equal exactly, on every fixture with memory events, on shuffled
and repeated rows and on random rows."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, memory_fixtures
from helpers.predictors import fixture_predictor

from traceparse.analysis.liveness import STILL_LIVE, requested_or_held
from traceparse.analysis.naming import place
from traceparse.analysis.predict.batch import dims, first_ids
from traceparse.analysis.predict.evidence import (
    _GRADIENT_OPS,
    _INPUT_OPS,
    _LOSS_OPS,
    BatchReading,
    Evidence,
    _missing,
    _Score,
    _swapped,
    _twins,
    _unflattened,
    batch_twins,
    evidence_twins,
    find_batch,
    read_batch,
    stacked,
)
from traceparse.analysis.predict.fit import match_keys
from traceparse.analysis.predict.low import _MOMENTS, _NEVER, LowBound
from traceparse.analysis.predict.parts import _shared, roles_of
from traceparse.analysis.predict.predictor import _evidence
from traceparse.analysis.predict.replay import Replayed, live_at, settled_chunks, settled_of
from traceparse.analysis.predict.xla import xla_evidence


# --- the reference: the code as it stood before this round --------------------------
def reference_evidence(capture: object) -> tuple[list, list, list, list]:
    a = capture.allocations  # type: ignore[attr-defined]
    extra = xla_evidence(capture.xla_buffers, capture.xla_parameters)  # type: ignore[attr-defined]
    op_names = a["op"].astype(object)
    types = a["op_type"].astype(object) if "op_type" in a else pd.Series(None, index=a.index)
    names = [f"{o}:{t}" if isinstance(t, str) else o for o, t in zip(op_names, types, strict=True)]
    sizes = requested_or_held(a).astype(np.float64)
    return (
        list(a["shape"].astype(object)) + extra[0],
        list(op_names) + extra[1],
        list(sizes) + extra[2],
        names + extra[3],
    )


def reference_leads(shapes, ops, weights):  # type: ignore[no-untyped-def]
    by_lead: dict = {}
    by_rest: dict = {}
    pairs = pd.DataFrame({"shape": list(shapes), "op": list(ops)}, dtype=object)
    for shape, op in pairs.drop_duplicates().itertuples(index=False):
        found = dims(shape)
        if not found or found in weights or found[0] <= 1:
            continue
        by_lead.setdefault(found[0], set()).add(op)
        by_rest.setdefault((op, found[1:]), set()).add(found[0])
    return by_lead, by_rest


def reference_scores(shapes, weights, sizes, names):  # type: ignore[no-untyped-def]
    # A tensor without a shape or a name is no evidence. Said here, not left to
    # ``astype(str)``: pandas 2 turns None into "None", pandas 3 keeps it missing.
    shape_text = pd.Series(shapes, dtype=object).map(lambda v: None if _missing(v) else str(v))
    name_text = pd.Series(names, dtype=object).map(lambda v: None if _missing(v) else str(v))
    frame = pd.DataFrame(
        {
            "shape": shape_text,
            "name": name_text,
            "size": np.nan if sizes is None else np.asarray(sizes, dtype=np.float64),
        }
    )
    frame = frame[frame["shape"].notna() & frame["name"].notna()]
    frame.loc[~(frame["size"] > 0), "size"] = np.nan
    frame["unsized"] = frame["size"].isna()
    grouped = frame.groupby(["shape", "name"], sort=False).agg(
        size=("size", "sum"), unsized=("unsized", "sum")
    )
    parsed = {shape: dims(shape) for shape in grouped.index.get_level_values(0).unique()}
    recorded = {p for p in parsed.values() if p and p not in weights}
    flat = _unflattened({p for p in parsed.values() if p})
    scores: dict[int, _Score] = {}
    for (shape, name), size, unsized in zip(
        grouped.index, grouped["size"], grouped["unsized"], strict=True
    ):
        found = parsed[shape]
        if not found or found in weights:
            continue
        along = len(found) >= 2 and stacked(name)
        lead = found[1] if along else found[0]
        if lead <= 1:
            continue
        score = scores.setdefault(flat.get(lead, lead), _Score())
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


def reference_find_batch(shapes, ops, weights, sizes=None, names=None) -> BatchReading:  # type: ignore[no-untyped-def]
    """``find_batch``'s decision over ``reference_scores`` (the decision is unchanged;
    only its inputs are compared): the candidates and the batch with its evidence."""
    from traceparse.analysis.predict import evidence as module

    original = module._scores, module._leads
    scores = reference_scores(
        list(shapes),
        weights,
        None if sizes is None else [float(s) for s in sizes],
        list(ops) if names is None else list(names),
    )
    leads = reference_leads(shapes, ops, weights)
    try:
        module._scores = lambda evidence, weights: scores  # type: ignore[assignment]
        module._leads = lambda evidence, weights: leads  # type: ignore[assignment]
        return read_batch(Evidence.of_rows([], []), weights)
    finally:
        module._scores, module._leads = original


def reference_twins(shapes, ops, weights, batch):  # type: ignore[no-untyped-def]
    by_lead, by_rest = reference_leads(shapes, ops, weights)
    return (batch, *_twins(batch, by_lead, by_rest))


def reference_roles(allocations: pd.DataFrame, known, shapes):  # type: ignore[no-untyped-def]
    rows = allocations[["op", "op_type", "shape"]].copy()
    place(rows, known, shapes)
    return _shared(rows["role"]), _shared(rows["layer"])


# --- the tests ----------------------------------------------------------------------
def _scores_of(scores: dict[int, _Score]) -> list[tuple[int, tuple[float, ...]]]:
    return [(d, (s.inputs, s.forward, s.backward, s.neutral)) for d, s in scores.items()]


def _same_objects(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype == object
    assert pd.Series(got).equals(pd.Series(want))


@pytest.mark.parametrize("name", memory_fixtures())
def test_every_fixture_constructs_as_allocation_by_allocation(name: str) -> None:
    _, predictor = fixture_predictor(FIXTURES / name)
    base, a = predictor.base, predictor.base.allocations
    shapes, ops, sizes, names = reference_evidence(base)
    evidence = _evidence(base)
    from traceparse.analysis.predict import evidence as module

    want = reference_scores(shapes, predictor.weights, sizes, names)
    assert _scores_of(module._scores(evidence, predictor.weights)) == _scores_of(want)
    assert module._leads(evidence, predictor.weights) == reference_leads(
        shapes, ops, predictor.weights
    )
    assert read_batch(evidence, predictor.weights) == reference_find_batch(
        shapes, ops, predictor.weights, sizes, names
    )
    for share in sorted({predictor.share, 1, 2, 8, 32, 64}):
        assert evidence_twins(evidence, predictor.weights, share) == reference_twins(
            shapes, ops, predictor.weights, share
        )
    settled = settled_of(a, predictor.requested, predictor.held)
    want_settled = settled_chunks(match_keys(a), predictor.requested, predictor.held)
    assert np.array_equal(settled, want_settled, equal_nan=True)
    roles, layers = roles_of(a, base.known, base.shapes)
    want_roles, want_layers = reference_roles(a, base.known, base.shapes)
    _same_objects(roles, want_roles)
    _same_objects(layers, want_layers)
    # Rows shuffled and repeated: nothing depends on which row comes first but order.
    rng = np.random.default_rng(len(name))
    picked = rng.integers(0, len(a), size=2 * len(a)) if len(a) else np.arange(0)
    mixed = a.iloc[picked].reset_index(drop=True)
    requested = predictor.requested[picked]
    held = predictor.held[picked]
    assert np.array_equal(
        settled_of(mixed, requested, held),
        settled_chunks(match_keys(mixed), requested, held),
        equal_nan=True,
    )
    roles, layers = roles_of(mixed, base.known, base.shapes)
    want_roles, want_layers = reference_roles(mixed, base.known, base.shapes)
    _same_objects(roles, want_roles)
    _same_objects(layers, want_layers)


def _random_rows(rng: np.random.Generator, n: int) -> tuple[list, list, list, list]:
    leads = [1, 2, 8, 16, 32, 64, 128, 512]
    shapes: list[object] = []
    for _ in range(n):
        pick = rng.integers(0, 10)
        if pick == 0:
            shapes.append(None)
        elif pick == 1:
            shapes.append(np.nan)
        else:
            rank = int(rng.integers(1, 4))
            body = [int(rng.choice(leads))] + [
                int(rng.choice([1, 3, 16, 64])) for _ in range(rank - 1)
            ]
            shapes.append("[" + ",".join(map(str, body)) + "]")
    pool = [
        "IteratorGetNext",
        "m/dense/MatMul",
        "gradient_tape/m/dense/MatMul",
        "loss/Sum",
        "a",
        None,
    ]
    ops = [pool[int(i)] for i in rng.integers(0, len(pool), size=n)]
    sizes = [
        float(x) if x > 2 else (np.nan if x == 0 else 0.0) for x in rng.integers(0, 1000, size=n)
    ]
    names = [o if rng.random() < 0.5 else f"{o}:T" for o in ops]
    return shapes, ops, sizes, names


def test_random_rows_read_the_same_batch() -> None:
    rng = np.random.default_rng(49)
    for case in range(300):
        n = int(rng.integers(0, 40))
        shapes, ops, sizes, names = _random_rows(rng, n)
        weights = {(64, 64)} if case % 3 == 0 else set()
        use_sizes = sizes if case % 2 else None
        use_names = names if case % 5 else None
        assert find_batch(shapes, ops, weights, use_sizes, use_names) == reference_find_batch(
            shapes, ops, weights, use_sizes, use_names
        )
        for batch in (8, 16, 64):
            assert batch_twins(shapes, ops, weights, batch) == reference_twins(
                shapes, ops, weights, batch
            )


def test_evidence_from_codes_is_the_evidence_of_the_rows() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 200))
        shapes, ops, sizes, _ = _random_rows(rng, n)
        types = [None if rng.random() < 0.3 else "T" for _ in range(n)]
        frame = pd.DataFrame(
            {
                "shape": pd.Categorical(shapes),
                "op": pd.Categorical(ops),
                "op_type": pd.Categorical(types),
            }
        )
        codes = tuple(
            frame[c].cat.codes.to_numpy(dtype=np.int64) for c in ("shape", "op", "op_type")
        )
        values = tuple(
            frame[c].cat.categories.to_numpy(dtype=object) for c in ("shape", "op", "op_type")
        )

        def named(o: object, t: object) -> object:
            return f"{o}:{t}" if isinstance(t, str) else o

        got = Evidence.of_codes(codes, values, np.asarray(sizes), named)  # type: ignore[arg-type]
        rows = [frame[c].astype(object) for c in ("shape", "op", "op_type")]
        want = Evidence.of_rows(
            rows[0], rows[1], sizes, [named(o, t) for o, t in zip(rows[1], rows[2], strict=True)]
        )
        for field in ("shapes", "ops", "names"):
            assert [str(x) for x in getattr(got, field)] == [str(x) for x in getattr(want, field)]
        assert np.array_equal(got.sizes, want.sizes) and np.array_equal(got.unsized, want.unsized)


def test_first_ids_number_combinations_by_first_appearance() -> None:
    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(0, 300))
        columns = [rng.integers(-1, int(rng.integers(1, 6)), size=n) for _ in range(3)]
        ids, first = first_ids(*columns)
        seen: dict[tuple[int, ...], int] = {}
        want = [seen.setdefault(tuple(int(c[i]) for c in columns), len(seen)) for i in range(n)]
        assert ids.tolist() == want
        assert [int(ids[f]) for f in first] == list(range(len(seen)))
        assert all(ids[:f].tolist().count(ids[f]) == 0 for f in first)
    # Codes too wide for one int64 key are renumbered on the way.
    wide = np.array([2**40, 0, 2**40, 5], dtype=np.int64)
    ids, first = first_ids(wide, wide, wide)
    assert ids.tolist() == [0, 1, 0, 2] and first.tolist() == [0, 1, 3]


# --- the bounds' hot paths as they stood before this round (issue 49) -----------------
class ReferenceLowBound(LowBound):
    """A LowBound whose moments, ops and steps are read as before this round: object
    names per allocation and per event."""

    def __init__(self, other: LowBound) -> None:  # the same state, fresh caches
        self.__dict__.update(other.__dict__)
        self._ref_programs: dict = {}
        self._ref_op_runs: dict = {}
        self._ref_skippable: dict = {}
        self._floors = {}

    def program_steps(self, key: tuple[object, object]) -> np.ndarray | None:
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
        frame = pd.DataFrame(
            {
                "op": a["op"].astype(object).to_numpy()[mine],
                "step": a["step"].to_numpy(dtype=np.float64, na_value=np.nan)[mine],
                "bytes": self.requested[mine],
            }
        ).dropna(subset=["op"])
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

    def lowest_program_step(
        self, key: tuple[object, object], low: Replayed, steps: np.ndarray
    ) -> tuple[int, int]:
        """(timeline row, bytes) of the peak of the program's step that peaks lowest
        (``Replayed.lowest_step_peak`` over the steps that ran the step function,
        ``program_steps``); the rows of other steps take no part."""
        if key not in self._ref_programs:
            self._ref_programs[key] = self.program_steps(key)
        program = self._ref_programs[key]
        if program is None:
            return low.lowest_step_peak(key, steps)
        rows = low.events[key]
        mine = steps[rows]
        keep = np.isnan(mine) | np.isin(mine, program)
        part = Replayed({key: rows[keep]}, {key: low.bytes[key][keep]})
        return part.lowest_step_peak(key, steps)

    def _next_op(self, key: tuple[object, object], rows: np.ndarray) -> np.ndarray:
        """Per timeline row of ``key``: the row of the first allocation after it by
        an op other than the row's (a very large number where none)."""
        if key not in self._ref_op_runs:
            timeline = self.timeline
            events = self.rows[key]
            allocs = events[timeline["kind"].astype(object).to_numpy()[events] == "allocation"]
            ops = timeline["op"].astype(object).to_numpy()[allocs]
            # Runs of consecutive allocations by one op; each run's next run's first row.
            change = np.concatenate([[True], ops[1:] != ops[:-1]]) if len(ops) else ops
            run = np.cumsum(change) - 1
            firsts = np.concatenate([allocs[change.astype(bool)], [_NEVER]]) if len(ops) else ops
            self._ref_op_runs[key] = (allocs, ops, run, firsts)
        allocs, ops, run, firsts = self._ref_op_runs[key]
        out = np.full(len(rows), _NEVER, dtype=np.int64)
        if not len(allocs):
            return out
        at = np.searchsorted(allocs, rows, side="right")  # the first allocation after
        has = at < len(allocs)
        first = np.minimum(at, len(allocs) - 1)
        row_ops = self.timeline["op"].astype(object).to_numpy()[rows]
        same = ops[first] == row_ops
        out[has] = np.where(same, firsts[run[first] + 1], allocs[first])[has]
        return out

    def could_skip(self, key: tuple[object, object]) -> np.ndarray:
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
        if key in self._ref_skippable:
            return self._ref_skippable[key]
        a, ends = self.allocations, self.ends
        mine = self.mine(key)
        out = mine & np.char.startswith(self.sizing.basis.astype(str), "scratch")
        index = np.flatnonzero(mine)
        if len(index):
            start = a["alloc_event"].to_numpy(dtype=np.int64)
            # An allocation's own row: the first allocation by another op after it.
            next_op = self._next_op(key, start[index])
            size = self.requested[index]
            end = ends[index]
            freed = end != STILL_LIVE
            # (request, end) of the freed ones, sorted; each output's window searched.
            _, rank = np.unique(size, return_inverse=True)
            span = np.int64(len(self.timeline) + 2)
            keyed = np.sort(rank[freed] * span + end[freed])
            low = rank * span + start[index]
            high = rank * span + np.minimum(next_op, span - 1)
            found = np.searchsorted(keyed, high, "left") - np.searchsorted(keyed, low, "left")
            found -= freed & (end >= start[index]) & (end < next_op)  # not itself
            out[index] |= found > 0
        self._ref_skippable[key] = out
        return out

    def one_left_out(
        self,
        key: tuple[object, object],
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
        a, ends = self.allocations, self.ends
        mine = self.mine(key) & grows
        rows, values = low.events[key], low.bytes[key]
        timeline_ops = self.timeline["op"].astype(object).to_numpy()
        made_by = a["op"].astype(object).to_numpy()
        forwardable = self.could_skip(key)
        nothing = np.zeros(len(a), dtype=bool)

        def spared(row: int) -> float:
            op = timeline_ops[row]
            # The first allocation after ``row`` by another op (no other: the end).
            next_op = int(self._next_op(key, np.array([row]))[0])
            own = (made_by == op) & forwardable if isinstance(op, str) else nothing
            soon = (ends != STILL_LIVE) & (ends < next_op)
            growing = sizes[mine & live_at(a, ends, row) & (own | soon)]
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


@pytest.mark.parametrize("name", memory_fixtures())
def test_every_fixture_bounds_as_before(name: str) -> None:
    _, predictor = fixture_predictor(FIXTURES / name)
    reference = copy.copy(predictor)  # the same state, fresh caches
    reference.low_bound = ReferenceLowBound(predictor.low_bound)
    reference._loops, reference._sized = {}, {}
    for batch in sorted({predictor.batch, max(1, predictor.batch // 2), 2 * predictor.batch}):
        assert predictor.extremes(batch) == reference.extremes(batch), batch
    ours, theirs = predictor.low_bound, reference.low_bound
    for key in predictor.rows:
        assert np.array_equal(ours.could_skip(key), theirs.could_skip(key))
        program, want = ours.program_steps(key), theirs.program_steps(key)
        assert (program is None and want is None) or np.array_equal(program, want)


@pytest.mark.parametrize("name", memory_fixtures())
def test_every_fixture_places_each_distinct_row_as_every_row(name: str) -> None:
    """``place`` (each distinct (op, type, shape) once) against ``_place_each`` on every
    row, on the allocations as categories and as plain objects."""
    from traceparse.analysis.naming.place import _place_each

    _, predictor = fixture_predictor(FIXTURES / name)
    base = predictor.base
    columns = ["op", "op_type", "shape"]
    for rows in (
        base.allocations[columns].copy(),
        base.allocations[columns].astype(object).copy(),
    ):
        want = rows.copy()
        _place_each(want, base.known, base.shapes)
        place(rows, base.known, base.shapes)
        for column in ("layer", "role", "replica", "scope"):
            assert pd.Series(rows[column].to_numpy()).equals(pd.Series(want[column].to_numpy())), (
                column
            )
