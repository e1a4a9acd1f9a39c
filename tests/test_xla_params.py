"""XLA entry parameters name bytes allocated before the capture (issue 14, item 4).

Real capture: ``xla_tensorboard`` (Keras 3 ``fit`` with ``jit_compile=True`` and
TensorBoard's own callback, so no inventory). The ground truth is what Keras
listed (``MANIFEST.json``: ``variables``, ``optimizer_variables``, shape x
itemsize) and the allocator's own counter. Edge cases use hand-built programs.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from conftest import FIXTURES, MANIFEST, run_traceparse
from helpers.trace import GPU, alloc
from helpers.xla import CPU, KiB, _profile, _program

from traceparse import load
from traceparse.analysis import PARTS
from traceparse.analysis.breakdown import parameter_rows
from traceparse.analysis.naming import KnownNames
from traceparse.analysis.xla_params import MADE_INSIDE, NO_ALLOCATOR, NOT_RUN, SMALL
from traceparse.report import render_json, render_markdown
from traceparse.tables.variables import CPU_POOL_BYTES

MiB = 1 << 20
ITEMSIZE = {"float32": 4, "int64": 8}


def _keras_variables() -> list[dict[str, object]]:
    truth = MANIFEST["fixtures"]["xla_tensorboard"]
    return [*truth["variables"], *truth["optimizer_variables"]]


def _nbytes(var: dict[str, object]) -> int:
    shape = var["shape"]
    assert isinstance(shape, list)
    return int(np.prod(shape, dtype=np.int64)) * ITEMSIZE[str(var["dtype"])]


# -- the real capture ------------------------------------------------------------------


def test_parameters_name_the_keras_variables() -> None:
    prof = load(FIXTURES / "xla_tensorboard")
    assert prof.variables.empty  # TensorBoard's callback writes no inventory
    params = prof.xla_parameters
    assert params["ran"].all()
    counted = params[params["counted"]]
    # Keras' own list: every recorded variable (>= 256 KiB on CPU) is one counted
    # parameter of the same shape and dtype, and nothing else is counted.
    big = [v for v in _keras_variables() if _nbytes(v) >= CPU_POOL_BYTES]
    assert len(big) == 6  # two kernels and their Adam momentum and velocity
    want = Counter((str(v["dtype"]), "[" + ",".join(map(str, v["shape"])) + "]") for v in big)
    got = Counter(zip(counted["dtype"].astype(str), counted["shape"].astype(str), strict=True))
    assert got == want
    assert counted["updated"].all()  # the step assigns them: aliased to outputs
    # The input batch is a parameter the step does not update.
    batch = MANIFEST["fixtures"]["xla_tensorboard"]["batch_size"]
    inputs = params[params["shape"].astype(str) == f"[{batch},256]"]
    assert len(inputs) == 1 and not inputs["updated"].any()
    # The ops that read each one name a kernel's layer; Adam's slots only Adam.
    kernels = [str(v["path"]) for v in big if not str(v["path"]).startswith("adam/")]
    for path in kernels:
        layer = path.split("/")[0]
        readers = [r for r in counted["read_by"].astype(str) if re.search(rf"/{layer}(_\d+)?/", r)]
        assert len(readers) == 1, (layer, readers)
    slots = counted[~counted["read_by"].astype(str).str.contains("MatMul")]
    assert len(slots) == 4
    assert all(op.startswith("adam/") for r in slots["read_by"] for op in str(r).split(", "))
    small = params[params["size_bytes"] < CPU_POOL_BYTES]
    assert (small["reason"] == SMALL).all() and not small["counted"].any()


def test_attribution_counts_them_against_the_allocators_counter() -> None:
    prof = load(FIXTURES / "xla_tensorboard")
    att = prof.attribution.iloc[0]
    assert att[PARTS].sum() == att["in_use_bytes"]
    big = sum(_nbytes(v) for v in _keras_variables() if _nbytes(v) >= CPU_POOL_BYTES)
    assert int(att["xla_parameter_bytes"]) == big == 3 * MiB
    # The allocator's counter at the peak less what the live allocations hold.
    peak = prof.peak.iloc[0]
    held = prof.live_at_peak()["allocated_bytes"].sum()
    before = int(peak["heap_bytes"]) - int(held)
    assert int(att["xla_parameter_bytes"]) + int(att["before_capture_bytes"]) == before
    assert prof.attribution.attrs["not_measured"] == ["variable_bytes"]
    # layers still sum to the bytes in use.
    layers = prof.layers()
    assert layers["live_at_peak_bytes"].sum() == att["in_use_bytes"]


def test_layers_place_the_parameters() -> None:
    """Each kernel under its layer, its two Adam slots with it (tied by a shape
    only that layer's weight has); rows still sum to the bytes in use."""
    prof = load(FIXTURES / "xla_tensorboard")
    layers = prof.layers().set_index("layer")
    sizes = {str(v["path"]): _nbytes(v) for v in _keras_variables()}
    for layer in ("hidden", "bottleneck"):
        kernel = sizes[f"{layer}/kernel"]
        slots = sizes[f"adam/{layer}_kernel_momentum"] + sizes[f"adam/{layer}_kernel_velocity"]
        assert int(layers.loc[layer, "weight_bytes"]) == kernel
        assert int(layers.loc[layer, "optimizer_state_bytes"]) == slots
    assert layers["live_at_peak_bytes"].sum() == prof.attribution["in_use_bytes"].sum()


def test_parameters_not_updated_or_read_by_two_layers_stay_unplaced() -> None:
    ops = ["m/dense/MatMul", "m/other/MatMul", "adam/AssignAddVariableOp"]
    known = KnownNames(models={"m"}, layers={"dense", "other"})
    base = {
        "host": "h",
        "allocator": CPU,
        "program": "p",
        "function": None,
        "instruction": None,
        "dtype": "float32",
        "size_bytes": MiB,
    }
    rows = [
        {**base, "parameter_number": 0, "shape": "[1]", "updated": False, "read_by": ops[0]},
        {**base, "parameter_number": 1, "shape": "[2]", "updated": True, "read_by": ops[0]},
        {
            **base,
            "parameter_number": 2,
            "shape": "[3]",
            "updated": True,
            "read_by": ", ".join(ops[:2]),
        },
        {**base, "parameter_number": 3, "shape": "[2]", "updated": True, "read_by": ops[2]},
    ]
    found = parameter_rows(pd.DataFrame(rows), "h", CPU, 3 * MiB, known)
    placed = [(r["xla_buffer"], r["layer"], r["role"]) for r in found]
    # Largest first, then by number; the fourth does not fit in the 3 MiB held before.
    assert placed == [
        ("parameter 0", "(no layer)", "other"),  # read, never assigned: a batch?
        ("parameter 1", "dense", "weight"),
        ("parameter 2", "(no layer)", "other"),  # read by two layers
    ]
    found = parameter_rows(pd.DataFrame(rows), "h", CPU, 4 * MiB, known)
    # A slot of the shape only dense's weight has goes to dense.
    assert [found[3]["layer"], found[3]["role"]] == ["dense", "optimizer_state"]


def test_reports_show_the_split(tmp_path: Path) -> None:
    prof = load(FIXTURES / "xla_tensorboard")
    (summary,) = prof.summary()
    split = summary.before_capture
    assert split is not None
    assert split["xla_parameter_bytes"] == 3 * MiB and split["xla_parameters"] == 6
    assert str(split["xla_program"]).startswith("__inference_one_step_on_data_")
    assert split["xla_parameter_shapes"] == "3 × float32[256,512], 3 × float32[512,256]"
    document = json.loads(render_json([prof], "test"))
    record = document["profiles"][0]
    assert record["summary"][0]["attribution"]["xla_parameter_bytes"] == 3 * MiB
    assert len(record["tables"]["xla_parameters"]) == len(prof.xla_parameters)
    text = render_markdown([prof], "test")
    assert "3 MiB read as parameters by XLA program" in text
    done = run_traceparse("summary", str(FIXTURES / "xla_tensorboard"))
    assert done.returncode == 0, done.stderr
    assert "read as parameters by XLA program __inference_one_step_on_data_" in done.stdout
    assert "not a parameter of an XLA program that ran" in done.stdout


def test_an_inventory_wins(tmp_path: Path) -> None:
    """The same capture with an inventory beside it: variables name the bytes,
    parameters add nothing."""
    source = next((FIXTURES / "xla_tensorboard").rglob("*.xplane.pb"))
    run = tmp_path / "plugins" / "profile" / source.parent.name
    run.mkdir(parents=True)
    shutil.copy(source, run / source.name)
    rows = [
        {
            "name": str(v["name"]),
            "path": str(v["path"]),
            "shape": v["shape"],
            "dtype": str(v["dtype"]),
            "device": "/job:localhost/replica:0/task:0/device:CPU:0",
            "estimated_bytes": _nbytes(v),
            "role": "optimizer" if str(v["path"]).startswith("adam/") else "weight",
            "belongs_to": None,
            "layer": None,
            "model": "compiled",
            "at_start": True,
            "at_stop": True,
        }
        for v in _keras_variables()
    ]
    document = {"format": "traceparse.variables", "version": 1, "variables": rows}
    (run / "localhost.variables.json").write_text(json.dumps(document))
    prof = load(tmp_path)
    att = prof.attribution.iloc[0]
    assert prof.attribution.attrs["not_measured"] == ["xla_parameter_bytes"]
    assert pd.isna(att["xla_parameter_bytes"])  # not measured
    assert int(att["variable_bytes"]) == 3 * MiB
    (summary,) = prof.summary()
    assert "xla_parameter_bytes" not in summary.attribution
    assert summary.before_capture is not None and "weight_bytes" in summary.before_capture


def test_captures_without_programs_do_not_measure_it() -> None:
    for name in ("keras_train", "keras_inventory"):
        prof = load(FIXTURES / name)
        assert "xla_parameter_bytes" in prof.attribution.attrs["not_measured"]
        assert (prof.attribution["xla_parameter_bytes"] == 0).all()
        assert prof.xla_parameters.empty
        for summary in prof.summary():
            assert "xla_parameter_bytes" not in summary.attribution


# -- hand-built programs ---------------------------------------------------------------


def test_a_parameter_two_programs_read_counts_once() -> None:
    a = _program("a_inference_step_1__.1", [([512, 512], True)])
    b = _program("a_inference_eval_2__.2", [([512, 512], False)])
    prof = _profile([a, b], [a.skim.module, b.skim.module], {CPU: 8 * MiB})
    assert int(prof.attribution.iloc[0]["xla_parameter_bytes"]) == 1 * MiB
    assert prof.xla_parameters["counted"].sum() == 2  # each program lists its own
    # Two of that kind in one program are two buffers.
    c = _program("a_inference_big_3__.3", [([512, 512], True), ([512, 512], True)])
    prof = _profile([a, c], [a.skim.module, c.skim.module], {CPU: 8 * MiB})
    assert int(prof.attribution.iloc[0]["xla_parameter_bytes"]) == 2 * MiB


def test_parameters_count_whole_within_what_was_allocated_before() -> None:
    # A 4 MiB parameter cannot be among 1 MiB held from before: it names nothing.
    a = _program("a_inference_step_1__.1", [([1024, 1024], True)])
    prof = _profile([a], [a.skim.module], {CPU: 1 * MiB})
    att = prof.attribution.iloc[0]
    assert int(att["xla_parameter_bytes"]) == 0
    assert int(att["before_capture_bytes"]) == 1 * MiB
    assert att[PARTS].sum() == att["in_use_bytes"]


def test_programs_that_did_not_run_name_nothing() -> None:
    a = _program("a_inference_step_1__.1", [([512, 512], True)])
    prof = _profile([a], [], {CPU: 4 * MiB})
    assert (prof.xla_parameters["reason"] == NOT_RUN).all()
    assert "xla_parameter_bytes" in prof.attribution.attrs["not_measured"]
    assert int(prof.attribution.iloc[0]["before_capture_bytes"]) == 4 * MiB


def test_a_parameter_made_inside_the_capture_is_not_counted() -> None:
    a = _program("a_inference_step_1__.1", [([512, 512], False), ([256, 1024], True)])
    events = [alloc(10, 1, 1 * MiB, allocator=CPU, op="IteratorGetNext", shape=None)]
    prof = _profile([a], [a.skim.module], {CPU: 4 * MiB}, events)
    reasons = prof.xla_parameters["reason"].astype(object).tolist()
    # Both are 1 MiB: the batch allocated in the capture may be either of them.
    assert reasons == [MADE_INSIDE, MADE_INSIDE]
    assert int(prof.attribution.iloc[0]["xla_parameter_bytes"]) == 0


def test_small_parameters_count_on_gpus_only_and_allocators_must_be_known() -> None:
    a = _program("a_inference_step_1__.1", [([16, 1024], True)])  # 64 KiB
    prof = _profile([a], [a.skim.module], {CPU: 1 * MiB})
    assert prof.xla_parameters["reason"].tolist() == [SMALL]
    prof = _profile([a], [a.skim.module], {GPU: 1 * MiB}, [alloc(10, 1, 256 * KiB, allocator=GPU)])
    assert int(prof.attribution.iloc[0]["xla_parameter_bytes"]) == 64 * KiB
    # Two allocators and no allocation linked to the program: which one is unknown.
    events = [alloc(10, 1, 256 * KiB, allocator=GPU), alloc(11, 2, 256 * KiB, allocator=CPU)]
    prof = _profile([a], [a.skim.module], {GPU: 1 * MiB, CPU: 1 * MiB}, events)
    assert prof.xla_parameters["reason"].tolist() == [NO_ALLOCATOR]
    assert (prof.attribution["xla_parameter_bytes"] == 0).all()
