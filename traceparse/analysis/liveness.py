"""When each allocation stops holding memory, and which allocations are live at an event.

An allocation ends at its free. Where the free is missing but a later
allocation reuses the same (host, allocator, address), the profiler dropped the
free: the allocation ended no later than that reuse, and counting it as live
afterwards would double-count the address (xprof's breakdown replaces it the
same way). Everything here works on whole columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceparse.decode.trace import unwritten_zeros

# An end event of -1 means "still live when the capture stopped".
STILL_LIVE = -1
# Passes over millions of rows take this many at a time: what each finds is
# arrays of a row each, and a block of them is a few MB, not hundreds.
BLOCK_ROWS = 1 << 20


def held_bytes(allocations: pd.DataFrame) -> np.ndarray:
    """Bytes each allocation holds in the allocator: its chunk, else its request, else 0."""
    return _first_known(allocations["allocated_bytes"], allocations["requested_bytes"])


def requested_or_held(allocations: pd.DataFrame) -> np.ndarray:
    """Bytes each allocation asked for; where the request is unknown, the bytes it holds."""
    return _first_known(allocations["requested_bytes"], allocations["allocated_bytes"])


def _first_known(first: pd.Series, second: pd.Series) -> np.ndarray:
    """``first`` where known, else ``second``, else 0, as int64: one new array of a row
    each (``fillna`` on the Series makes a copy per call, millions of rows)."""
    values = first.to_numpy(dtype=np.int64, na_value=0, copy=True)
    missing = first.isna().to_numpy(dtype=bool)
    if missing.any():
        values[missing] = second.array[missing].to_numpy(dtype=np.int64, na_value=0)
    return values


def group_codes(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """One integer per distinct combination of ``columns`` (NA is its own value)."""
    if frame.empty:
        return np.zeros(0, dtype=np.int64)
    if all(isinstance(frame[c].dtype, pd.CategoricalDtype) for c in columns):
        codes = [frame[column].cat.codes.to_numpy() for column in columns]
        if all((c == c[0]).all() for c in codes):  # one group (one allocator, say)
            # Zeros on pages never written, which hold no memory (callers only read).
            return unwritten_zeros(len(frame), np.int64)
        sizes = [len(frame[column].cat.categories) for column in columns]
        return numbered_combinations(codes, sizes)
    grouped = frame.groupby(columns, observed=True, dropna=False, sort=False)
    return grouped.ngroup().to_numpy(dtype=np.int64)


def owner_groups(frame: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Each row's (host, allocator) group (``group_codes``), and per group its
    ``host`` and ``allocator``: a value per owner is then spread over the rows by
    group, never looked up per row (rows can be millions, owners are a handful)."""
    group = group_codes(frame, ["host", "allocator"])
    return group, frame[["host", "allocator"]].iloc[first_rows(group)]


