"""When each allocation stops holding memory, and which allocations are live at an event.

An allocation ends at its free. Where the free is missing but a later
allocation reuses the same (host, allocator, address), the profiler dropped the
free: the allocation ended no later than that reuse, and counting it as live
afterwards would double-count the address (xprof's breakdown replaces it the
same way). Everything here works on whole columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# An end event of -1 means "still live when the capture stopped".
STILL_LIVE = -1


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
        # The categories' codes packed into one integer, numbered in order of first
        # appearance as groupby(sort=False).ngroup() does: no strings per row.
        # Packed in place, from the narrow codes: no new array per step.
        packed = np.zeros(len(frame), dtype=np.int64)
        for column in columns:
            packed *= len(frame[column].cat.categories) + 1
            packed += frame[column].cat.codes.to_numpy()
            packed += 1  # NA (-1) -> 0
        if (packed == packed[0]).all():  # one group (one allocator, say): no hashing
            # A new np.zeros, not ``packed`` zeroed: its pages are the kernel's zero
            # pages, which take no memory until written (callers only read them).
            del packed
            return np.zeros(len(frame), dtype=np.int64)
        return pd.factorize(packed, sort=False)[0].astype(np.int64, copy=False)
    grouped = frame.groupby(columns, observed=True, dropna=False, sort=False)
    return grouped.ngroup().to_numpy(dtype=np.int64)


def group_sums(group: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Per group, the sum of int64 ``values`` (wrapping as numpy's and pandas' sums do)."""
    if not values.size:
        return np.zeros(size, dtype=np.int64)
    # Float sums are exact while every partial sum stays under 2**53, and
    # ``bincount`` is many times faster than ``np.add.at``.
    bound = max(abs(int(values.max())), abs(int(values.min()))) * values.size
    if bound < 2**53:
        # A block at a time: bincount reads its weights as a float64 copy.
        block = 1 << 20
        total_float = np.zeros(size, dtype=np.float64)
        for start in range(0, values.size, block):
            part = slice(start, start + block)
            total_float += np.bincount(group[part], weights=values[part], minlength=size)
        return total_float.astype(np.int64)
    total = np.zeros(size, dtype=np.int64)
    np.add.at(total, group, values)
    return total


def first_rows(group: np.ndarray) -> np.ndarray:
    """The first row of each group, for groups numbered in order of first appearance
    (as ``group_codes`` numbers them)."""
    if not group.size:
        return np.zeros(0, dtype=np.int64)
    seen = np.maximum.accumulate(group)
    return np.flatnonzero(np.append(True, seen[1:] > seen[:-1]))


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
    pairs = np.flatnonzero(same)
    nxt = np.full(n, STILL_LIVE, dtype=np.int64)
    nxt[order[pairs]] = alloc[order[pairs + 1]]
    # A free ends it first (read last: a copy where some are missing).
    free = allocations["free_event"].to_numpy(dtype=np.int64, na_value=STILL_LIVE)
    np.copyto(nxt, free, where=free >= 0)
    return nxt


def live_mask(allocations: pd.DataFrame, ends: np.ndarray, event: np.ndarray) -> np.ndarray:
    """Whether each allocation is live just after the timeline row ``event[i]``.

    ``event`` gives, per allocation, the row to test against (the peak of its
    own allocator, say); -1 means "not asked" and gives False.
    """
    alloc = allocations["alloc_event"].to_numpy(dtype=np.int64)
    asked = event >= 0
    return asked & (alloc <= event) & ((ends == STILL_LIVE) | (ends > event))
