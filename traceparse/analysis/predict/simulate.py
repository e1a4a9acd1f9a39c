"""Replay a capture's allocator events through the BFC model (``analysis/bfc.py``)
at new request sizes: the in-use counter after every event, and each chunk.

The allocator's state when the capture started is not in the capture, so it is
rebuilt from what the capture does show, in the order a training script makes
it: the chunks held before the capture (the inventoried variables the profiler
sees, then the rest of the bytes held, then the chunks the capture
frees without having seen them allocated), and a warm-up: the events of the
first captured step replayed once (the capture starts after a step of the same
program), its leftovers freed. Then the captured events, in order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.predict.bfc import BFC, FIRST_REGION, GRANULE, is_region
from traceparse.decode import native
from traceparse.tables.select import equal_to, row_index_type

ALLOC, FREE, PREFREE = 0, 1, 2
# A program's per-item columns: arrays as ``programs`` makes them, lists where
# written by hand.
Ints = np.ndarray | list[int]


@dataclass
class Program:
    """One (host, allocator)'s events as the model replays them."""

    events: np.ndarray  # the group's timeline rows, in order
    kinds: Ints  # per item: ALLOC, FREE (an allocation's end) or PREFREE
    refs: Ints  # allocation row, or index into ``pre``
    places: Ints  # per item: index into ``events`` of the row it happens at
    pre: list[int]  # chunks held before the capture and freed in it
    held: list[int]  # chunks held before the capture and kept (allocated first)
    before: int  # the counter when the capture started (without reservations)
    # The allocator's memory limit (in use + available) where it may reserve it up
    # front (a device's allocator); 0 where it always grows on demand, or unknown.
    capacity: int
    warm: Ints  # items of the first step: the warm-up
    # Reserved bytes after each event (added to the counter); a zero scalar where
    # no event reserves any (most captures: no array as long as the timeline).
    reserved: np.ndarray | np.float64


def programs(
    timeline: pd.DataFrame,
    allocations: pd.DataFrame,
    ends: np.ndarray,
    rows: dict[tuple[object, object], np.ndarray],
    kept: dict[object, list[int]] | None = None,
) -> dict[tuple[object, object], Program]:
    """A Program per (host, allocator). ``kept``: chunk sizes known to be held before
    the capture (the inventoried variables), allocated before the rest."""
    start = allocations["alloc_event"].to_numpy(dtype=np.int64)
    step = allocations["step"].to_numpy(dtype=np.float64, na_value=np.nan)
    dealloc = equal_to(timeline["kind"], "deallocation")
    out = {}
    for key, events in rows.items():
        mine = np.flatnonzero(
            equal_to(allocations["host"], key[0]) & equal_to(allocations["allocator"], key[1])
        )
        stop = ends[mine]
        freed = stop != STILL_LIVE
        # Deallocations that end no captured allocation: chunks from before the capture
        # (marked rows, not a sorted membership test over millions).
        ended = np.zeros(len(timeline), dtype=bool)
        ended[stop[freed]] = True
        lone = events[dealloc[events] & ~ended[events]]
        del ended
        chunk = column_at(timeline, "allocation_bytes", lone)
        delta = column_at(timeline, "delta_bytes", lone)
        pre = np.where(chunk > 0, chunk, -delta).astype(np.int64).tolist()
        item_rows = np.concatenate([stop[freed], lone, start[mine]]).astype(np.int64)
        item_kind = np.concatenate(
            [
                np.full(int(freed.sum()), FREE, np.uint8),
                np.full(len(lone), PREFREE, np.uint8),
                np.full(len(mine), ALLOC, np.uint8),
            ]
        )
        item_ref = np.concatenate([mine[freed], np.arange(len(lone)), mine]).astype(np.int64)
        # At one row, an end (a dropped free) comes before the allocation it makes room for.
        order = np.lexsort((item_kind == ALLOC, item_rows))
        item_rows, item_kind, item_ref = item_rows[order], item_kind[order], item_ref[order]
        steps = step[mine]
        warm = np.zeros(0, np.int64)
        if np.isfinite(steps).any():
            first = np.zeros(len(allocations), dtype=bool)
            first[mine[steps == np.nanmin(steps)]] = True
            made = item_kind != PREFREE  # the others' refs index ``pre``, not allocations
            warm = np.flatnonzero(made & first[np.where(made, item_ref, 0)])
        at_first = {
            name: float(column_at(timeline, name, events[:1])[0])
            for name in ("in_use_bytes", "delta_bytes", "reserved_bytes", "available_bytes")
        }
        before = at_first["in_use_bytes"] - at_first["delta_bytes"] - at_first["reserved_bytes"]
        known = [k for k in (kept or {}).get(key[1], []) if k > 0]
        if before - sum(pre) - sum(known) < 0:  # the inventory does not fit what was held
            known = []
        # Refs and places in half the memory where they fit (two per event of
        # millions; the compiled replay reads them so).
        index = row_index_type(max(len(allocations), len(pre), len(events)))
        out[key] = Program(
            events=events,
            kinds=item_kind,
            refs=item_ref.astype(index),
            places=np.searchsorted(events, item_rows).astype(index),
            pre=pre,
            held=known,
            before=max(int(before), 0),
            capacity=0
            if grows_on_demand(key[1])
            else int(at_first["in_use_bytes"] + at_first["available_bytes"]),
            warm=warm,
            reserved=_reserved_at(timeline, events),
        )
    return out


