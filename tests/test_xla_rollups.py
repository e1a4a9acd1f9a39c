"""XLA buffers in the roll-ups: every byte at the peak counted once, and buffers
with no TF op under one explicit name, never NA."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.xla_live import NO_TF_OP

XLA_FIXTURES = ["xla_function", "xla_keras"]
KEYS = ["host", "allocator"]


@pytest.fixture(scope="module", params=XLA_FIXTURES)
def prof(request: pytest.FixtureRequest) -> traceparse.Profile:
    return traceparse.load(FIXTURES / request.param)


def _by_allocator(frame: pd.DataFrame, column: str) -> dict[tuple[str, str], int]:
    sums = frame.astype({k: object for k in KEYS}).groupby(KEYS)[column].sum()
    return {key: int(value) for key, value in sums.items()}


def test_rollup_rows_add_up_to_bytes_in_use(prof: traceparse.Profile) -> None:
    """The slab's row keeps only what its buffers do not cover: with the buffers
    under their TF ops, the rows add up to the allocator's own counter at the
    peak, less reserved bytes and bytes allocated before the capture, named or
    not (which allocations do not hold)."""
    peak = prof.peak.astype({k: object for k in KEYS}).set_index(KEYS)
    before = prof.attribution.astype({k: object for k in KEYS}).set_index(KEYS)
    # Parts of the bytes from before the capture: named (variables, XLA parameters) or not.
    earlier = ["before_capture_bytes", "variable_bytes", "xla_parameter_bytes"]
    expected = {
        key: int(row.in_use_bytes - row.reserved_bytes - before.loc[key, earlier].sum())
        for key, row in peak.iterrows()
    }
    assert not prof._xla_slabs.empty  # a linked slab is live at the peak
    assert _by_allocator(prof.ops, "live_at_peak_bytes") == expected
    for depth in (1, 2, 3):
        assert _by_allocator(prof.scopes(depth), "live_at_peak_bytes") == expected


def test_buffers_without_a_tf_op_have_one_name(prof: traceparse.Profile) -> None:
    expanded = prof.live_at_peak(expand_xla=True)
    buffers = prof.xla_buffers
    # (instruction, dtype, shape): the elements of a tuple can be named differently.
    key = ["instruction", "dtype", "shape"]
    untraced = set(
        buffers.loc[buffers["tf_op"].isna(), key].astype(object).itertuples(index=False, name=None)
    )
    is_buffer = expanded["xla_buffer"].notna()
    rows = expanded[["xla_buffer", "dtype", "shape"]].astype(object)
    keys = pd.Series(list(rows.itertuples(index=False, name=None)), index=expanded.index)
    # Independent of the label: expanded rows whose buffer has no TF op in
    # xla_buffers, plus agreed values (no instruction) that name no op.
    no_op = (is_buffer & keys.isin(untraced)) | (
        ~is_buffer & expanded["xla_program"].notna() & expanded["dtype"].notna()
        & (expanded["op"].astype(object) == NO_TF_OP)
    )  # fmt: skip
    assert (expanded.loc[no_op, "op"].astype(object) == NO_TF_OP).all()
    assert not expanded.loc[is_buffer, "op"].isna().any()
    expected = _by_allocator(expanded[no_op], "allocated_bytes")
    tables = {"ops": (prof.ops, "op")}
    tables.update({f"scopes({d})": (prof.scopes(d), "scope") for d in (1, 2, 3)})
    for name, (table, key) in tables.items():
        # Rows that exist only because buffers moved there (count 0) never have NA keys.
        moved = table[table["count"] == 0]
        assert moved[key].notna().all(), name
        labelled = table[table[key].astype(object) == NO_TF_OP]
        assert _by_allocator(labelled, "live_at_peak_bytes") == expected, name
        assert (labelled["count"] == 0).all(), name


def test_keras_has_buffers_without_a_tf_op() -> None:
    """On xla_keras some fusions name no TF op (so the test above is not empty)."""
    prof = traceparse.load(FIXTURES / "xla_keras")
    scopes = prof.scopes(1)
    row = scopes[scopes["scope"].astype(object) == NO_TF_OP]
    assert len(row) == 1 and int(row["live_at_peak_bytes"].iloc[0]) > 0
    assert scopes["scope"].notna().all()
