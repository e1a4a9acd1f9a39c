"""Issue 36 item 8: an optimizer's update temporaries are optimizer bytes of the
layer they update, however the capture was made: with a variable inventory or
without one, in the notebook or under ``traceparse run``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.naming import OPTIMIZER_UNASSIGNED


def _adam_temporaries(prof: traceparse.Profile) -> pd.DataFrame:
    """Rows at the peak made by Adam's update ops (not holding a variable)."""
    rows = prof.breakdown
    ops = rows["op"].astype(str)
    mine = ops.str.contains("(?:^|/)adam/") & rows["variable"].isna()
    return rows[mine & (rows["holder"] == "allocation")]


def _without_inventory(tmp_path: Path, fixture: str) -> Path:
    source = next((FIXTURES / fixture).rglob("*.xplane.pb"))
    run = tmp_path / fixture / "plugins" / "profile" / source.parent.name
    run.mkdir(parents=True)
    shutil.copy(source, run)
    return tmp_path / fixture


@pytest.mark.parametrize("fixture", ["keras_inventory", "keras_memory_callback"])
def test_with_or_without_an_inventory_adam_is_the_same_layers_optimizer(
    tmp_path: Path, fixture: str
) -> None:
    inventoried = traceparse.load(FIXTURES / fixture)
    bare = traceparse.load(_without_inventory(tmp_path, fixture))
    assert inventoried._has_inventory and not bare._has_inventory
    ways = [_adam_temporaries(p).set_index("allocation") for p in (inventoried, bare)]
    assert len(ways[0]) and ways[0].index.equals(ways[1].index)
    for rows in ways:
        assert set(rows["role"]) == {"optimizer_update"}, rows[["op", "layer", "role"]]
        assert set(rows["layer"]) <= {"hidden", "bottleneck"}
    assert ways[0]["layer"].equals(ways[1]["layer"])


@pytest.mark.parametrize("fixture", ["batch_128", "batch_256", "keras_train"])
def test_without_an_inventory_the_weights_gradients_tie_adam_to_its_layer(fixture: str) -> None:
    prof = traceparse.load(FIXTURES / fixture)
    assert not prof._has_inventory
    rows = _adam_temporaries(prof)
    assert len(rows) and set(rows["role"]) <= {"optimizer_update", "optimizer_state"}
    assert OPTIMIZER_UNASSIGNED not in set(rows["layer"]), rows[["op", "shape", "layer"]]
    # "What does Adam cost" reads the same by role and by its ops.
    layers = prof.layers()
    tied = layers[layers["layer"] != OPTIMIZER_UNASSIGNED]
    for role in ("optimizer_update", "optimizer_state"):
        assert tied[f"{role}_bytes"].sum() >= rows.loc[rows["role"] == role, "bytes"].sum()


def test_run_and_the_notebook_agree() -> None:
    """vars_inside (traceparse.profile around the script) and vars_run (``traceparse
    run`` of it): Adam's bytes are the layer ``big``'s optimizer bytes in both."""
    for fixture in ("vars_inside", "vars_run"):
        prof = traceparse.load(FIXTURES / fixture)
        rows = _adam_temporaries(prof)
        assert set(rows["role"]) <= {"optimizer_update", "optimizer_state"}
        assert set(rows["layer"]) <= {"big"}
        table = prof.layers().set_index("layer")
        assert table.loc["big", "other_bytes"] == 0
