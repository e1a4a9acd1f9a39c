"""The decoder's compiled loops, when they were built, with the numpy path as
the fallback.

``_native`` (``_native.c``) is built by ``pip install`` where a C compiler is
at hand; elsewhere the install goes on without it. Both paths give the same
arrays (tests/test_native.py decodes every fixture both ways), so which one ran
never shows in a table. ``TRACEPARSE_PURE_PYTHON=1`` in the environment, or
``use_native(False)``, makes the decoder take the numpy path.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceparse.compiled import Extension
from traceparse.decode import wire
from traceparse.decode.stat_tables import StatTables

_extension = Extension("traceparse.decode._native", off_by="TRACEPARSE_PURE_PYTHON")
_native = _extension.module


def available() -> bool:
    """Whether the compiled loops were built and are in use."""
    return _extension.on


def use_native(on: bool) -> AbstractContextManager[None]:
    """Decode with (``True``, where built) or without the compiled loops inside
    the block; for tests and benchmarks."""
    return _extension.used(on)


_NO_IDS = np.zeros(0, dtype=np.uint64)


def _call(loop: Any, *args: object) -> Any:
    """One of the compiled loops; bad bytes raise ``WireError``, as on the numpy path."""
    try:
        return loop(*args)
    except ValueError as exc:
        raise wire.WireError(str(exc)) from exc


@dataclass
class Scanned:
    """What ``scan_lines`` found: the picked events (start, end, metadata id,
    line, index in line), the run records (start, end, metadata id, line), per
    ``timed`` id the count and total duration_ps of the other events, and each
    line's timestamp_ns."""

    picked: list[np.ndarray]
    runs: list[np.ndarray]
    counts: np.ndarray
    totals: np.ndarray
    stamps: np.ndarray


def scan_lines(
    data: wire.Buffer,
    lines: list[tuple[int, int]],
    picked: np.ndarray,
    timed: np.ndarray,
    markers: np.ndarray,
    run_named: np.ndarray = _NO_IDS,
    run_stats: np.ndarray = _NO_IDS,
) -> Scanned:
    """Every event of ``lines`` (``(start, end)`` in ``data``), once: an event is
    picked by its metadata id (``picked``) or by an integer stat of a
    ``markers`` id; a run record by its id (``run_named``) or by a stat of a
    ``run_stats`` id; else its duration counts for its id if ``timed``. The id
    arrays are sorted and unique (``wire.metadata_ids``)."""
    bounds = np.array(lines, dtype=np.int64).reshape(-1, 2)
    counts = np.zeros(timed.size, dtype=np.int64)
    totals = np.zeros(timed.size, dtype=np.int64)
    stamps = np.zeros(len(bounds), dtype=np.int64)
    ids = [
        np.ascontiguousarray(i, dtype=np.uint64)
        for i in (picked, timed, markers, run_named, run_stats)
    ]
    raw = _call(_native.scan_lines, data, bounds, *ids, counts, totals, stamps)
    columns = [np.frombuffer(c, dtype=np.int64) for c in raw]
    return Scanned(columns[:5], columns[5:], counts, totals, stamps)


