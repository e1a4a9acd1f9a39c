"""Work done a block of rows at a time, and arrays that hold no memory, give the
same tables as the whole-array way (issue 28: peak memory on millions of events)."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.trace import alloc, free, profile_of

import traceparse
from traceparse.analysis import liveness, steps
from traceparse.decode.trace import lean_masks, masked, unwritten_zeros

FIXTURES = Path(__file__).parent.parent / "fixtures"
ROWS = 1 << 20  # the size from which zeros come on pages of their own
MiB = 1 << 20


def _mapped(array: np.ndarray) -> bool:
    """Whether ``array``'s memory is an anonymous mapping, not the C heap."""
    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)


def test_unwritten_zeros_are_zeros_of_their_dtype_and_writable() -> None:
    for rows, dtype in ((0, bool), (10, np.int64), (ROWS, bool), (ROWS // 8 + 1, np.int64)):
        zeros = unwritten_zeros(rows, dtype)
        assert zeros.shape == (rows,) and zeros.dtype == np.dtype(dtype) and not zeros.any()
        assert _mapped(zeros) == (rows * np.dtype(dtype).itemsize >= ROWS)
        if rows:
            zeros[-1] = 1  # a caller may write: the page becomes its own
            assert zeros[-1] == 1 and not zeros[:-1].any()


def test_lean_masks_keep_values_and_na_and_share_the_values() -> None:
    rows = ROWS + 3
    values = np.arange(rows, dtype=np.int64)
    with_na = np.zeros(rows, dtype=bool)
    with_na[7] = True
    frame = pd.DataFrame(
        {
            "full": pd.arrays.IntegerArray(values, np.zeros(rows, dtype=bool)),
            "gaps": pd.arrays.IntegerArray(values.copy(), with_na),
            "ratio": pd.arrays.FloatingArray(values / 2, np.zeros(rows, dtype=bool)),
            "plain": values.copy(),
        }
    )
    lean = lean_masks(frame)
    pd.testing.assert_frame_equal(lean, frame)
    assert np.shares_memory(lean["full"].array._data, frame["full"].array._data)
    assert _mapped(lean["full"].array._mask)
    assert _mapped(lean["ratio"].array._mask)
    assert not _mapped(lean["gaps"].array._mask)  # it has an NA: its mask stays
    lean.loc[3, "full"] = pd.NA  # the new mask is an ordinary, writable one
    assert lean["full"].isna().sum() == 1 and frame["full"].notna().all()


def test_masked_builds_int_and_float_arrays() -> None:
    mask = np.array([False, True])
    assert masked(np.array([1, 2]), mask).dtype == "Int64"
    assert masked(np.array([1.0, 2.0]), mask).isna().tolist() == [False, True]


@pytest.mark.parametrize("block", [1, 3, 1 << 20])
def test_number_in_order_seen_is_factorize(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(liveness, "BLOCK_ROWS", block)
    rng = np.random.default_rng(block)
    for rows in (0, 1, 9, 500):
        for top in (1, 4, 300, 10**12):  # the last is hashed: too wide for a table
            values = rng.integers(0, top, rows).astype(np.int64)
            expected = pd.factorize(values)[0]
            np.testing.assert_array_equal(liveness.number_in_order_seen(values.copy()), expected)
            groups = expected.astype(np.int64)
            first = np.unique(groups, return_index=True)[1]
            np.testing.assert_array_equal(liveness.first_rows(groups), first)


@pytest.mark.parametrize("capture", ["keras_train", "eager_ops", "layers_cnn_xla", "two_runs"])
def test_analyses_by_blocks_match_whole_arrays(
    monkeypatch: pytest.MonkeyPatch, capture: str
) -> None:
    """Blocks of 7 rows (many blocks, most rows at a block's edge) against one block."""

    def tables() -> list[pd.DataFrame]:
        prof = traceparse.load(FIXTURES / capture)
        return [prof.steps, prof.ops, prof.scopes(1), prof.leaks().by_op, prof.peak]

    whole = tables()
    monkeypatch.setattr(liveness, "BLOCK_ROWS", 7)
    monkeypatch.setattr(steps, "BLOCK_ROWS", 7)
    for expected, got in zip(whole, tables(), strict=True):
        pd.testing.assert_frame_equal(got, expected)


def test_step_windows_out_of_time_order_by_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step ids that interleave (two executions overlapping, frees taking their
    allocation's step) are reduced per block, then across blocks."""
    events = []
    for n in range(12):
        step = 11 + n % 3
        events += [alloc(100 * n, n + 1, MiB, step_id=step), free(100 * n + 150, n + 1, MiB)]
    whole = profile_of(events).steps
    assert len(whole) == 3 and whole["start_ps"].tolist() == [0, 100, 200]
    monkeypatch.setattr(steps, "BLOCK_ROWS", 2)
    monkeypatch.setattr(liveness, "BLOCK_ROWS", 2)
    pd.testing.assert_frame_equal(profile_of(events).steps, whole)
