"""The variable inventory: reading it, Profile.variables, variable_bytes, reports.

Real captures: ``keras_inventory`` (a Keras model trained one step before
``traceparse.profile()`` starts) and ``keras_memory_callback`` (``fit`` with
``MemoryCallback(profile_batch=(3, 5))``). The ground truth is what Keras
itself listed (``MANIFEST.json``: ``variables``) and what TensorFlow's
``get_memory_info`` said when the profiler started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, MANIFEST, REPO
from helpers.trace import GPU, alloc, trace_of

from traceparse import Profile, load
from traceparse.analysis import PARTS
from traceparse.core.sidecars import read_inventory
from traceparse.decode.variables import InventoryProblem, decode_inventory, short_device
from traceparse.files.discover import find_captures
from traceparse.report import render_html, render_json, render_markdown
from traceparse.tables.variables import CPU_POOL_BYTES, VARIABLE_COLUMNS, device_allocator

INVENTORIED = ["keras_inventory", "keras_memory_callback"]
KiB, MiB = 1 << 10, 1 << 20


def _document(variables: list[dict[str, object]], memory_info: object = None) -> bytes:
    return json.dumps(
        {
            "format": "traceparse.variables",
            "version": 1,
            "tensorflow": "2.21.0",
            "variables": variables,
            "memory_info": memory_info or {},
        }
    ).encode()


def _variable(path: str, nbytes: int, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "shape": [nbytes // 4],
        "dtype": "float32",
        "device": "/job:localhost/replica:0/task:0/device:GPU:0",
        "estimated_bytes": nbytes,
        "role": "weight",
        "belongs_to": None,
        "layer": path.rsplit("/", 1)[0] if "/" in path else None,
        "model": "m",
        "at_start": True,
        "at_stop": True,
    }
    row.update(extra)
    return row


# -- the fixtures ----------------------------------------------------------------------


@pytest.mark.parametrize("name", INVENTORIED)
def test_variables_list_every_model_and_optimizer_variable(name: str) -> None:
    truth = MANIFEST["fixtures"][name]["variables"]
    variables = load(FIXTURES / name).variables
    assert list(variables.columns) == list(VARIABLE_COLUMNS)
    by_path = variables.set_index("path")
    for role, listed in (("weight", truth["weights"]), ("optimizer", truth["optimizer"])):
        for path, nbytes in listed.items():
            assert path in by_path.index, f"{path} missing from the inventory"
            assert by_path.loc[path, "role"] == role
            assert by_path.loc[path, "estimated_bytes"] == nbytes
    # Every slot names its weight; Adam keeps two slots per weight, so twice the bytes.
    weights = variables[variables["role"] == "weight"]
    slots = variables[(variables["role"] == "optimizer") & variables["belongs_to"].notna()]
    assert set(slots["belongs_to"]) == set(weights["path"])
    assert slots["estimated_bytes"].sum() == 2 * weights["estimated_bytes"].sum()
    for path in weights["path"]:
        mine = slots[slots["belongs_to"] == path]
        assert sorted(p.rsplit("_", 1)[-1] for p in mine["path"]) == ["momentum", "velocity"]
        assert set(mine["layer"]) == {path.rsplit("/", 1)[0]}
    assert set(variables["allocator"].astype(str)) == {"mklcpu"}
    assert set(variables["device"].astype(str)) == {"/device:CPU:0"}
    assert variables["at_start"].all() and variables["at_stop"].all()


@pytest.mark.parametrize("name", INVENTORIED)
def test_variable_bytes_name_most_of_what_was_allocated_before(name: str) -> None:
    prof = load(FIXTURES / name)
    row = prof.attribution.iloc[0]
    before = int(row["variable_bytes"]) + int(row["before_capture_bytes"])
    assert before > 0
    assert int(row["variable_bytes"]) >= 0.8 * before
    assert sum(int(row[p]) for p in PARTS if pd.notna(row[p])) == int(row["in_use_bytes"])
    # Independent check: TensorFlow's own counter when the profiler started holds
    # at least the variables counted (the 1 MiB kernels and their Adam slots).
    counter = prof.traces[0].inventory.memory_info["start"]["/device:CPU:0"]["current"]
    assert int(row["variable_bytes"]) <= counter
    big = prof.variables[prof.variables["estimated_bytes"] >= CPU_POOL_BYTES]
    assert int(row["variable_bytes"]) == int(big["estimated_bytes"].sum()) == 6 * MiB


def test_memory_callback_marks_exactly_the_profiled_batches() -> None:
    prof = load(FIXTURES / "keras_memory_callback")
    markers = prof.step_markers
    assert sorted(markers["step"].tolist()) == [3, 4, 5]
    assert set(markers["name"].astype(str)) == {"train"}
    assert sorted(prof.steps["step"].dropna().astype(int).tolist()) == [3, 4, 5]
    assert MANIFEST["fixtures"]["keras_memory_callback"]["captures"][0]["step_nums"] == [3, 4, 5]


@pytest.mark.parametrize("name", INVENTORIED)
def test_reports_show_the_split_and_the_largest_variables(name: str) -> None:
    prof = load(FIXTURES / name)
    (summary,) = prof.summary()
    assert summary.before_capture is not None
    assert summary.before_capture["weight_bytes"] == 2 * MiB
    assert summary.before_capture["optimizer_bytes"] == 4 * MiB
    assert summary.before_capture["optimizer"] == "adam"
    expected = (
        "2 MiB weights in 2 variables (and 4 under 256 KiB, 15 KiB, untraced), 4 MiB Adam "
        "state in 4 variables (and 10 under 256 KiB, 30.1 KiB, untraced), 0 B not named"
    )
    markdown = render_markdown([prof], "test")
    assert expected in markdown
    assert "Largest variables alive before the capture" in markdown
    assert "adam/hidden_kernel_momentum" in markdown
    assert "Adam state" in render_html([prof], "test")
    document = json.loads(render_json([prof], "test"))
    record = document["profiles"][0]["summary"][0]
    assert record["attribution"]["variable_bytes"] == 6 * MiB
    assert record["before_capture"]["unnamed_bytes"] == 0
    assert {v["path"] for v in record["top_variables"]} >= {"hidden/kernel", "bottleneck/kernel"}
    assert "variable_bytes" in document["profiles"][0]["tables"]["attribution"][0]


def test_summary_command_prints_the_split() -> None:
    from conftest import run_traceparse

    proc = run_traceparse("summary", str(FIXTURES / "keras_inventory"))
    assert proc.returncode == 0, proc.stderr
    assert "Before the capture" in proc.stdout
    assert "4 MiB Adam state in 4 variables" in proc.stdout
    assert "variables alive before the capture" in proc.stdout


def test_load_with_an_inventory_does_not_import_tensorflow() -> None:
    code = (
        "import sys, traceparse\n"
        f"p = traceparse.load({str(FIXTURES / 'keras_inventory')!r})\n"
        "assert len(p.variables) > 0 and p.attribution['variable_bytes'].sum() > 0\n"
        "p.summary()\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


# -- captures without an inventory -------------------------------------------------------


def test_a_capture_without_inventory_loads_as_before() -> None:
    prof = load(FIXTURES / "keras_train")
    assert prof.variables.empty
    assert list(prof.variables.columns) == list(VARIABLE_COLUMNS)
    assert "no variable inventory" in prof.variables.attrs["diagnostic"]
    assert not any("inventory" in d for d in prof.diagnostics())
    assert prof.attribution.attrs["not_measured"] == ["variable_bytes", "xla_parameter_bytes"]
    # Not measured is NA (a CSV or Parquet export keeps it), never a 0 that looks measured.
    assert prof.attribution["variable_bytes"].isna().all()
    assert prof.attribution[["in_use_bytes", "before_capture_bytes"]].notna().all().all()
    (summary,) = prof.summary()
    assert "variable_bytes" not in summary.attribution
    assert summary.to_dict()["before_capture"] is None  # present and null: not made
    document = json.loads(render_json([prof], "test"))
    assert "variable_bytes" not in document["profiles"][0]["tables"]["attribution"][0]


# -- reading the file ------------------------------------------------------------------


def test_a_broken_inventory_is_a_diagnostic_not_an_error(tmp_path: Path) -> None:
    source = next((FIXTURES / "keras_inventory").rglob("*.xplane.pb"))
    run = tmp_path / "plugins" / "profile" / source.parent.name
    run.mkdir(parents=True)
    (run / "localhost.xplane.pb").write_bytes(source.read_bytes())
    (run / "localhost.variables.json").write_text('{"format": "something else"}')
    prof = load(tmp_path)
    assert prof.variables.empty
    assert any("variable inventory was ignored" in d for d in prof.diagnostics())
    assert len(prof.allocations) == len(load(FIXTURES / "keras_inventory").allocations)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"not json", "not JSON"),
        (b"[]", "format"),
        (json.dumps({"format": "traceparse.variables", "version": 9}).encode(), "version 9"),
        (_document([_variable("a/b", 4, role="boss")]), "role"),
        (_document([_variable("a/b", 4, shape=[-1])]), "shape"),
        (_document([_variable("a/b", 4, estimated_bytes="4")]), "estimated_bytes"),
    ],
)
def test_bad_inventories_say_why(data: bytes, why: str) -> None:
    with pytest.raises(InventoryProblem, match=why):
        decode_inventory(data, "x.variables.json")


def test_devices_and_allocators() -> None:
    assert short_device("/job:worker/replica:0/task:1/device:GPU:3") == "/device:GPU:3"
    assert device_allocator("/device:GPU:3") == "GPU_3_bfc"
    assert device_allocator("/device:CPU:0", ["mklcpu", "GPU_0_bfc"]) == "mklcpu"
    assert device_allocator("/device:CPU:0", ["cpu"]) == "cpu"
    assert device_allocator("/device:CPU:0") == "mklcpu"
    assert device_allocator("/device:TPU:0") is None


# -- the counting rule, on hand-built traces ---------------------------------------------


def _with_inventory(trace: object, rows: list[dict[str, object]], info: object = None) -> Profile:
    trace.inventory = decode_inventory(_document(rows, info), "host0.variables.json")  # type: ignore[attr-defined]
    return Profile([trace])  # type: ignore[list-item]


def test_only_variables_alive_throughout_and_on_the_allocator_count() -> None:
    trace = trace_of([alloc(10, 1, 1 * MiB)], before={GPU: 10 * MiB})
    rows = [
        _variable("dense/kernel", 4 * MiB),
        _variable(
            "adam/dense_kernel_momentum", 2 * MiB, role="optimizer", belongs_to="dense/kernel"
        ),
        _variable("made/during", 1 * MiB, at_start=False),  # has its own allocation event
        _variable("dropped/before", 1 * MiB, at_stop=False),
        _variable("on/cpu", 1 * MiB, device="/device:CPU:0"),  # another allocator
    ]
    prof = _with_inventory(trace, rows)
    row = prof.attribution.iloc[0]
    assert int(row["variable_bytes"]) == 6 * MiB
    assert int(row["before_capture_bytes"]) == 4 * MiB
    assert (
        sum(int(row[p]) for p in PARTS if pd.notna(row[p])) == int(row["in_use_bytes"]) == 11 * MiB
    )
    assert prof.attribution.attrs["not_measured"] == ["xla_parameter_bytes"]  # no XLA program
    split = prof.summary()[0].before_capture
    assert split is not None
    assert (split["weight_variables"], split["optimizer_variables"]) == (1, 1)


def test_small_cpu_variables_are_not_counted() -> None:
    cpu = "mklcpu"
    trace = trace_of([alloc(10, 1, 1 * MiB, allocator=cpu)], before={cpu: 2 * MiB})
    on_cpu = {"device": "/device:CPU:0"}
    rows = [
        _variable("big", CPU_POOL_BYTES, **on_cpu),
        _variable("small", CPU_POOL_BYTES - 4, **on_cpu),
    ]
    row = _with_inventory(trace, rows).attribution.iloc[0]
    assert int(row["variable_bytes"]) == CPU_POOL_BYTES
    assert int(row["before_capture_bytes"]) == 2 * MiB - CPU_POOL_BYTES


def test_variable_bytes_never_exceed_what_was_allocated_before() -> None:
    # A variable counts whole or not at all: 8 MiB cannot be among 3 MiB held from
    # before, so it was reallocated during the capture and names nothing here.
    trace = trace_of([alloc(10, 1, 1 * MiB)], before={GPU: 3 * MiB})
    variables = [_variable("huge", 8 * MiB), _variable("fits", 2 * MiB)]
    prof = _with_inventory(trace, variables)
    row = prof.attribution.iloc[0]
    assert int(row["variable_bytes"]) == 2 * MiB
    assert int(row["before_capture_bytes"]) == 1 * MiB
    named = prof.breakdown[prof.breakdown["holder"] == "variable"]
    assert named["variable"].tolist() == ["fits"]
    assert sum(int(row[p]) for p in PARTS if pd.notna(row[p])) == int(row["in_use_bytes"])


def test_cpu_capture_without_events_and_without_onednn_says_so() -> None:
    trace = trace_of([])
    prof = _with_inventory(trace, [], info={"start": {}, "stop": {}})
    assert any("TF_ENABLE_ONEDNN_OPTS=1" in d for d in prof.diagnostics())
    counted = {"start": {"/device:CPU:0": {"current": 1, "peak": 1}}}
    other = _with_inventory(trace_of([]), [], info=counted)
    assert not any("TF_ENABLE_ONEDNN_OPTS" in d for d in other.diagnostics())


def test_inventory_is_read_beside_each_capture() -> None:
    (capture,) = find_captures(FIXTURES / "keras_inventory")
    trace = trace_of([])
    read_inventory(capture, trace)
    assert trace.inventory is not None
    assert trace.inventory.tensorflow == MANIFEST["versions"]["tensorflow"]
    frame = trace.inventory.variables
    assert (
        isinstance(frame, pd.DataFrame)
        and len(frame)
        == len(MANIFEST["fixtures"]["keras_inventory"]["variables"]["weights"])
        + len(MANIFEST["fixtures"]["keras_inventory"]["variables"]["optimizer"])
        + 2
    )