def read_events(
    data: wire.Buffer,
    starts: np.ndarray,
    ends: np.ndarray,
    ids: np.ndarray,
    rows: np.ndarray,
    row_count: int,
) -> tuple[np.ndarray, np.ndarray, StatTables]:
    """The events ``data[starts[i]:ends[i]]``: (offset_ps, duration_ps as uint64,
    their stats as ``StatTables`` of ``row_count`` rows): a stat whose id is
    ``ids[k]`` (sorted, unique) lands in row ``rows[k]``."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    offsets = np.zeros(starts.size, dtype=np.uint64)
    durations = np.zeros(starts.size, dtype=np.uint64)
    tables = StatTables.zeros(row_count, starts.size)
    ids = np.ascontiguousarray(ids, dtype=np.uint64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    _call(_native.read_events, data, starts, ends, ids, rows, offsets, durations, *tables.arrays())
    return offsets, durations, tables


def read_stats(
    data: wire.Buffer, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Every stat of the events ``data[starts[i]:ends[i]]`` (meant for a few):
    (offset_ps, duration_ps as uint64, int64 columns of the stats in wire order:
    event, metadata id, value kind, value bits, payload start, payload length)."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    offsets = np.zeros(starts.size, dtype=np.uint64)
    durations = np.zeros(starts.size, dtype=np.uint64)
    raw = _call(_native.read_stats, data, starts, ends, offsets, durations)
    return offsets, durations, [np.frombuffer(c, dtype=np.int64) for c in raw]


def pair_events(
    owner: np.ndarray, address: np.ndarray, known: np.ndarray, is_allocation: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``tables.build.pair_events`` in one pass: (allocation event indices, their
    frees' or -1, frees that pair with nothing), each in time order."""
    is_allocation = np.ascontiguousarray(is_allocation, dtype=bool)
    allocations = np.empty(int(np.count_nonzero(is_allocation)), dtype=np.int64)
    frees = np.empty_like(allocations)
    orphans = np.empty(is_allocation.size - allocations.size, dtype=np.int64)
    count = _call(
        _native.pair_events,
        np.ascontiguousarray(owner, dtype=np.int32),
        np.ascontiguousarray(address, dtype=np.int64),
        np.ascontiguousarray(known, dtype=bool),
        is_allocation,
        allocations,
        frees,
        orphans,
    )
    # Frees with no allocation are few: a copy lets the array for every free go.
    return allocations, frees, orphans[:count].copy()


# Sizes past this go to Python's replay (its ints have no limit): the compiled
# one keeps every address and sum within int64 (_native.c, BFC_LARGEST).
_REPLAY_LARGEST = 1 << 60
_INT32_ROOM = 1 << 31


def bfc_replay(
    first_region: int,
    before: int,
    warm_up: bool,
    held: np.ndarray,
    pre: np.ndarray,
    ghosts: np.ndarray,
    kinds: np.ndarray,
    refs: np.ndarray,
    places: np.ndarray,
    warm: np.ndarray,
    requests: np.ndarray,
    events: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``analysis.predict_bfc.simulate`` in one compiled pass: (the in-use counter
    after each of ``events`` events, carried forward; each allocation row's chunk;
    the regions' sizes), or None where the sizes leave the range the compiled
    replay keeps (the caller replays in Python). ``before``: the counter when the
    capture started less the chunks it frees without their allocation;
    ``requests``: per allocation row, whole bytes (0 or less: not sent)."""
    if not (
        0 < first_region <= _REPLAY_LARGEST
        and abs(before) <= _REPLAY_LARGEST
        and all(np.all(np.abs(a) <= _REPLAY_LARGEST) for a in (held, pre, ghosts, requests))
        # Items refer to rows and events as int32 (_native.c): half the memory.
        and max(events, len(requests), len(pre)) < _INT32_ROOM
    ):
        return None
    counter = np.empty(events, dtype=np.float64)
    chunks = np.empty(len(requests), dtype=np.int64)
    params = np.array([first_region, before, int(warm_up)], dtype=np.int64)
    args = [np.ascontiguousarray(a, dtype=np.int64) for a in (held, pre, ghosts)]
    try:
        regions = _native.bfc_replay(
            params,
            *args,
            np.ascontiguousarray(kinds, dtype=np.uint8),
            np.ascontiguousarray(refs, dtype=np.int32),
            np.ascontiguousarray(places, dtype=np.int32),
            np.ascontiguousarray(warm, dtype=np.int64),
            np.ascontiguousarray(requests, dtype=np.int64),
            counter,
            chunks,
        )
    except (OverflowError, ValueError):  # beyond int64's room, or a program it cannot read
        return None
    return counter, chunks, np.frombuffer(regions, dtype=np.int64)