def grows_on_demand(allocator: object) -> bool:
    """Whether ``allocator`` always grows its regions on demand: oneDNN's CPU
    allocator, TensorFlow's host allocators and its BFC allocator for the CPU
    (``bfc_cpu_allocator_for_gpu``, ``TF_CPU_ALLOCATOR_USE_BFC``: made with
    ``allow_growth = true`` in tensorflow/core/common_runtime/process_state.cc)
    are; a device's may reserve its whole memory up front instead."""
    name = str(allocator).lower()
    return name in ("mklcpu", "cpu", "bfc_cpu_allocator_for_gpu") or "host" in name


def _reserved_at(timeline: pd.DataFrame, events: np.ndarray) -> np.ndarray | np.float64:
    column = timeline.get("reserved_bytes")
    if column is None or not bool(column.any()):  # most captures reserve nothing
        return np.float64(0.0)
    mine = column_at(timeline, "reserved_bytes", events)
    return mine if mine.any() else np.float64(0.0)


def column_at(timeline: pd.DataFrame, name: str, rows: np.ndarray) -> np.ndarray:
    """``name``'s values at timeline ``rows`` as float64 (missing: 0), read at those
    rows only: the timeline's columns are millions of rows long."""
    if name not in timeline:
        return np.zeros(len(rows))
    return timeline[name].take(rows).to_numpy(dtype=np.float64, na_value=0.0)


@dataclass
class Simulated:
    in_use: np.ndarray  # the counter after each of the program's events
    chunks: np.ndarray  # per allocation row: its chunk (0: not allocated here)
    regions: list[int]


def simulate(
    program: Program,
    requests: np.ndarray | list[float],
    ghosts: tuple[int, ...] = (),
    first_region: int = FIRST_REGION,
    warm_up: bool = True,
) -> Simulated:
    """Replays ``program`` with allocation row i asking ``requests[i]`` bytes (0 or
    less: not sent to this allocator). ``ghosts``: free chunks the capture shows the
    allocator had at its start that the rebuilt history does not make;
    ``first_region``: the allocator's first region (2 MiB when it grows on demand,
    its whole memory limit when it reserves that up front).

    Runs the compiled replay (``decode/_native.c``, ``bfc_replay``) where it was
    built and the sizes are within its range, else ``simulate_python``: the same
    numbers either way (tests/test_predict_bfc_native.py)."""
    if native.available():
        done = _simulate_compiled(program, requests, ghosts, first_region, warm_up)
        if done is not None:
            return done
    return simulate_python(program, requests, ghosts, first_region, warm_up)


def _whole_bytes(requests: np.ndarray | list[float]) -> np.ndarray | None:
    """``requests`` as whole bytes, truncated as ``int()`` does; None where a value
    is not a finite number (Python's replay then says what is wrong)."""
    values = np.asarray(requests)
    if values.dtype.kind not in "iuf" or (
        values.dtype.kind == "f" and not np.isfinite(values).all()
    ):
        return None
    if len(values) and np.abs(values).max() >= 2**62:  # past the compiled replay's range
        return None
    return values.astype(np.int64)


