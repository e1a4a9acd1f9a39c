"""The failure record (issue 39) read without TensorFlow: its parser, and bad records.

A record beside a capture that is truncated, huge, not what it claims, from
another run, or full of hostile text gives one diagnostic, escaped output, and
a capture that still loads. A message whose shape does not parse leaves the
parsed fields NA, never a wrong number.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, run_traceparse

import traceparse
from traceparse.decode.failure import (
    MAX_FAILURE_BYTES,
    FailureProblem,
    decode_failure,
    parse_message,
)

EAGER = (
    "{{function_node __wrapped__RandomUniform_device_/job:localhost/replica:0/task:0/device:"
    "CPU:0}} OOM when allocating tensor with shape[16777215,4096] and type float on "
    "/job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu [Op:RandomUniform] name: "
)
GRAPH = "\n".join(
    [
        "Graph execution error:",
        "",
        "Detected at node functional_1/blowup_1/cond/random_uniform/RandomUniform defined at "
        "(most recent call last):",
        '  File "/work/train.py", line 17, in <module>',
        "",
        '  File "/work/layers.py", line 14, in call',
        "",
        "OOM when allocating tensor with shape[64,1024,1024] and type half on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        "\t [[{{node functional_1/blowup_1/cond/random_uniform/RandomUniform}}]]",
        "Hint: If you want to see a list of allocated tensors when OOM happens, add "
        "report_tensor_allocations_upon_oom to RunOptions for current allocation info.",
        " [Op:__inference_one_step_on_data_845]",
    ]
)


def test_eager_message() -> None:
    r = parse_message(EAGER)
    assert (r.op, r.op_type, r.shape, r.dtype) == (
        "RandomUniform",
        "RandomUniform",
        "[16777215,4096]",
        "float32",
    )
    assert r.requested_bytes == 16777215 * 4096 * 4
    assert r.allocator == "mklcpu"
    assert r.device == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert r.defined_at == ()


def test_graph_message_names_the_node_and_its_stack() -> None:
    r = parse_message(GRAPH)
    assert r.op == "functional_1/blowup_1/cond/random_uniform/RandomUniform"
    assert r.op_type == "RandomUniform"
    assert (r.shape, r.dtype, r.allocator) == ("[64,1024,1024]", "float16", "GPU_0_bfc")
    assert r.requested_bytes == 64 * 1024 * 1024 * 2
    assert [(f.file, f.line, f.function) for f in r.defined_at] == [
        ("/work/train.py", 17, "<module>"),
        ("/work/layers.py", 14, "call"),
    ]


def test_older_wording_and_a_device_without_an_allocator() -> None:
    r = parse_message("OOM when allocating tensor of shape [32, 32] and type double")
    assert (r.shape, r.dtype, r.requested_bytes) == ("[32,32]", "float64", 32 * 32 * 8)
    r = parse_message(
        "Out of memory while trying to allocate 4096 bytes on /job:w/replica:0/task:1/device:GPU:3"
    )
    assert r.device == "/job:w/replica:0/task:1/device:GPU:3" and r.allocator is None
    assert r.requested_bytes == 4096


def test_xla_message_states_bytes() -> None:
    r = parse_message(
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1073741824 bytes."
    )
    assert r.requested_bytes == 1073741824
    assert r.shape is None and r.dtype is None and r.op is None


@pytest.mark.parametrize(
    "shape",
    ["[?,4096]", "[-1,4096]", "[1e9,2]", "[４,2]", "[12345678901234567890,2]", "[1,,2]"],
)
def test_an_unparseable_shape_leaves_the_fields_na(shape: str) -> None:
    text = EAGER.replace("[16777215,4096]", shape)
    r = parse_message(text)
    assert r.shape is None
    assert r.requested_bytes is None  # never a wrong number
    assert r.dtype == "float32" and r.allocator == "mklcpu"


def test_an_unknown_dtype_leaves_bytes_na() -> None:
    r = parse_message(EAGER.replace("type float", "type quux"))
    assert r.dtype is None and r.requested_bytes is None and r.shape == "[16777215,4096]"


def test_a_string_tensor_has_no_byte_count() -> None:
    assert parse_message(EAGER.replace("type float", "type string")).requested_bytes is None


def record(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": "traceparse.failure",
        "version": 1,
        "tensorflow": "2.21.0",
        "way": "profile",
        "exception": {"type": "ResourceExhaustedError", "module": "x", "message": EAGER},
        "message_bytes": len(EAGER),
        "step": 3,
        "failed_at_ns": None,
        "traceback": [{"file": "train.py", "line": 3, "function": "<module>"}],
    }
    data.update(changes)
    return data


def test_decode_a_record() -> None:
    f = decode_failure(json.dumps(record()).encode(), "p", "h")
    assert f.out_of_memory and f.step == 3 and f.request.allocator == "mklcpu"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"format": "traceparse.failure", "ver', "not JSON"),
        (b"[1, 2]", "format"),
        (json.dumps(record(format="traceparse.variables")).encode(), "format"),
        (json.dumps(record(version=2)).encode(), "version 2"),
        (json.dumps(record(exception="boom")).encode(), "not an object"),
        (json.dumps(record(exception={"type": 3, "message": ""})).encode(), "class name"),
        (json.dumps(record(step=-1)).encode(), '"step"'),
        (json.dumps(record(step=True)).encode(), '"step"'),
        (json.dumps(record(failed_at_ns=2**70)).encode(), '"failed_at_ns"'),
        (json.dumps(record(traceback={"a": 1})).encode(), '"traceback"'),
        (b"[" * 100_000, "nested too deeply"),
    ],
)
def test_bad_records_are_refused_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(FailureProblem, match=reason):
        decode_failure(data, "p", "h")


# -- bad records beside a real capture --------------------------------------------------

FIXTURE = "oom_profile_graph"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of a real out-of-memory capture, its run directory returned."""
    shutil.copytree(FIXTURES / FIXTURE, tmp_path / FIXTURE)
    (found,) = (tmp_path / FIXTURE).rglob("*.failure.json")
    return found.parent


