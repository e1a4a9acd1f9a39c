"""``predict_batch.sizing`` sizes each distinct (shape, request, scratch kind, op
recorded) once and hands the sizes to every allocation that has it. This holds it
equal, array by array, to the rule applied allocation by allocation (the loop it
replaced, kept here as the reference) on every fixture with memory events, at the
batch read off the capture and at others, and on shuffled and repeated rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, memory_fixtures
from helpers.predictors import fixture_predictor

from traceparse.analysis.predict.batch import (
    BLAS_WORKSPACE,
    CONV_WORKSPACE,
    NO_BATCH_DIM,
    RNN_BUFFER,
    SCRATCH_KEPT,
    UNSHAPED_INPUT,
    UNSHAPED_KEPT,
    UNSHAPED_MATCH,
    WEIGHT_SHAPE,
    WINOGRAD_WORKSPACE,
    Sizing,
    _filters,
    _per_example,
    dims,
    grows,
    scratch_kinds,
    sizing,
    whole_examples,
)
from traceparse.analysis.predict.evidence import evidence_twins
from traceparse.analysis.predict.predictor import _evidence
from traceparse.analysis.predict.workspace import feature_maps, winograd_fixed
from traceparse.analysis.predict.xla import input_example_bytes

assert {BLAS_WORKSPACE, SCRATCH_KEPT}  # scratch kinds the reference passes through


def reference_sizing(
    allocations: pd.DataFrame,
    batch: int,
    weights: set[tuple[int, ...]],
    requested: np.ndarray,
    example_bytes: Iterable[int] = (),
    twins: tuple[int, ...] = (),
) -> Sizing:
    """The rule allocation by allocation, as it stood before the distinct rows."""
    n = len(allocations)
    shapes = allocations["shape"].astype(object).to_numpy()
    no_op = (
        allocations["op"].isna().to_numpy(dtype=bool)
        if "op" in allocations
        else np.zeros(n, dtype=bool)
    )
    parsed = [dims(s) for s in shapes]
    examples = _per_example((p for p in parsed if p and p not in weights), batch)
    wholes = whole_examples((p for p in parsed if p and p not in weights), batch)
    fixed = requested.astype(np.float64)
    per = np.zeros(n)
    alt_fixed, alt_per = fixed.copy(), per.copy()
    basis = np.full(n, NO_BATCH_DIM, dtype=object)
    growing_sizes: set[int] = set(example_bytes)
    scratch = scratch_kinds(allocations)
    filters = _filters(allocations) if (scratch == CONV_WORKSPACE).any() else set()
    maps = feature_maps(pd.unique(shapes), batch) if filters else set()
    # A dense layer's folded rows: 2-D tensors under a Tensordot scope led by a batch
    # times the dimensions after it of a batch-led tensor.
    ops = allocations["op"].astype(object).fillna("").astype(str).to_numpy()
    rows = {
        p[0]
        for p, op in zip(parsed, ops, strict=True)
        if p and len(p) == 2 and ("/Tensordot/" in f"/{op}")
    }
    folded = set()
    for p in parsed:
        if p and len(p) >= 3 and p[0] in (batch, *twins):
            product = p[0]
            for d in p[1:-1]:
                product *= d
                folded.add(product)
    folds = frozenset(rows & folded)
    for i, found in enumerate(parsed):
        if found is None:
            continue
        if scratch[i] is not None:
            basis[i] = scratch[i]
            scaled = fixed[i] / batch
            if scratch[i] == CONV_WORKSPACE:
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
        if found in weights:
            basis[i] = WEIGHT_SHAPE
            alt_fixed[i], alt_per[i] = 0.0, fixed[i] / batch
            continue
        basis[i] = how
        lead = batch if batch in found else next((t for t in twins if t in found), batch)
        if requested[i] % lead == 0:
            growing_sizes.add(int(requested[i]) // lead)
        per[i], fixed[i] = fixed[i] / batch, 0.0
        alt_fixed[i], alt_per[i] = 0.0, per[i]
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
    return Sizing.of_rows(fixed, per, alt_fixed, alt_per, basis)


def assert_same(new: Sizing, old: Sizing) -> None:
    for name in ("fixed", "per_example", "alt_fixed", "alt_per_example"):
        got, want = getattr(new, name), getattr(old, name)
        assert got.dtype == want.dtype, name
        assert np.array_equal(got, want, equal_nan=True), name
    assert new.basis.tolist() == old.basis.tolist()


@pytest.mark.parametrize("name", memory_fixtures())
def test_every_fixture_sizes_the_same_as_allocation_by_allocation(name: str) -> None:
    _, predictor = fixture_predictor(FIXTURES / name)
    base, a = predictor.base, predictor.base.allocations
    evidence = _evidence(base)
    rng = np.random.default_rng(len(name))
    # The batch read off the capture, and others: each reads the shapes anew.
    for share in sorted({predictor.share, 1, 2, 3, 8, 32, 64, 128}):
        twins = evidence_twins(evidence, predictor.weights, share)[1:]
        args = (
            share,
            predictor.weights,
            predictor.requested,
            input_example_bytes(base.xla_parameters, share, predictor.weights),
            twins,
        )
        assert_same(sizing(a, *args), reference_sizing(a, *args))
    # Rows shuffled and repeated: the first of each distinct row is not special.
    order = rng.permutation(np.concatenate([np.arange(len(a)), rng.integers(0, len(a), len(a))]))
    shuffled = a.iloc[order].reset_index(drop=True)
    again = (predictor.share, predictor.weights, predictor.requested[order], (), predictor.twins)
    assert_same(sizing(shuffled, *again), reference_sizing(shuffled, *again))


def test_unshaped_requests_count_every_allocation() -> None:
    """An unshaped request outside any op recurs when two allocations make it, even
    where they are one distinct row (the count is of allocations, not rows)."""
    a = pd.DataFrame(
        {
            "shape": [None, None, "", None, "[64,10]"],
            "op": [None, None, None, "x", "y"],
            "dtype": ["", "", "", "", "float"],
        }
    )
    requested = np.array([6400.0, 6400.0, 128.0, 640.0, 2560.0])
    for rows in ([0, 1, 2, 3, 4], [0, 2, 3, 4], [4, 3, 2, 1, 0]):
        part = a.iloc[rows].reset_index(drop=True)
        new = sizing(part, 64, set(), requested[rows])
        assert_same(new, reference_sizing(part, 64, set(), requested[rows]))
    both = sizing(a, 64, set(), requested)
    assert both.basis[0] == both.basis[1] == UNSHAPED_INPUT
    assert (
        sizing(a.iloc[[0, 2]].reset_index(drop=True), 64, set(), requested[[0, 2]]).basis[0]
        == UNSHAPED_KEPT
    )


def _expanded(s: Sizing) -> Sizing:
    """``s`` with a rule of its own for every allocation (its columns as read)."""
    expanded = Sizing.of_rows(s.fixed, s.per_example, s.alt_fixed, s.alt_per_example, s.basis)
    expanded.envelopes = {row: lines.copy() for row, lines in s.envelopes.items()}
    return expanded


@pytest.mark.parametrize("name", ["keras_train", "layers_cnn", "gpu_alexnet_v100_64"])
def test_shared_rules_read_as_a_rule_per_allocation(name: str) -> None:
    """The allocations share rules (a step repeats its allocations): what is read
    of them (each column, ``grows``, ``at``) is what a rule per allocation gives,
    and ``assign`` moves only the rows it names, before and after ``per_replica``."""
    _, predictor = fixture_predictor(FIXTURES / name)
    shared = predictor.sizing
    assert len(shared.rule_fixed) < len(shared.rule)  # rules are shared
    rows = np.flatnonzero(shared.grows())[::3]
    new, reference = shared, _expanded(shared)
    for s in (new, reference):
        s.assign(rows, 1000.0 + rows, 7.0, 2000.0, np.arange(len(rows)) % 2, "test rule")
        s.per_replica(2)
    assert_same(new, reference)
    assert np.array_equal(new.grows(), (new.per_example != 0) | (new.alt_per_example != 0))
    assert set(new.basis[rows]) == {"test rule"}
    assert new.fixed[rows].tolist() == (1000.0 + rows).tolist()
    untouched = np.setdiff1d(np.arange(len(new.rule)), rows)
    assert "test rule" not in set(new.basis[untouched])
    for batch in (1, predictor.batch, 3 * predictor.batch + 1):
        for got, want in zip(new.at(batch), reference.at(batch), strict=True):
            assert np.array_equal(got, want)
