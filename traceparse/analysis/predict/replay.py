"""Replay a capture's allocations in order with new sizes: the new in-use bytes.

The allocator's in-use counter after each event is the captured one plus, for
every allocation made and not yet freed by then, the change in the bytes it
holds (its chunk: the request rounded up to the BFC allocator's 256-byte
granule, plus the slack of an unsplit chunk). Bytes from before the capture
and the reservation stay as captured. Nothing is re-placed: this gives the
bounds (each chunk at its smallest and at its largest) and the prediction at
the captured batch; the point estimate elsewhere places every chunk
(``predict_bfc``, docs/predict.md).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.peak import in_use

# The allocator's rules, as the allocator model (analysis/bfc.py) states them.
from traceparse.analysis.predict.batch import first_ids
from traceparse.analysis.predict.bfc import GRANULE, MAX_INTERNAL_FRAGMENTATION, is_region
from traceparse.analysis.predict.fit import match_keys, program_names
from traceparse.tables.select import row_index_type


def rounded(requested: np.ndarray) -> np.ndarray:
    """``requested`` rounded up to the allocator's granule (as float)."""
    out = np.divide(requested, GRANULE, dtype=np.float64)
    np.ceil(out, out=out)
    out *= GRANULE
    return out


class _Invariant:
    """What ``chunks`` reads of the captured arrays alone, kept for the last ones
    asked: a capacity search or a report asks ``chunks`` of the same captured
    arrays dozens of times. Held by weak reference: the arrays' owner decides how
    long they live, and a dead one's identity is never matched."""

    def __init__(self, requested: np.ndarray, settled: np.ndarray, allocated: np.ndarray) -> None:
        self.arrays = tuple(weakref.ref(x) for x in (requested, settled, allocated))
        # A chunk handed out whole with slack whose size is a region's (see ``chunks``).
        self.region = np.flatnonzero(
            is_region(settled.astype(np.int64)) & (settled > rounded(requested))
        )


_INVARIANTS: list[_Invariant] = []


def _invariant(requested: np.ndarray, settled: np.ndarray, allocated: np.ndarray) -> _Invariant:
    for found in _INVARIANTS:
        r, s, a = (ref() for ref in found.arrays)
        if r is requested and s is settled and a is allocated:
            return found
    made = _Invariant(requested, settled, allocated)
    _INVARIANTS.insert(0, made)
    del _INVARIANTS[2:]
    return made


def largest_whole(new: np.ndarray, twice: np.ndarray | None = None) -> np.ndarray:
    """The largest chunk the BFC allocator hands out whole for each rounded request
    ``new``: just under twice it, or it and 128 MiB, whichever is less (never under
    it). ``twice``: ``new * 2`` where made already, used up in place."""
    whole = new * 2.0 if twice is None else twice
    whole -= GRANULE
    np.minimum(whole, new + MAX_INTERNAL_FRAGMENTATION, out=whole)
    np.maximum(whole, new, out=whole)
    return whole