def original(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "localhost.failure.json").read_text())
    return data


def write(run: Path, data: bytes) -> None:
    (run / "localhost.failure.json").write_bytes(data)


def loads_without_failure(run: Path) -> list[str]:
    prof = traceparse.load(run)
    assert prof.failure is None
    assert len(prof.allocations) > 0  # the capture itself still loads
    notes = [d for d in prof.diagnostics() if "failure record" in d]
    assert len(notes) == 1, prof.diagnostics()
    return notes


def test_a_truncated_record(copy: Path) -> None:
    text = (copy / "localhost.failure.json").read_bytes()
    write(copy, text[: len(text) // 2])
    (note,) = loads_without_failure(copy)
    assert "not JSON" in note


def test_a_huge_record(copy: Path) -> None:
    data = original(copy)
    data["padding"] = "x" * (MAX_FAILURE_BYTES + 1)
    write(copy, json.dumps(data).encode())
    (note,) = loads_without_failure(copy)
    assert "larger than" in note


def test_a_ten_megabyte_message(copy: Path) -> None:
    # The writer keeps a message's head; a record holding more was not made by it.
    data = original(copy)
    data["exception"]["message"] = "OOM " * (10 * 2**20 // 4)
    write(copy, json.dumps(data).encode())
    loads_without_failure(copy)


def test_a_record_of_another_kind(copy: Path) -> None:
    inventory = next(copy.glob("*.variables.json")).read_bytes()
    write(copy, inventory)
    (note,) = loads_without_failure(copy)
    assert "format" in note


def test_a_record_from_another_run(copy: Path) -> None:
    data = original(copy)
    data["failed_at_ns"] -= 3600 * 10**9  # an hour before this capture started
    write(copy, json.dumps(data).encode())
    (note,) = loads_without_failure(copy)
    assert "another run" in note


def test_a_directory_in_its_place(copy: Path) -> None:
    (copy / "localhost.failure.json").unlink()
    (copy / "localhost.failure.json").mkdir()
    loads_without_failure(copy)


HOSTILE = "\x1b[31mred\x1b[0m \u202egnp.exe\u202c \x07 \r\n\x00 `|<script>alert(1)</script>"


def test_hostile_text_is_escaped_everywhere(copy: Path, tmp_path: Path) -> None:
    data = original(copy)
    message = data["exception"]["message"]
    data["exception"]["type"] = "Resource" + HOSTILE
    data["exception"]["message"] = message.replace("by allocator mklcpu", "by allocator mklcpu") + (
        HOSTILE * 100
    )
    node = "oom_1/blowup_1/cond/random_uniform/RandomUniform"
    data["exception"]["message"] = data["exception"]["message"].replace(
        "{{node " + node, "{{node " + node + "\x1b]8;;http://x\x07"
    )
    write(copy, json.dumps(data).encode())
    prof = traceparse.load(copy)
    assert prof.failure is not None and prof.failure.out_of_memory
    for args in (["summary", str(copy)], ["oom", str(copy)]):
        result = run_traceparse(*args)
        assert result.returncode == 0, result.stderr
        for raw in ("\x1b", "\u202e", "\x07", "\x00"):
            assert raw not in result.stdout, (args, raw)
    for fmt in ("md", "html"):
        out = tmp_path / f"r.{fmt}"
        result = run_traceparse("report", str(copy), "--format", fmt, "-o", str(out))
        assert result.returncode == 0, result.stderr
        text = out.read_text()
        for raw in ("\x1b", "\u202e", "\x07", "<script>alert"):
            assert raw not in text, (fmt, raw)


def test_the_writer_keeps_a_huge_messages_head_and_survives_a_broken_str(tmp_path: Path) -> None:
    from traceparse.capture.failure import describe_failure, write_failure

    data = describe_failure(ValueError("OOM " + "x" * 10 * 2**20), way="run", step=4)
    assert len(data["exception"]["message"]) == 64 * 1024
    assert data["message_bytes"] == 4 + 10 * 2**20
    path = Path(write_failure(data, tmp_path, "host"))
    assert path.name == "host.failure.json" and path.stat().st_size < 100 * 1024
    f = decode_failure(path.read_bytes(), str(path), "host")
    assert f.message_cut and f.step == 4 and f.way == "run"

    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    broken = describe_failure(Broken(), way="profile", step=None)
    assert broken["exception"]["message"] == "<Broken whose message could not be read>"
    hostile = describe_failure(RuntimeError("\x1b[2J\u202e"), way="profile", step=None)
    text = Path(write_failure(hostile, tmp_path, "h2")).read_text()
    assert "\x1b" not in text and "\u202e" not in text  # stored as \\u escapes