def _simulate_compiled(
    program: Program,
    requests: np.ndarray | list[float],
    ghosts: tuple[int, ...],
    first_region: int,
    warm_up: bool,
) -> Simulated | None:
    whole = _whole_bytes(requests)
    if whole is None:
        return None
    done = native.bfc_replay(
        first_region,
        program.before - sum(program.pre),
        warm_up,
        np.asarray(program.held, dtype=np.int64),
        np.asarray(program.pre, dtype=np.int64),
        np.asarray(ghosts, dtype=np.int64),
        np.asarray(program.kinds),
        np.asarray(program.refs),
        np.asarray(program.places),
        np.asarray(program.warm),
        whole,
        len(program.events),
    )
    if done is None:
        return None
    counter, chunks, regions = done
    counter += program.reserved  # the replay's own array: no copy as long as the timeline
    return Simulated(counter, chunks, regions.tolist())


def simulate_python(
    program: Program,
    requests: np.ndarray | list[float],
    ghosts: tuple[int, ...] = (),
    first_region: int = FIRST_REGION,
    warm_up: bool = True,
) -> Simulated:
    """``simulate`` in Python over ``analysis/bfc.py``'s model: the reference the
    compiled replay is held to, and the path where it was not built."""
    bfc = BFC(first_region)
    for size in program.held:
        bfc.allocate(int(size))
    # The rest of the counter when the capture started, in pieces that fill their
    # chunks exactly (powers of two, largest first): the captured counter already
    # counts whatever slack the real chunks had, so the model must add none.
    rest = (program.before - bfc.in_use - sum(program.pre)) // GRANULE * GRANULE
    for bit in reversed(range(max(rest, 0).bit_length())):
        if rest >> bit & 1:
            bfc.allocate(1 << bit)
    pre = [bfc.allocate(int(size))[0] for size in program.pre]
    for size in ghosts:
        bfc.add_region(int(size))
    # Lists index faster than arrays in the loop.
    kinds, refs = np.asarray(program.kinds).tolist(), np.asarray(program.refs).tolist()
    requests = np.asarray(requests).tolist()
    warm = np.asarray(program.warm).tolist()
    if warm_up and warm:
        live: dict[int, int] = {}
        for i in warm:
            ref = refs[i]
            if kinds[i] == ALLOC:
                size = int(requests[ref])
                if size > 0:
                    live[ref] = bfc.allocate(size)[0]
            elif ref in live:
                bfc.free(live.pop(ref))
        for address in live.values():
            bfc.free(address)
    counter: list[float] = [np.nan] * len(program.events)
    addresses: dict[int, int] = {}
    chunks = [0] * len(requests)
    allocate, free = bfc.allocate, bfc.free  # the loop runs once per event
    places = np.asarray(program.places).tolist()
    for kind, ref, place in zip(kinds, refs, places, strict=True):
        if kind == ALLOC:
            size = int(requests[ref])
            if size > 0:
                addresses[ref], chunks[ref] = allocate(size)
        elif kind == FREE:
            address = addresses.pop(ref, -1)
            if address >= 0:  # not sent to this allocator: nothing to free
                free(address)
        else:
            free(pre[ref])
        counter[place] = bfc.in_use
    filled = pd.Series(counter, dtype=np.float64).ffill().to_numpy(na_value=0.0)
    return Simulated(
        filled + program.reserved, np.asarray(chunks, dtype=np.int64), list(bfc.regions)
    )


def inventory_chunks(variables: pd.DataFrame | None) -> dict[object, list[int]]:
    """Per allocator: the bytes of each inventoried variable it held when the capture
    started, weights first (a model's weights exist before its optimizer's slots)."""
    if variables is None or variables.empty:
        return {}
    mine = variables[
        variables["traced"].fillna(False).to_numpy(dtype=bool)
        & variables["at_start"].fillna(False).to_numpy(dtype=bool)
    ]
    mine = mine.sort_values("role", key=lambda role: role != "weight", kind="stable")
    out: dict[object, list[int]] = {}
    for row in mine.itertuples(index=False):
        size = 0 if pd.isna(row.estimated_bytes) else int(row.estimated_bytes)
        out.setdefault(row.allocator, []).append(size)
    return out


# At most this many free chunks are added to the rebuilt history (each one costs a
# replay of the capture).
MAX_GHOSTS = 8


@dataclass(frozen=True)
class History:
    """What the replay adds to the rebuilt history, chosen by ``calibrate``."""

    first_region: int = FIRST_REGION
    ghosts: tuple[int, ...] = ()