def numbered_combinations(codes: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """Each row's combination of ``codes`` (each in ``[-1, size)``, -1 for NA),
    numbered 0, 1, ... in order of first appearance as ``groupby(sort=False).ngroup()``
    numbers them: no strings per row.

    The codes are packed into one int64 a row, in place, from the narrow codes:
    each step of ``a * b + c`` on millions of rows would be a new array.
    """
    packed = codes[0].astype(np.int64)  # a new array
    packed += 1  # NA (-1) -> 0
    for code, size in zip(codes[1:], sizes[1:], strict=True):  # the first is the highest digit
        packed *= size + 1
        packed += code
        packed += 1
    return number_in_order_seen(packed)


def number_in_order_seen(packed: np.ndarray) -> np.ndarray:
    """``pd.factorize(packed)[0]``: each value numbered 0, 1, ... in order of first
    appearance, for non-negative int64 ``packed``, which it overwrites.

    Where the values span a small range (packed categorical codes), a table of
    it replaces the hash table, a block of rows at a time: no new array of a
    row each, in a fraction of the time.
    """
    rows = packed.size
    top = int(packed.max()) if rows else 0
    if top > 8 * rows + (1 << 16):  # sparse values: hashed
        return pd.factorize(packed, sort=False)[0].astype(np.int64, copy=False)
    first = np.full(top + 1, rows, dtype=np.int64)  # each value's first row
    for begin in range(0, rows, BLOCK_ROWS):
        block = packed[begin : begin + BLOCK_ROWS]
        np.minimum.at(first, block, np.arange(begin, begin + block.size))
    used = np.flatnonzero(first < rows)
    number = np.full(top + 1, -1, dtype=np.int64)
    number[used[np.argsort(first[used], kind="stable")]] = np.arange(used.size)
    for begin in range(0, rows, BLOCK_ROWS):
        block = packed[begin : begin + BLOCK_ROWS]
        block[...] = number[block]
    return packed


def group_sums(group: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Per group, the sum of int64 ``values`` (wrapping as numpy's and pandas' sums do)."""
    if not values.size:
        return np.zeros(size, dtype=np.int64)
    # Float sums are exact while every partial sum stays under 2**53, and
    # ``bincount`` is many times faster than ``np.add.at``.
    bound = max(abs(int(values.max())), abs(int(values.min()))) * values.size
    if bound < 2**53:
        # A block at a time: bincount reads its weights as a float64 copy.
        total_float = np.zeros(size, dtype=np.float64)
        for start in range(0, values.size, BLOCK_ROWS):
            part = slice(start, start + BLOCK_ROWS)
            total_float += np.bincount(group[part], weights=values[part], minlength=size)
        return total_float.astype(np.int64)
    total = np.zeros(size, dtype=np.int64)
    np.add.at(total, group, values)
    return total


def first_rows(group: np.ndarray) -> np.ndarray:
    """The first row of each group, for groups numbered in order of first appearance
    (as ``group_codes`` numbers them)."""
    # The highest group so far steps up by one at each group's first row; found
    # a block of rows at a time (millions of rows: a running maximum of them all
    # would be one more array of a row each).
    found = [np.zeros(0, dtype=np.int64)]
    top = -1
    for begin in range(0, group.size, BLOCK_ROWS):
        seen = np.maximum.accumulate(group[begin : begin + BLOCK_ROWS])
        np.maximum(seen, top, out=seen)
        new = np.arange(top + 1, int(seen[-1]) + 1)
        found.append(begin + np.searchsorted(seen, new, side="left"))
        top = int(seen[-1])
    return np.concatenate(found)


def end_events(allocations: pd.DataFrame) -> np.ndarray:
    """The timeline row where each allocation stops holding memory, or ``STILL_LIVE``.

    That is its free; failing that, the next allocation at the same address in
    the same allocator (the free was dropped); failing that, it is still live.
    """
    n = len(allocations)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    alloc = allocations["alloc_event"].to_numpy(dtype=np.int64)
    # Addresses are opaque 64-bit ids (negative past 2**63); only NA has none,
    # and NA sorts apart from every real address.
    address = allocations["address"].to_numpy(dtype=np.int64, na_value=0)
    known = allocations["address"].notna().to_numpy(dtype=bool)
    # Owner and whether the address is known, in one key: a smaller sort.
    owner = np.multiply(group_codes(allocations, ["host", "allocator"]), 2)
    owner += known
    # Sorted by owner, address, then alloc. Each key is another array of a row
    # each in the sort, so an owner that is one for all rows is left out, and so
    # is alloc where the rows are in its order already (the sort is stable).
    one_owner = bool((owner == owner[0]).all())
    if one_owner:
        del owner
    keys = [address] if one_owner else [address, owner]
    if not (alloc[1:] >= alloc[:-1]).all():
        keys.insert(0, alloc)
    order = np.lexsort(keys)
    del keys
    by_address = address[order]
    same = by_address[1:] == by_address[:-1]
    del by_address
    if not one_owner:
        by_owner = owner[order]
        same &= by_owner[1:] == by_owner[:-1]
        del by_owner
    same &= known[order][1:]
    # Each row followed by another at its address: that one's allocation ends it.
    # A free ends it first. Both a block of rows at a time: millions of rows.
    nxt = np.full(n, STILL_LIVE, dtype=np.int64)
    for begin in range(0, same.size, BLOCK_ROWS):
        at = begin + np.flatnonzero(same[begin : begin + BLOCK_ROWS])
        nxt[order[at]] = alloc[order[at + 1]]
    del order, same
    free = allocations["free_event"].array
    for begin in range(0, n, BLOCK_ROWS):
        ends = free[begin : begin + BLOCK_ROWS].to_numpy(dtype=np.int64, na_value=STILL_LIVE)
        np.copyto(nxt[begin : begin + BLOCK_ROWS], ends, where=ends >= 0)
    return nxt


def live_mask(
    allocations: pd.DataFrame, ends: np.ndarray, event: np.ndarray | np.integer
) -> np.ndarray:
    """Whether each allocation is live just after the timeline row ``event[i]``.

    ``event`` gives, per allocation, the row to test against (the peak of its
    own allocator, say), or one row for all; -1 means "not asked" and gives False.
    """
    alloc = allocations["alloc_event"].to_numpy(dtype=np.int64)
    asked = event >= 0
    return asked & (alloc <= event) & ((ends == STILL_LIVE) | (ends > event))
