"""Issue 48 item 4: roles from the recorded stacks where op names do not say.

``sources_tape`` (and its TF 2.16 twin) is an eager ``GradientTape`` loop with
Adam (``fixtures/sources_model.py``): its ops are named by type alone, so only
their recorded stacks tell the kernel's gradient, Adam's temporaries and slots
apart. The goal (issue 48): at most 10% of the bytes made in the capture and
live at the peak with role other or unknown.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.breakdown import in_capture
from traceparse.analysis.naming import (
    GRADIENT,
    NO_LAYER,
    OPTIMIZER_STATE,
    OPTIMIZER_UPDATE,
    UNKNOWN,
)
from traceparse.analysis.naming.stacks import place_by_stack, stack_roles

SITE = ".venv/lib/python3.11/site-packages"


def _stacks(*frames: list[str]) -> pd.DataFrame:
    rows = [
        {"host": "h", "stack": s, "depth": d, "frame": f, "user": False}
        for s, stack in enumerate(frames)
        for d, f in enumerate(stack)
    ]
    return pd.DataFrame(rows)


UPDATE = [
    "train.py:9 step",
    f"{SITE}/keras/src/optimizers/base_optimizer.py:462 apply_gradients",
    f"{SITE}/keras/src/optimizers/adam.py:135 update_step",
    f"{SITE}/tensorflow/python/ops/gen_math_ops.py:6838 mul",
]
CREATE = [
    "train.py:9 step",
    f"{SITE}/keras/src/optimizers/base_optimizer.py:462 apply_gradients",
    f"{SITE}/keras/src/optimizers/base_optimizer.py:310 add_variable_from_reference",
]
FORWARD = [
    "train.py:7 step",
    f"{SITE}/keras/src/layers/layer.py:1002 __call__",
    f"{SITE}/keras/src/layers/core/dense.py:222 call",
]
LOSS = ["train.py:8 step", f"{SITE}/keras/src/losses/loss.py:60 __call__"]


def test_the_frames_say_update_state_or_a_layers_call() -> None:
    roles = stack_roles(_stacks(UPDATE, CREATE, FORWARD, LOSS))
    assert roles[("h", 0)] == OPTIMIZER_UPDATE
    assert roles[("h", 1)] == OPTIMIZER_STATE
    assert roles[("h", 2)] == "in_layer"
    assert ("h", 3) not in roles  # says nothing: left as the names placed it


def test_only_rows_the_names_left_open_change_and_a_weight_shape_is_a_gradient() -> None:
    rows = pd.DataFrame(
        {
            "host": ["h"] * 4,
            "role": [UNKNOWN, UNKNOWN, UNKNOWN, "activation"],
            "layer": [NO_LAYER, NO_LAYER, NO_LAYER, "dense"],
            "stack": pd.array([0, 2, 2, 0], dtype="Int64"),
            "shape": ["[512,1024]", "[512,1024]", "[32,1024]", "[512,1024]"],
        }
    )
    placed = place_by_stack(rows, _stacks(UPDATE, CREATE, FORWARD), {"[512,1024]": "dense"})
    assert placed["role"].tolist() == [OPTIMIZER_UPDATE, GRADIENT, UNKNOWN, "activation"]
    assert placed["layer"].tolist() == ["dense", "dense", NO_LAYER, "dense"]


@pytest.mark.parametrize("name", ["sources_tape", "sources_tape_tf216"])
def test_an_eager_tape_loops_peak_is_placed_by_its_stacks(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    made = in_capture(prof.breakdown)
    roles = made["role"].astype(str)
    unplaced = made.loc[roles.isin(["other", "unknown"]), "bytes"].sum()
    assert unplaced <= 0.10 * made["bytes"].sum(), made[["op", "role", "layer", "bytes"]]
    # The kernel's gradient is its layer's; Adam's temporaries are its update.
    grads = made[(roles == GRADIENT).to_numpy()]
    assert set(grads["layer"].astype(str)) <= {"wide", "narrow"} and len(grads)
    updates = made[(roles == OPTIMIZER_UPDATE).to_numpy()]
    assert set(updates["op"].astype(str)) <= {"Mul", "AddV2", "RealDiv", "Sqrt", "Sub"}
    # Adam's slots (named by the inventory, no optimizer tied to them) are its state.
    rows = prof.breakdown
    slots = rows[rows["variable"].astype(str).str.contains("_momentum|_velocity").to_numpy()]
    assert len(slots) and set(slots["role"].astype(str)) == {OPTIMIZER_STATE}
