"""The compiled allocator replay (``bfc_replay`` in decode/_native.c) against the
Python model it stands in for (``predict_bfc.simulate_python`` over analysis/bfc.py):
the same counter after every event, the same chunk for every allocation and the
same regions, on every fixture with memory events and on 10,000 random event
streams (sizes across the granule, split and region boundaries, frees out of
order, chunks from before the capture, a warm-up, free regions added).

Under ``TRACEPARSE_PURE_PYTHON=1`` (``make compat``) ``simulate`` takes the Python
path, which one test checks; the comparisons still run where the extension was
built (the switch is for the code's path, not the tests'), and skip, saying so,
where it was not.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, memory_fixtures

import traceparse
from traceparse.analysis.liveness import requested_or_held
from traceparse.analysis.predict.bfc import FIRST_REGION, GRANULE, MAX_INTERNAL_FRAGMENTATION
from traceparse.analysis.predict.replay import groups
from traceparse.analysis.predict.simulate import (
    ALLOC,
    FREE,
    PREFREE,
    Program,
    Simulated,
    programs,
    simulate,
    simulate_python,
)
from traceparse.decode import native

built = pytest.mark.skipif(
    native._native is None,
    reason="the compiled loops were not built (no C compiler at install): the Python "
    "replay serves alone, so there is nothing to compare it with",
)
MiB = 1 << 20
STREAMS = 10_000


def _compiled(program: Program, requests: np.ndarray, **history: object) -> Simulated:
    with native.use_native(True):
        return simulate(program, requests, **history)  # type: ignore[arg-type]


def assert_same(program: Program, requests: np.ndarray, **history: object) -> Simulated:
    compiled = _compiled(program, requests, **history)
    python = simulate_python(program, requests, **history)  # type: ignore[arg-type]
    # Counter by counter, chunk by chunk (NaN never: both carry the counter forward).
    assert compiled.in_use.dtype == python.in_use.dtype == np.float64
    assert np.array_equal(compiled.in_use, python.in_use)
    assert compiled.chunks.dtype == python.chunks.dtype == np.int64
    assert np.array_equal(compiled.chunks, python.chunks)
    assert compiled.regions == python.regions
    return compiled


# --- every fixture with memory events -------------------------------------------------


@built
@pytest.mark.parametrize("name", memory_fixtures())
def test_every_fixture_replays_the_same_both_ways(name: str) -> None:
    profile = traceparse.load(FIXTURES / name)
    a, timeline = profile.allocations, profile.timeline
    assert not timeline.empty, f"{name} has no memory events: drop it from the list"
    found = programs(timeline, a, profile._ends, groups(timeline))
    requested = requested_or_held(a).astype(np.float64)
    rng = np.random.default_rng(len(name))
    for program in found.values():
        # The captured requests, the batch shrunk and grown (regions grow), and
        # each request scaled on its own (the order of sizes changes).
        for requests in (
            requested,
            np.rint(requested * 0.25),
            np.rint(requested * 3.0),
            np.rint(requested * rng.uniform(0.1, 10.0, len(requested))),
        ):
            assert_same(program, requests)
            assert_same(program, requests, warm_up=False)
            assert_same(program, requests, ghosts=(4 * MiB, 64 * MiB), first_region=8 * MiB)
            if program.capacity > FIRST_REGION:  # one region of the whole memory
                assert_same(program, requests, first_region=program.capacity)


# --- random event streams ---------------------------------------------------------------

# Sizes at the edges the model decides on: the granule, twice a chunk (split or
# whole), 128 MiB of waste, the regions' sizes (2 MiB doubled), and odd bytes.
EDGES = np.array(
    [
        1,
        GRANULE - 1,
        GRANULE,
        GRANULE + 1,
        2 * GRANULE,
        3 * GRANULE - 1,
        4096,
        MiB - GRANULE,
        MiB,
        MiB + 1,
        FIRST_REGION // 2 + 1,
        FIRST_REGION - GRANULE,
        FIRST_REGION,
        FIRST_REGION + 1,
        2 * FIRST_REGION,
        4 * FIRST_REGION + GRANULE,
        MAX_INTERNAL_FRAGMENTATION - GRANULE,
        MAX_INTERNAL_FRAGMENTATION,
        MAX_INTERNAL_FRAGMENTATION + MiB,
        300 * MiB,
        0,
        -5,
    ],
    dtype=np.float64,
)


def _sizes(rng: np.random.Generator, count: int) -> np.ndarray:
    pick = rng.integers(0, 4, count)
    edge = EDGES[rng.integers(0, len(EDGES), count)]
    small = rng.integers(1, 64 * 1024, count).astype(np.float64)
    large = rng.integers(1, 48 * MiB, count).astype(np.float64)
    fraction = rng.uniform(1, 3 * GRANULE, count)  # not whole: int() truncates
    return np.choose(pick, [edge, small, large, fraction])


def random_program(rng: np.random.Generator) -> tuple[Program, np.ndarray, dict[str, object]]:
    """A stream of allocations and frees (out of order, some never), chunks from
    before the capture freed in it, a first step to warm up on, and a history."""
    rows = int(rng.integers(1, 40))
    pre = [int(s) for s in _sizes(rng, int(rng.integers(0, 4)))]
    live: list[int] = []
    waiting = list(range(len(pre)))
    kinds: list[int] = []
    refs: list[int] = []
    row = 0
    while row < rows or (live and rng.random() < 0.8) or waiting:
        choice = rng.random()
        if waiting and choice < 0.1:
            kinds.append(PREFREE)
            refs.append(waiting.pop(int(rng.integers(0, len(waiting)))))
        elif live and (choice < 0.5 or row >= rows):
            kinds.append(FREE)  # any live one: frees out of order
            refs.append(live.pop(int(rng.integers(0, len(live)))))
        elif row < rows:
            kinds.append(ALLOC)
            refs.append(row)
            live.append(row)
            row += 1
    # Several items at one event (the last one's counter shows) and events no item
    # is at (the counter carries forward).
    places = np.cumsum(rng.integers(0, 3, len(kinds))).tolist()
    events = np.arange(int(places[-1]) + int(rng.integers(1, 3)) if places else 1)
    first = int(rng.integers(0, len(kinds) + 1))
    warm = [i for i in range(first) if kinds[i] != PREFREE]
    program = Program(
        events=events,
        kinds=kinds,
        refs=refs,
        places=places,
        pre=pre,
        held=[int(s) for s in _sizes(rng, int(rng.integers(0, 3))) if s > 0],
        before=int(rng.integers(0, 64 * MiB)) if rng.random() < 0.5 else 0,
        capacity=0,
        warm=warm,
        reserved=rng.integers(0, 2, len(events)).astype(np.float64) * MiB,
    )
    history: dict[str, object] = {"warm_up": bool(rng.random() < 0.7)}
    if rng.random() < 0.3:
        history["ghosts"] = tuple(int(s) for s in _sizes(rng, int(rng.integers(1, 3))))
    if rng.random() < 0.3:
        history["first_region"] = int(FIRST_REGION << int(rng.integers(0, 10)))
    requests = _sizes(rng, rows)
    if rng.random() < 0.5:
        requests = np.rint(requests)
    return program, requests, history


@built
@pytest.mark.parametrize("part", range(10))
def test_random_streams_replay_the_same_both_ways(part: int) -> None:
    rng = np.random.default_rng(4900 + part)
    grew = split = whole = 0
    for _ in range(STREAMS // 10):
        program, requests, history = random_program(rng)
        run = assert_same(program, requests, **history)
        grew += len(run.regions) > 1
        given = run.chunks[run.chunks > 0]
        asked = np.maximum(GRANULE, np.ceil(requests[run.chunks > 0] / GRANULE) * GRANULE)
        split += int((given == asked).sum())
        whole += int((given > asked).sum())
    # The streams reach every rule: regions added, chunks split and handed out whole.
    assert grew > 50 and split > 1000 and whole > 100, (grew, split, whole)


@built
def test_sizes_past_int64_room_replay_in_python() -> None:
    # A capacity search can ask absurd sizes: the compiled replay declines them
    # (native.bfc_replay gives None) and simulate answers with Python's model.
    program = Program(
        events=np.arange(2),
        kinds=[ALLOC, FREE],
        refs=[0, 0],
        places=[0, 1],
        pre=[],
        held=[],
        before=0,
        capacity=0,
        warm=[],
        reserved=np.zeros(2),
    )
    huge = np.array([2.0**61])
    empty = np.zeros(0, np.int64)
    items = [np.asarray(x) for x in (program.kinds, program.refs, program.places)]
    declined = native.bfc_replay(
        FIRST_REGION, 0, True, empty, empty, empty, *items, empty, np.array([2**61]), 2
    )
    assert declined is None
    run = assert_same(program, huge)
    assert run.chunks[0] == 2**61 and run.regions == [2**61]


def test_the_environment_picks_the_python_replay() -> None:
    rng = np.random.default_rng(49)
    program, requests, history = random_program(rng)
    with native.use_native(False):
        fallback = simulate(program, requests, **history)  # type: ignore[arg-type]
    python = simulate_python(program, requests, **history)  # type: ignore[arg-type]
    assert np.array_equal(fallback.in_use, python.in_use)
    if os.environ.get("TRACEPARSE_PURE_PYTHON"):
        assert not native.available()


def test_fixture_list_is_not_empty() -> None:
    assert len(memory_fixtures()) >= 40, [Path(n).name for n in memory_fixtures()]
