"""The Predictor's construction per distinct key (issue 49, third round) against the
code it replaced, kept here as the reference: the captured batch's evidence
(``_evidence``, ``find_batch``'s scores and leads, per allocation before),
the settled chunks (``match_keys``' object columns before) and the roles and
layers (``naming.place`` on every allocation before). Equal exactly, on every
fixture with memory events, on shuffled and repeated rows and on random tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, memory_fixtures
from helpers.predictors import fixture_predictor

from traceparse.analysis.liveness import requested_or_held
from traceparse.analysis.naming import place
from traceparse.analysis.predict.batch import (
    _GRADIENT_OPS,
    _INPUT_OPS,
    _LOSS_OPS,
    BatchReading,
    Evidence,
    _Score,
    _swapped,
    _twins,
    _unflattened,
    batch_twins,
    dims,
    evidence_twins,
    find_batch,
    first_ids,
    read_batch,
)
from traceparse.analysis.predict.fit import match_keys
from traceparse.analysis.predict.parts import _shared, roles_of
from traceparse.analysis.predict.predictor import _evidence
from traceparse.analysis.predict.replay import settled_chunks, settled_of
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
    frame = pd.DataFrame(
        {
            "shape": pd.Series(shapes, dtype=object).astype(str),
            "name": pd.Series(names, dtype=object).astype(str),
            "size": np.nan if sizes is None else np.asarray(sizes, dtype=np.float64),
        }
    )
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
        if not found or found in weights or found[0] <= 1:
            continue
        score = scores.setdefault(flat.get(found[0], found[0]), _Score())
        nbytes = float(size) + float(unsized) * float(np.prod(found, dtype=np.float64))
        label = len(found) == 1 or (len(found) == 2 and found[1] == 1)
        if _INPUT_OPS.search(name) or (label and _LOSS_OPS.search(name)):
            score.inputs += nbytes
        elif _swapped(found, recorded):
            score.neutral += nbytes
        elif _GRADIENT_OPS.search(name):
            score.backward += nbytes
        else:
            score.forward += nbytes
    return scores


def reference_find_batch(shapes, ops, weights, sizes=None, names=None) -> BatchReading:  # type: ignore[no-untyped-def]
    """``find_batch``'s decision over ``reference_scores`` (the decision is unchanged;
    only its inputs are compared): the candidates and the batch with its evidence."""
    from traceparse.analysis.predict import batch as module

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
    from traceparse.analysis.predict import batch as module

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
