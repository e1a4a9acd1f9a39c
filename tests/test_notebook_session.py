"""Issue 36 item 1: the notebook session that ended every command in an internal error.

``fixtures/notebook_two_models``: model ``first`` fitted, model ``second`` built,
then an eager ``tf.GradientTape`` loop of ``second`` with a new Adam captured by
``traceparse.profile()``. The inventory names several variables by one path:
each model's loss tracker (``loss/total``, ``loss/count``) and each model's
``hidden/kernel`` (two shapes). Every analysis takes duplicate, empty and
conflicting paths, and every command ends without an internal error.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from bounded import check_bounds, every_command, run_bounded
from conftest import FIXTURES, MANIFEST

import traceparse

SESSION = FIXTURES / "notebook_two_models"
RUN = next(SESSION.rglob("*.xplane.pb")).parent


def _inventory() -> dict[str, Any]:
    return json.loads((RUN / "localhost.variables.json").read_text())


def _with_inventory(tmp_path: Path, document: dict[str, Any]) -> Path:
    run = tmp_path / "logs" / RUN.relative_to(SESSION)
    run.mkdir(parents=True)
    shutil.copy(RUN / "localhost.xplane.pb", run)
    (run / "localhost.variables.json").write_text(json.dumps(document))
    return tmp_path / "logs"


def _check_breakdown(prof: traceparse.Profile) -> pd.DataFrame:
    """Per allocator the breakdown's rows add up to the bytes in use at the peak."""
    table = prof.breakdown
    held = table[table["holder"] != "reserved"].groupby("allocator", observed=True)["bytes"].sum()
    peak = prof.peak.set_index("allocator")["in_use_bytes"]
    reserved = prof.peak.set_index("allocator")["reserved_bytes"]
    assert (held + reserved.reindex(held.index)).to_dict() == peak.reindex(held.index).to_dict()
    return table


def test_the_inventory_repeats_paths() -> None:
    paths = Counter(v["path"] for v in _inventory()["variables"])
    assert paths["loss/total"] == 2 and paths["loss/count"] == 2
    shapes = {tuple(v["shape"]) for v in _inventory()["variables"] if v["path"] == "hidden/kernel"}
    assert shapes == {(256, 1024), (256, 512)}
    assert set(MANIFEST["fixtures"]["notebook_two_models"]["repeated_paths"]) >= {
        "hidden/kernel",
        "logits/kernel",
    }


def test_every_analysis_of_the_session() -> None:
    prof = traceparse.load(SESSION)
    table = _check_breakdown(prof)
    # Each of the paths is its own variable: both models' kernels are named,
    # each with its own shape (a path is not a key).
    kernels = table[table["variable"] == "hidden/kernel"]
    assert sorted(kernels["shape"]) == ["[256,1024]", "[256,512]"]
    # The loop's Adam made its slots during the capture: the allocations hold
    # them with the shape of the variable each one is.
    made = table[table["named_by"] == "inventory: created during capture"]
    assert "adam_2/hidden_kernel_momentum" in set(made["variable"])
    for row in made.itertuples():
        own = [v for v in _inventory()["variables"] if v["path"] == row.variable]
        assert row.shape in {"[" + ",".join(map(str, v["shape"])) + "]" for v in own}
    layers = prof.layers()
    assert {"hidden", "embed"} <= set(layers["layer"].astype(str))
    (summary,) = prof.summary()
    assert summary.before_capture is not None
    # Three weights at the peak: embed/kernel and both hidden/kernel (one path).
    assert summary.before_capture["weight_variables"] == 3
    assert summary.before_capture["weight_bytes"] == 256 * (256 + 1024 + 512) * 4
    assert not prof.attribution.empty
    assert "<table" in prof._repr_html_()
    for frame in (prof.ops, prof.scopes(), prof.steps):
        assert not frame.empty


def _crafted(kind: str) -> dict[str, Any]:
    document = _inventory()
    variables = document["variables"]
    if kind == "empty paths":
        for v in variables:
            v["path"] = ""
    elif kind == "one path for all":
        for v in variables:
            v["path"] = "adam/hidden_kernel_momentum"
    elif kind == "conflicting roles":
        # The loop's slots under the names of the first model's: same path, other shape.
        for v in variables:
            if v["path"].startswith("adam_2/"):
                v["path"] = "adam/" + v["path"].split("/", 1)[1]
    return document


@pytest.mark.parametrize("kind", ["empty paths", "one path for all", "conflicting roles"])
def test_paths_that_name_nothing_or_several(tmp_path: Path, kind: str) -> None:
    logs = _with_inventory(tmp_path, _crafted(kind))
    prof = traceparse.load(logs)
    table = _check_breakdown(prof)
    assert not prof.layers().empty and prof.summary()
    made = table[table["named_by"] == "inventory: created during capture"]
    assert len(made)  # the matching does not go by path alone
    if kind == "conflicting roles":
        # Each allocation has its own variable's facts, not those of the first
        # variable of that path (the first model's Adam slot, from before the
        # capture): the loop's slots, which the inventory could not tie to a
        # model, are not counted as the first model's optimizer state.
        assert set(made["variable"]) <= {v["path"] for v in _inventory()["variables"]}
        assert set(made["role"]) == {"other"}, made[["variable", "layer", "role"]]
    check_bounds(run_bounded(_commands(logs, tmp_path), tmp_path), problems=2)


def _commands(logs: Path, out: Path) -> list[list[str]]:
    path = str(logs)
    return [
        *every_command([logs], out),
        ["breakdown", path],
        ["scopes", path],
        ["steps", path],
        ["allocations", path],
        ["diff", path, path],
        ["check", path, "--max-peak", "1 GiB"],
        ["baseline", path, "-o", str(out / "baseline.json")],
        ["report", path, "--format", "json", "-o", str(out / "report.json")],
    ]


def test_every_command_on_the_session(tmp_path: Path) -> None:
    results = run_bounded(_commands(SESSION, tmp_path), tmp_path)
    check_bounds(results, problems=2)
    for ran in results:
        assert "internal error" not in ran.stderr, (ran.argv, ran.stderr)
    layers = next(r for r in results if r.argv[0] == "layers")
    assert "hidden" in layers.stdout and "embed" in layers.stdout