def shows_regions(program: Program, requests: np.ndarray, chunks: np.ndarray) -> bool:
    """Whether the capture shows the allocator growing its regions on demand: one of
    ``program``'s allocations was handed out whole (larger than its rounded
    request) a chunk of a grown region's size (2 MiB doubled, ``is_region``) that
    no allocation of the capture asked for exactly.

    A BFC allocator made with ``allow_growth`` starts its regions at 2 MiB and
    doubles them (``BFCAllocator::Extend``: a region doubles until the request
    fits, and ``curr_region_allocation_bytes_`` doubles after one that did not
    have to, tensorflow/core/common_runtime/bfc_allocator.cc), and it hands out
    a whole free region when that is under twice the rounded request
    (``FindChunkPtr``): such a chunk is a region. One made without it (a GPU's default,
    ``GPUOptions.allow_growth`` false) reserves one region of its whole memory
    limit and splits every chunk from it at the rounded request, so a chunk it
    hands out whole is a freed neighbourhood of tensors, of a power-of-two size
    only where one of them was (a tensor the capture would show asking for it)
    or by chance. The peak of a replay is weaker evidence: both histories are
    rebuilt, and what the capture held before it started may favour either."""
    kinds = np.asarray(program.kinds)
    rows = np.asarray(program.refs)[kinds == ALLOC]
    if not len(rows):
        return False
    asked = np.asarray(requests, dtype=np.float64)[rows].astype(np.int64)
    asked = np.maximum(GRANULE, -(-asked // GRANULE) * GRANULE)
    held = np.asarray(chunks)[rows].astype(np.int64)
    whole = held[(held > asked) & is_region(held)]
    return bool(len(whole)) and not np.isin(whole, asked).all()


def calibrate(
    program: Program, requests: np.ndarray, chunks: np.ndarray, in_use: np.ndarray
) -> tuple[History, Simulated]:
    """The history under which the replay at the captured requests comes closest to
    the capture, and that replay.

    First the allocator's regions: grown on demand from 2 MiB (TensorFlow's CPU
    allocator, a GPU with ``allow_growth``) or one region of its whole memory
    limit reserved up front (a GPU without it, JAX's preallocation). Where the
    capture shows a grown region (``shows_regions``) the allocator grows on
    demand; otherwise the one whose peak comes closer to the captured peak is
    kept, growing on a tie. Then the
    free regions the capture shows. The evidence is a chunk the size of a region
    (2 MiB doubled) handed out whole (larger than its rounded request): a free
    region of that size existed when it was allocated. Where the replay gives
    that allocation another chunk, the history lacked it: it is added, and the
    replay rerun; kept only while the peak comes no further from the captured
    one. ``chunks``: per allocation row, the captured chunk;
    ``in_use``: the captured counter after each of the program's events."""
    target = float(in_use.max()) if len(in_use) else 0.0
    first = FIRST_REGION
    run = simulate(program, requests)
    if program.capacity > FIRST_REGION and not shows_regions(program, requests, chunks):
        whole = simulate(program, requests, first_region=program.capacity)
        if abs(whole.in_use.max() - target) < abs(run.in_use.max() - target):
            first, run = program.capacity, whole
    ghosts: tuple[int, ...] = ()
    order = np.flatnonzero(run.chunks)  # allocation rows are in time order
    captured = np.asarray(chunks)
    # A chunk the size of a region handed out whole (larger than its rounded request).
    asked = np.asarray(requests)[order].astype(np.int64)
    asked = np.maximum(GRANULE, -(-asked // GRANULE) * GRANULE)
    whole = (captured[order] > asked) & is_region(captured[order].astype(np.int64))
    for _ in range(MAX_GHOSTS):
        if run.in_use.max() == target:
            break
        candidates = np.flatnonzero(whole & (run.chunks[order] != captured[order]))
        if not len(candidates):
            break
        missing = int(captured[order[candidates[0]]])
        tried = simulate(program, requests, (*ghosts, missing), first)
        if abs(tried.in_use.max() - target) > abs(run.in_use.max() - target):
            break
        ghosts, run = (*ghosts, missing), tried
        kept = tried.chunks[order] != captured[order]
        order, whole = order[kept], whole[kept]
    return History(first, ghosts), run
