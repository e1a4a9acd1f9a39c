"""The device capture plan (benchmarks/gpu_capture.py) and how the protocol reads
its captures back (predict_protocol.device_groups), without JAX or a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_capture  # noqa: E402
from predict_protocol import DEVICE_DEV, DEVICE_TEST, device_groups, gpu_cases  # noqa: E402


def test_every_scenario_is_captured_once_before_any_is_captured_again() -> None:
    runs = gpu_capture.plan()
    first_repeat = next(i for i, r in enumerate(runs) if r.run == 1)
    assert all(r.run == 0 for r in runs[:first_repeat])
    scenarios = {(r.scenario, r.batch) for r in runs}
    assert {(r.scenario, r.batch) for r in runs[:first_repeat]} == scenarios
    assert len(runs) == len({r.name for r in runs})


def test_the_split_is_the_one_fixed_before_any_capture() -> None:
    split = {r.scenario: r.split for r in gpu_capture.plan()}
    assert {s for s, v in split.items() if v == "test"} == DEVICE_TEST
    assert {s for s, v in split.items() if v == "dev"} >= DEVICE_DEV
    sweeps = {r.batch for r in gpu_capture.plan() if r.scenario in DEVICE_DEV | DEVICE_TEST}
    assert sweeps == set(gpu_capture.BATCHES)


def test_the_protocol_reads_the_unpacked_archives(tmp_path: Path) -> None:
    for name in ("jax_cnn_32_r0", "jax_cnn_32_r1", "jax_cnn_128_r0", "jax_cnn_sgd_64_r0"):
        run = tmp_path / name / "plugins" / "profile" / "2026_12_07_00_00_00"
        run.mkdir(parents=True)
        (run / "host.xplane.pb").write_bytes(b"")
    (tmp_path / "keras_cnn_64_r0").mkdir()  # a run that failed: no capture in it
    groups = device_groups(tmp_path, DEVICE_DEV | DEVICE_TEST)
    assert {g: {b: len(r) for b, r in sizes.items()} for g, sizes in groups.items()} == {
        "jax_cnn": {32: 2, 128: 1}
    }
    cases = gpu_cases(groups, two=False)
    assert [(c.source, c.target) for c in cases] == [(32, 128), (128, 32)]
