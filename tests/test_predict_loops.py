"""A recurrent loop's weight gradients in flight (``analysis/predict/loops.py``).

The per-iteration temporaries of a while_v2 gradient loop are found by their
scope (its loop-invariant weights' gradients also by their shape); the low
keeps one of each live, the high ``parallel_iterations`` of each weight
gradient while the loop runs. The table below
is laid out as a capture's is (the op names are an LSTM's from a CPU capture);
the expected figures come from its construction. A capture with no loop is
left as it is; where the development captures of ``dev_gru``
(``benchmarks/predict_protocol_models.py``) are on this machine, every run's
bounds hold every other run's peak.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.predict.loops import PARALLEL_ITERATIONS, loop_temps

GRAD = "m/lstm/while/m/lstm/while_grad/body/_135/gradients/m/lstm/while/cell/MatMul_1_grad/MatMul_1"
FORWARD = "m/lstm/while/body/_12/m/lstm/while/cell/split"
CHAIN = "m/lstm/while/m/lstm/while_grad/body/_135/gradients/m/lstm/while/cell/mul_grad/Mul"
OUTSIDE = "m/adam/AssignSubVariableOp"
KERNEL = (16, 64)  # the recurrent kernel's shape, a weight


def _table() -> tuple[pd.DataFrame, np.ndarray]:
    """Rows: (op, shape, alloc row, end row). Three gradients of the kernel live
    at once (rows 2 to 4 made, freed at 6, 7, 8), a fourth alone later (10 to
    11); a forward activation, a temporary of an activation's shape never two
    at once, a kernel-shaped buffer of the loop never freed, and an optimizer
    temporary."""
    rows = [
        (FORWARD, "[8,64]", 0, 12),
        (OUTSIDE, "[16,64]", 1, 13),
        (GRAD, "[16,64]", 2, 6),
        (GRAD, "[16,64]", 3, 7),
        (GRAD, "[16,64]", 4, 8),
        (CHAIN, "[8,64]", 5, 9),
        (GRAD, "[16,64]", 10, 11),
        (GRAD, "[16,64]", 12, STILL_LIVE),
    ]
    frame = pd.DataFrame(rows, columns=["op", "shape", "alloc_event", "end"])
    frame["step"] = 1.0
    return frame.drop(columns="end"), frame["end"].to_numpy(dtype=np.int64)


def test_finds_the_loops_weight_gradients_and_bounds_their_count() -> None:
    a, ends = _table()
    mine = np.ones(len(a), dtype=bool)
    temps = loop_temps(a, ends, mine, {KERNEL}, rows=14)
    assert temps is not None
    assert temps.ops == [GRAD]
    assert sorted(temps.index[0].tolist()) == [2, 3, 4, 6]  # not the one never freed
    assert temps.parallel == PARALLEL_ITERATIONS
    live = temps.counts[0]
    assert live[4] == 3 and live[8] == 0 and live[10] == 1
    each = 4096.0  # 16 x 64 float32
    sizes = np.full(len(a), each)
    # Low: beyond one of each live, nothing is needed.
    excess = temps.excess(sizes)
    assert excess[4] == 2 * each and excess[10] == 0 and excess[0] == 0
    # High: while the loop runs (its first allocation, row 2 here the gradient's,
    # to its last gradient's free, row 11), parallel_iterations of each in flight.
    gain = temps.gain(sizes)
    assert gain[4] == (PARALLEL_ITERATIONS - 3) * each
    assert gain[10] == (PARALLEL_ITERATIONS - 1) * each
    assert gain[1] == 0 and gain[13] == 0
    assert temps.bytes_in_flight(sizes) == PARALLEL_ITERATIONS * each


def test_other_temporaries_lower_the_low_only() -> None:
    a, ends = _table()
    mine = np.ones(len(a), dtype=bool)
    # Without the kernel among the weights, the loop's temporaries that piled up
    # (three at once) still lower the low, and nothing raises the high; the one
    # that never had two live (CHAIN) is not among them.
    temps = loop_temps(a, ends, mine, {(3, 3)}, rows=14)
    assert temps is not None and temps.ops == [GRAD]
    assert not temps.weighty.any()
    sizes = np.full(len(a), 4096.0)
    assert temps.excess(sizes)[4] == 2 * 4096.0
    assert not temps.gain(sizes).any() and temps.bytes_in_flight(sizes) == 0
    # Without a gradient loop (a forward pass alone) there is nothing to bound.
    forward = a[a["op"] != GRAD].reset_index(drop=True)
    kept = ends[(a["op"] != GRAD).to_numpy()]
    assert loop_temps(forward, kept, np.ones(len(forward), bool), {KERNEL}, rows=14) is None


def test_a_capture_without_a_loop_is_left_as_it_is() -> None:
    profile = traceparse.load(FIXTURES / "keras_train")
    predictor = traceparse.predictor_of(profile)
    for key in predictor.rows:
        assert predictor.loops(key) is None
    table = predictor.at(predictor.batch * 2)
    assert not table["basis"].str.contains("recurrent loop").any()


# Where ``benchmarks/predict_protocol.py`` caches its development captures.
DEV = Path(__file__).resolve().parents[1] / "benchmarks" / ".captures" / "protocol"


@pytest.mark.slow
@pytest.mark.parametrize("batch", [32, 128])
def test_every_runs_bounds_hold_every_other_run(batch: int) -> None:
    """The development captures (not committed: ``dev_gru`` at ``batch``, three
    fresh-process runs, one op at a time), where they are on this machine."""
    runs = sorted(DEV.glob(f"dev_gru_{batch}_one_r*"))
    if len(runs) < 2:
        pytest.skip("the dev_gru captures are not on this machine")
    profiles = [traceparse.load(r) for r in runs]
    real = [int(p.peak["in_use_bytes"].max()) for p in profiles]
    for profile in profiles:
        row = profile.predict(batch).iloc[0]
        assert "recurrent loop" in row["basis"]
        for peak in real:
            assert row["low_bytes"] <= peak <= row["high_bytes"]