def chunks(
    new_requested: np.ndarray, requested: np.ndarray, settled: np.ndarray, allocated: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bytes each allocation holds at its new request: (point, low, high).

    ``settled`` is the chunk the allocator settles on for the allocation (the
    smallest it got for the same request of the same op in any step: a larger
    one was a free chunk that happened to be handed out whole), ``allocated``
    the chunk it got. An unchanged request keeps its settled chunk. The BFC
    allocator hands out a free chunk whole unless it is at least twice the
    rounded request, so a resized request that still fits its settled chunk,
    in less than twice, is predicted to get that chunk again (a slab reused
    every step does); otherwise its rounded request. Low: no slack. High: the
    largest chunk the allocator hands out whole for the request (just under
    twice it, or 128 MiB more), since which free chunks exist at the moment
    depends on the allocator's regions and history, not on this allocation.
    """
    # In place where it can be: each array is as long as the allocations.
    new = rounded(new_requested)
    same = new_requested == requested
    twice = new * 2.0
    keep = new <= settled
    keep &= settled < twice
    keep |= same
    point = np.where(keep, settled, new)
    del keep
    # A chunk handed out whole with slack whose size is a region's (2 MiB times a
    # power of two, as the allocator grows on demand) was a region; a request
    # that outgrows it gets a new region, doubled until it fits, whole when that
    # is less than twice the request (the allocator grows its regions by doubling).
    # Only the (few) regions' rows can: the rest is not computed.
    rows = _invariant(requested, settled, allocated).region
    if len(rows):
        was, want = settled[rows], new[rows]
        rows, was, want = rows[want > was], was[want > was], want[want > was]
        doubled = was * 2.0 ** np.ceil(np.log2(want / was))
        grown = doubled < 2 * want
        point[rows[grown]] = doubled[grown]
    low = np.minimum(point, new)
    whole = largest_whole(new, twice)
    high = np.multiply(allocated, same)
    np.maximum(high, point, out=high)
    np.maximum(high, whole, out=high)
    return point, low, high


def settled_chunks(keys: pd.DataFrame, requested: np.ndarray, allocated: np.ndarray) -> np.ndarray:
    """Per allocation: the smallest chunk given to the same request of the same
    (host, allocator, op, occurrence in its step) anywhere in the capture."""
    frame = keys[["host", "allocator", "op", "occurrence"]].copy()
    frame["requested"] = requested
    frame["allocated"] = allocated
    smallest = frame.groupby(
        ["host", "allocator", "op", "occurrence", "requested"], sort=False, dropna=False
    )["allocated"].transform("min")
    return smallest.to_numpy(dtype=np.float64)


def settled_of(
    allocations: pd.DataFrame, requested: np.ndarray, allocated: np.ndarray
) -> np.ndarray:
    """``settled_chunks`` of ``fit.match_keys(allocations)``, from the table's
    category codes: the op names renamed (``program_names``) once per distinct
    name and the occurrences counted over integer keys, with no object per
    allocation. A table without categories, or with a missing host or
    allocator (``match_keys`` leaves such rows without an occurrence), takes
    ``match_keys`` itself."""
    columns = [allocations[c] for c in ("host", "allocator", "op")]
    if not all(isinstance(c.dtype, pd.CategoricalDtype) for c in columns) or any(
        bool(c.isna().any()) for c in columns[:2]
    ):
        return settled_chunks(match_keys(allocations), requested, allocated)
    host, allocator, op = (c.cat.codes.to_numpy(dtype=np.int64) for c in columns)
    # The op names as ``program_names`` renames them: its ranks are over the names
    # present (a missing one is ""), so only the categories in use are renamed.
    used = np.unique(op)
    present = used[used >= 0]
    names = list(columns[2].cat.categories.to_numpy(dtype=object)[present])
    table = np.zeros(int(op.max(initial=0)) + 2, dtype=np.int64)  # the last: missing
    if len(used) > len(present):  # a missing name, as ``program_names`` reads it
        names.append(None)
        present = np.r_[present, len(table) - 1]
    renamed = program_names(pd.Series(names, dtype=object)).to_numpy(dtype=object)
    table[present] = pd.factorize(renamed)[0]
    op = table[op]
    step = pd.factorize(allocations["step"].to_numpy(dtype=np.float64, na_value=-1.0))[0].astype(
        np.int64
    )
    # The occurrence of each allocation's (host, allocator, step, op) so far.
    group, _ = first_ids(host, allocator, step, op)
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
    counts = np.diff(np.r_[starts, len(order)])
    occurrence = np.empty(len(order), dtype=np.int64)
    occurrence[order] = np.arange(len(order)) - np.repeat(starts, counts)
    sized = pd.factorize(np.asarray(requested, dtype=np.float64), use_na_sentinel=False)[0]
    key, _ = first_ids(host, allocator, op, occurrence, sized)
    smallest = pd.Series(np.asarray(allocated, dtype=np.float64)).groupby(key).transform("min")
    return smallest.to_numpy(dtype=np.float64)


@dataclass
class Replayed:
    """Per (host, allocator) group: the new in-use bytes after each of its events."""

    events: dict[tuple[object, object], np.ndarray]  # timeline rows of the group
    bytes: dict[tuple[object, object], np.ndarray]  # new in-use after each of them

    def peak(self, key: tuple[object, object]) -> tuple[int, int]:
        """(timeline row, bytes) of the latest event at the group's new maximum."""
        values = self.bytes[key]
        if not len(values):
            return -1, 0
        at = _latest_at_top(values)
        return int(self.events[key][at]), round(float(values[at]))

    def peaks(self) -> Replayed:
        """Each group's ``peak`` event alone, for a bound that reads only its peak:
        no counter as long as the timeline kept."""
        events, values = {}, {}
        for key, found in self.bytes.items():
            at = _latest_at_top(found) if len(found) else 0
            events[key] = self.events[key][at : at + 1].copy()
            values[key] = found[at : at + 1].copy()
        return Replayed(events, values)

    def larger(self, other: Replayed) -> Replayed:
        """Of two ``peaks`` of one program's counters, per group the peak of their
        larger value at each event: the higher peak, the later of two equal ones
        (the larger counter is at that value wherever either is)."""
        events, values = {}, {}
        for key, mine in self.bytes.items():
            theirs = other.bytes[key]
            if not len(mine) or not len(theirs):
                take = other if not len(mine) else self
            elif mine[0] != theirs[0]:
                take = self if mine[0] > theirs[0] else other
            else:
                take = self if self.events[key][0] >= other.events[key][0] else other
            events[key], values[key] = take.events[key], take.bytes[key]
        return Replayed(events, values)

    def lowest_step_peak(self, key: tuple[object, object], steps: np.ndarray) -> tuple[int, int]:
        """(timeline row, bytes) of the peak of the step that peaks lowest, ``steps``
        being each timeline row's step (NaN outside any); the events outside any
        step count with every step. Without two steps, ``peak``."""
        values, rows = self.bytes[key], self.events[key]
        mine = steps[rows]
        marked = np.flatnonzero(~np.isnan(mine))
        if not len(marked) or (mine[marked] == mine[marked[0]]).all():
            return self.peak(key)
        # Each step's first event at its maximum; of those, the lowest (first among
        # equals, steps in ascending order).
        # Steps by hashing, not sorting millions of events (a few hundred steps).
        codes, found = pd.factorize(mine[marked], size_hint=1024)
        vals = values[marked]
        highest = np.full(len(found), -np.inf)
        np.maximum.at(highest, codes, vals)
        at_top = np.flatnonzero(vals == highest[codes])
        first = np.full(len(found), len(vals), dtype=np.int64)
        np.minimum.at(first, codes[at_top], at_top)
        tops = marked[first[np.argsort(found, kind="stable")]]
        at = int(tops[int(np.argmin(values[tops]))])
        outside = np.flatnonzero(np.isnan(mine))
        if len(outside):
            top = int(outside[int(np.argmax(values[outside]))])
            at = top if values[top] >= values[at] else at
        return int(rows[at]), round(float(values[at]))


def groups(timeline: pd.DataFrame) -> dict[tuple[object, object], np.ndarray]:
    """The timeline rows of each (host, allocator), in time order."""
    if len(timeline) and all(timeline[c].nunique(dropna=False) == 1 for c in ("host", "allocator")):
        # One allocator (the usual capture): every row, without grouping millions.
        first = timeline[["host", "allocator"]].iloc[0].astype(object)
        # Row numbers in half the memory where they fit (the rows of millions of events).
        kind = row_index_type(len(timeline))
        return {(first["host"], first["allocator"]): np.arange(len(timeline), dtype=kind)}
    keys = timeline[["host", "allocator"]].astype(object)
    out: dict[tuple[object, object], np.ndarray] = {}
    for key, rows in keys.groupby(["host", "allocator"], sort=True, dropna=False).indices.items():
        out[(key[0], key[1])] = np.sort(np.asarray(rows, dtype=np.int64))
    return out


def _latest_at_top(values: np.ndarray) -> int:
    """The index of the last of ``values`` (not empty) at their maximum."""
    return len(values) - 1 - int(np.argmax(values[::-1] == values.max()))


def live_change(start: np.ndarray, stop: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """The change in bytes at each of ``n`` timeline rows (and one past the end)
    of allocations holding ``weights`` from row ``start`` to before ``stop``: its
    running sum is their bytes live after each row. A bincount of the starts less
    one of the stops (as ``np.add.at``, faster); whole numbers under 2**53, so
    exact in any order."""
    change = np.bincount(start, weights=weights, minlength=n + 1)
    change -= np.bincount(stop, weights=weights, minlength=n + 1)
    return change


def replay(
    timeline: pd.DataFrame,
    allocations: pd.DataFrame,
    ends: np.ndarray,
    held: np.ndarray,
    new_held: np.ndarray,
    rows: dict[tuple[object, object], np.ndarray] | None = None,
) -> Replayed:
    """The in-use bytes after every event with each allocation holding ``new_held``
    instead of ``held`` from its allocation event to its end (``liveness.end_events``)."""
    n = len(timeline)
    change = np.asarray(new_held, dtype=np.float64) - np.asarray(held, dtype=np.float64)
    # Only the allocations whose bytes change move the counter (at the captured
    # batch, most or all keep theirs). Bytes are whole numbers under 2**53: the
    # sums are exact in any order.
    moved = np.flatnonzero(change)
    delta: np.ndarray | None = None
    if len(moved):
        start = allocations["alloc_event"].to_numpy(dtype=np.int64)[moved]
        stop = ends[moved]
        stop = np.where(stop == STILL_LIVE, n, stop)
        delta = live_change(start, stop, change[moved], n)
        del start, stop
    del change, moved
    captured = in_use(timeline)
    rows = groups(timeline) if rows is None else rows
    out = {}
    for key, events in rows.items():
        # One allocator's rows are often the whole timeline: slices, not a gather,
        # and the running sum made in the delta's own memory (millions of events).
        whole = len(events) == n and (n == 0 or (events[0] == 0 and events[-1] == n - 1))
        if delta is None:
            out[key] = captured[slice(0, n) if whole else events].astype(np.float64)
        elif whole:
            np.cumsum(delta, out=delta)
            bytes_ = delta[:n]
            bytes_ += captured
            out[key] = bytes_
        else:
            bytes_ = np.cumsum(delta[events])
            bytes_ += captured[events]
            out[key] = bytes_
    return Replayed(rows, out)


def live_at(allocations: pd.DataFrame, ends: np.ndarray, event: int) -> np.ndarray:
    """A mask of the allocations holding memory right after timeline row ``event``."""
    start = allocations["alloc_event"].to_numpy(dtype=np.int64)
    return (start <= event) & ((ends == STILL_LIVE) | (ends > event))
