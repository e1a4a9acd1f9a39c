"""The BFC allocator model (analysis/bfc.py) and its replay of captures
(analysis/predict_bfc.py): hand-built cases of each rule of bfc_allocator.cc, and
real captures whose every chunk and counter value it must reproduce.

``batch_128``/``batch_256`` were captured from the start of their process (model
building included), so the allocator's whole history is in them: replayed at
their own requests, the model must hand out every chunk the capture recorded
(``allocation_bytes``) and reach every value of its counter (``bytes_allocated``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.liveness import held_bytes, requested_or_held
from traceparse.analysis.peak import in_use
from traceparse.analysis.predict.bfc import (
    BFC,
    FIRST_REGION,
    MAX_INTERNAL_FRAGMENTATION,
    rounded_bytes,
)
from traceparse.analysis.predict.replay import groups
from traceparse.analysis.predict.simulate import (
    ALLOC,
    FREE,
    Program,
    calibrate,
    inventory_chunks,
    programs,
    shows_regions,
    simulate,
)
from traceparse.core.profile import predictor_of

MiB = 1 << 20
XLA = json.loads((FIXTURES / "predict_fixtures.json").read_text())["fixtures"]


# --- the rules, by hand -------------------------------------------------------------


def test_requests_round_to_256_bytes() -> None:
    assert rounded_bytes(1) == rounded_bytes(256) == 256
    assert rounded_bytes(257) == 512
    bfc = BFC()
    assert bfc.allocate(1000)[1] == 1024
    assert bfc.in_use == 1024


def test_regions_start_at_2_mib_and_double() -> None:
    bfc = BFC()
    bfc.allocate(MiB)  # the first region: 2 MiB, split
    assert bfc.regions == [FIRST_REGION]
    bfc.allocate(1536 << 10)  # 1.5 MiB does not fit the 1 MiB left: a 4 MiB region
    assert bfc.regions == [2 * MiB, 4 * MiB]
    # A request larger than the next region doubles it until it fits (8 -> 16 MiB),
    # and the one after is not doubled again (it was enlarged for this request).
    bfc.allocate(12 * MiB)
    assert bfc.regions == [2 * MiB, 4 * MiB, 16 * MiB]
    bfc.allocate(15 * MiB)
    assert bfc.regions[-1] == 16 * MiB
    bfc.allocate(17 * MiB)  # not enlarged last time: this one doubles after
    assert bfc.regions[-1] == 32 * MiB


def test_a_chunk_under_twice_the_request_is_handed_out_whole() -> None:
    bfc = BFC()
    address, size = bfc.allocate(3 * MiB)  # a 4 MiB region: under twice 3 MiB
    assert size == 4 * MiB and bfc.in_use == 4 * MiB
    bfc.free(address)
    _, size = bfc.allocate(2 * MiB)  # exactly half: split
    assert size == 2 * MiB and bfc.in_use == 2 * MiB
    assert bfc.largest_free() == 2 * MiB


def test_a_waste_of_128_mib_is_always_split() -> None:
    bfc = BFC(first_region=512 * MiB)
    _, size = bfc.allocate(300 * MiB)  # 512 MiB is under twice 300, but wastes 212
    assert size == 300 * MiB
    assert 512 * MiB - 300 * MiB >= MAX_INTERNAL_FRAGMENTATION


def test_best_fit_takes_the_smallest_chunk_and_the_newest_region_among_equals() -> None:
    bfc = BFC()
    a, _ = bfc.allocate(2 * MiB)  # region 1 (2 MiB), whole
    b, _ = bfc.allocate(2 * MiB)  # region 2 (4 MiB), split: 2 MiB free after it
    c, _ = bfc.allocate(2 * MiB)  # the free half of region 2
    bfc.free(a)
    bfc.free(c)  # now two free 2 MiB chunks: region 1, and region 2's upper half
    again, size = bfc.allocate(MiB)
    # Equal sizes: the lower address wins, and regions are mapped top down.
    assert again == min(a, c) == c and size == MiB
    assert bfc.largest_free() == 2 * MiB  # region 1; region 2 keeps 1 MiB free
    bfc.free(again)
    bfc.free(b)  # region 2's three free pieces merge into one
    assert bfc.largest_free() == 4 * MiB


def test_freed_neighbours_merge_within_a_region_only() -> None:
    bfc = BFC()
    chunks = [bfc.allocate(MiB)[0] for _ in range(2)]  # region 1 (2 MiB), full
    other, _ = bfc.allocate(MiB)  # region 2 (4 MiB)
    for address in chunks:
        bfc.free(address)
    assert bfc.largest_free() == 3 * MiB  # region 2's rest; region 1 merged to 2 MiB
    bfc.free(other)
    assert bfc.largest_free() == 4 * MiB  # region 2 whole again, never region 1's too
    assert bfc.in_use == 0 and bfc.total == 6 * MiB


# --- real captures ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["batch_128", "batch_256"])
def test_replay_of_a_whole_history_reproduces_every_chunk_and_counter(name: str) -> None:
    profile = traceparse.load(FIXTURES / name)
    a, timeline = profile.allocations, profile.timeline
    rows = groups(timeline)
    found = programs(timeline, a, profile._ends, rows)
    assert len(found) == 1
    ((key, program),) = found.items()
    run = simulate(program, requested_or_held(a).astype(float))
    held = held_bytes(a)
    assert np.array_equal(run.chunks, held)
    counter = timeline["in_use_bytes"].to_numpy(dtype=np.float64)[rows[key]]
    assert np.array_equal(run.in_use, counter)


def test_inventory_is_weights_first() -> None:
    profile = traceparse.load(FIXTURES / "keras_inventory")
    variables = profile.variables
    chunks = inventory_chunks(variables)
    traced = variables[variables["traced"].fillna(False) & variables["at_start"].fillna(False)]
    assert chunks and sum(map(len, chunks.values())) == len(traced)
    for allocator, found in chunks.items():
        mine = traced[traced["allocator"].astype(object) == allocator]
        weights = mine[mine["role"] == "weight"]
        assert found[: len(weights)] == list(weights["estimated_bytes"].astype(int))
        assert sorted(found) == sorted(mine["estimated_bytes"].astype(int))


@pytest.mark.parametrize(("source", "target"), [(64, 128), (128, 64)])
def test_calibration_finds_the_free_region_a_compiled_slab_is_handed(
    source: int, target: int
) -> None:
    # The slab (8.5 MiB at 64) is handed a whole 16 MiB region in the capture, which
    # the rebuilt history (variables, warm-up) does not make: the capture shows it.
    profile = traceparse.load(FIXTURES / f"predict_xla_{source}")
    predictor = predictor_of(profile)
    (key,) = predictor.rows
    assert predictor.ghosts[key] == (16 * MiB,)
    captured = int(in_use(profile.timeline).max())
    assert predictor.simulated_peaks[key] == captured
    real = XLA[f"predict_xla_{target}"]["peak_in_use_bytes"]
    row = profile.predict(target).iloc[0]
    # The same region, whole, at both sizes; what is left (measured: 256 KiB at 128)
    # is the input, in oneDNN's pool at 64 and so never seen in that capture.
    assert abs(row["predicted_peak_bytes"] - real) <= 256 << 10


def _one_request(requested: int, captured_chunk: int) -> tuple[Program, np.ndarray, np.ndarray]:
    """A capture of one allocation and its free, after 32 MiB held in chunks of 8, 8
    and 16 MiB (regions of 8, 8 and 16: the next region the model adds is 32 MiB)."""
    held = [8 * MiB, 8 * MiB, 16 * MiB]
    program = Program(
        events=np.arange(2),
        kinds=[ALLOC, FREE],
        refs=[0, 0],
        places=[0, 1],
        pre=[],
        held=held,
        before=sum(held),
        capacity=0,
        warm=[],
        reserved=np.zeros(2),
    )
    counter = np.array([sum(held) + captured_chunk, sum(held)], dtype=np.float64)
    return program, np.array([float(requested)]), counter


def test_calibration_adds_a_whole_region_the_capture_shows() -> None:
    # The capture handed a 9 MiB request a whole 16 MiB region; the rebuilt history
    # would split a new 32 MiB one: a free 16 MiB region is added.
    program, requests, counter = _one_request(9 * MiB, 16 * MiB)
    assert simulate(program, requests).chunks[0] == 9 * MiB
    history, run = calibrate(program, requests, np.array([16 * MiB]), counter)
    assert history.ghosts == (16 * MiB,) and history.first_region == FIRST_REGION
    assert run.chunks[0] == 16 * MiB and np.array_equal(run.in_use, counter)


def test_calibration_adds_no_piece_that_is_not_a_region() -> None:
    # A 12 MiB chunk handed whole is a piece of some region: the history that made it
    # is the captured batch's own, so it is not carried to other sizes.
    program, requests, counter = _one_request(9 * MiB, 12 * MiB)
    history, run = calibrate(program, requests, np.array([12 * MiB]), counter)
    assert history.ghosts == () and run.chunks[0] == 9 * MiB


def _handed(*pairs: tuple[int, int]) -> tuple[Program, np.ndarray, np.ndarray]:
    """A capture of allocations (request, captured chunk), each freed in turn, by an
    allocator that may have reserved 1 GiB up front."""
    n = len(pairs)
    program = Program(
        events=np.arange(2 * n),
        kinds=[ALLOC, FREE] * n,
        refs=[i for i in range(n) for _ in range(2)],
        places=list(range(2 * n)),
        pre=[],
        held=[],
        before=0,
        capacity=1 << 30,
        warm=[],
        reserved=np.zeros(2 * n),
    )
    requests = np.array([float(r) for r, _ in pairs])
    return program, requests, np.array([c for _, c in pairs], dtype=np.int64)


def test_a_whole_chunk_of_a_region_size_shows_regions_grown_on_demand() -> None:
    # 9 MiB handed a whole 16 MiB chunk: a free region of 16 MiB (2 MiB doubled).
    assert shows_regions(*_handed((9 * MiB, 16 * MiB)))
    # Split at its request, or a whole chunk of no region's size: no evidence.
    assert not shows_regions(*_handed((16 * MiB, 16 * MiB)))
    assert not shows_regions(*_handed((9 * MiB, 12 * MiB)))
    # A 16 MiB tensor's chunk, freed and handed whole to 9 MiB: what one region of
    # the whole memory does too, so no evidence.
    assert not shows_regions(*_handed((16 * MiB, 16 * MiB), (9 * MiB, 16 * MiB)))


@pytest.mark.parametrize("run", [0, 1, 2])
def test_the_alexnet_runs_at_128_grow_their_regions(run: int) -> None:
    # Each hands whole regions of 128 and 256 MiB to smaller activations (a 180 MiB
    # convolution output in a 256 MiB chunk): the allocator grew on demand, though
    # a replay under one region of the whole 14.4 GiB comes nearer the captured
    # peak in runs 0 and 2 (1213 and 1230 MiB against 1289; 1393 growing).
    path = sorted((FIXTURES / "gpu_alexnet_v100_128").rglob("*.xplane.pb"))[run]
    predictor = predictor_of(traceparse.load(path))
    (key,) = [k for k in predictor.rows if str(k[1]) == "GPU_0_bfc"]
    assert predictor.histories[key].first_region == FIRST_REGION


def test_a_device_allocator_that_reserved_its_memory_is_one_region() -> None:
    # JAX preallocated 75% of the GPU (xprof's capacity, 144 GiB): one region, where
    # every chunk is split. Its host allocator grows on demand (never one region).
    profile = traceparse.load(FIXTURES / "jax08_elementwise")
    predictor = predictor_of(profile, from_batch=8)
    captured = in_use(profile.timeline)
    capacity = dict(zip(profile.peak["allocator"], profile.peak["capacity_bytes"], strict=True))
    for key, rows in predictor.rows.items():
        # Within one granule (measured: 256 bytes over, of 640 MiB).
        assert abs(predictor.simulated_peaks[key] - captured[rows].max()) <= 256, key
        expected = FIRST_REGION if "host" in str(key[1]) else int(capacity[key[1]])
        assert predictor.histories[key].first_region == expected, key
    # Grown from 2 MiB instead, the model would hand out chunks whole: 20% over.
    (gpu,) = [key for key in predictor.rows if key[1] == "GPU_0_bfc"]
    requests = predictor._sent(predictor.requested)
    grown = simulate(predictor.programs[gpu], requests).in_use.max()
    assert grown > 1.1 * captured[predictor.rows[gpu]].max()
