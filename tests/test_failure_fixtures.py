"""Real out-of-memory captures (issue 39): one per capture way, eager and compiled.

``fixtures/oom_*``: a Keras model whose layer asks for 4 TiB in its third step,
captured by ``traceparse.profile()`` + ``cap.step``, the Keras ``MemoryCallback``
and ``traceparse run``. The program's own facts (MANIFEST) are the truth:
the op, shape, dtype, bytes, allocator and step; the allocator's counters are
read back with TensorFlow's own ``xplane_pb2``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, GOOD_XPLANE_FIXTURES, MANIFEST, LazyModule, run_traceparse

import traceparse
from traceparse.errors import EXIT_OUT_OF_MEMORY

OOM = [
    "oom_profile_eager",
    "oom_profile_graph",
    "oom_callback_eager",
    "oom_callback_graph",
    "oom_run_eager",
    "oom_run_graph",
]
WAYS = {"profile": "step", "callback": "keras", "run": "run"}

xplane = LazyModule("tensorflow.tsl.profiler.protobuf.xplane_pb2", "reading counters needs TF")


def truth(name: str) -> dict[str, Any]:
    facts: dict[str, Any] = MANIFEST["fixtures"][name]["failure"]
    return facts


@pytest.mark.parametrize("name", OOM)
def test_profile_failure_names_the_request(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    f = prof.failure
    expected = truth(name)
    assert f is not None and f.out_of_memory
    assert f.exception_type == expected["exception"] == "ResourceExhaustedError"
    assert (f.op, f.shape, f.dtype) == (expected["op"], expected["shape"], expected["dtype"])
    assert f.requested_bytes == expected["requested_bytes"] == 2**42  # exact: 4 TiB
    assert f.allocator == expected["allocator"]
    assert f.step == expected["step"]
    assert f.way == WAYS[name.split("_")[1]]
    if expected["message"] is not None:  # the exception the program caught is the record's
        assert f.message == expected["message"]
    # The capture's own facts: the request exceeds everything the allocator has.
    assert f.exceeds_capacity
    assert f.in_use_bytes is not None and 0 < f.in_use_bytes < f.capacity_bytes
    assert f.caught_ps is not None and f.time_ps is not None and f.time_ps <= f.caught_ps
    assert prof.failures() == [f]
    assert not [d for d in prof.diagnostics() if "failure record" in d]


def counters(path: Path) -> list[tuple[int, str, int]]:
    """(time ps from the capture start, allocator, bytes in use after it) of every
    allocator event, read with TensorFlow's own protobuf classes."""
    space = xplane.XSpace.FromString(path.read_bytes())
    start = 0
    for plane in space.planes:
        if plane.name == "Task Environment":
            for stat in plane.stats:
                if plane.stat_metadata[stat.metadata_id].name == "profile_start_time":
                    start = stat.uint64_value or stat.int64_value
    out = []
    for plane in space.planes:
        for line in plane.lines:
            base = line.timestamp_ns - (start if line.timestamp_ns >= start // 2 else 0)
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name not in ("MemoryAllocation", "MemoryDeallocation"):
                    continue
                stats: dict[str, Any] = {}
                for stat in event.stats:
                    kind = stat.WhichOneof("value")
                    value = getattr(stat, kind) if kind else None
                    if kind == "ref_value":
                        value = plane.stat_metadata[value].name
                    stats[plane.stat_metadata[stat.metadata_id].name] = value
                used = int(stats.get("bytes_allocated", 0)) + int(stats.get("bytes_reserved", 0))
                out.append((base * 1000 + event.offset_ps, str(stats["allocator_name"]), used))
    return sorted(out, key=lambda e: e[0])


def counter_at(path: Path, allocator: str, time_ps: int) -> int:
    before = [used for t, a, used in counters(path) if a == allocator and t <= time_ps]
    return before[-1]


@pytest.mark.parametrize("name", OOM)
def test_breakdown_at_the_failure_sums_to_the_allocators_counter(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    f = prof.failure
    assert f is not None and f.time_ps is not None
    rows = prof.breakdown_at(f.time_ps, f.host)
    mine = rows[rows["allocator"] == f.allocator]
    total = int(mine["bytes"].sum())
    assert total == f.in_use_bytes
    assert total == counter_at(Path(prof.path), "mklcpu", f.time_ps)
    # The same rows as the peak's: every column, every holder kind it may use.
    assert list(rows.columns) == list(prof.breakdown.columns)
    assert set(mine["holder"]) <= set(prof.breakdown["holder"]) | {"allocation", "padding"}


@pytest.mark.parametrize("name", ["keras_train", "leak", "eager_ops"])
def test_breakdown_at_any_instant_sums_to_the_counter(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    path = Path(prof.path)
    events = counters(path)
    times = sorted({t for t, _, _ in events})
    for time_ps in [*times[:: max(1, len(times) // 7)], times[-1]]:
        rows = prof.breakdown_at(time_ps)
        for allocator, part in rows.groupby("allocator", observed=True):
            assert int(part["bytes"].sum()) == counter_at(path, str(allocator), time_ps)
    # At the peak's own instant it is the peak's breakdown.
    peak = prof.peak.iloc[0]
    at_peak = prof.breakdown_at(int(peak["time_ps"]))
    at_peak = at_peak[at_peak["allocator"] == peak["allocator"]]
    assert int(at_peak["bytes"].sum()) == int(peak["in_use_bytes"])


@pytest.mark.parametrize("name", OOM)
def test_summary_opens_with_the_failure(name: str) -> None:
    result = run_traceparse("summary", str(FIXTURES / name))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "Out of memory at step 3: " in text
    assert "asked `mklcpu` for 4 TiB (`[1048576,1048576]` float32)" in text
    assert "The request alone exceeds the capacity." in text
    assert text.index("Out of memory at step 3") < text.index("Peak in use")


@pytest.mark.parametrize("name", ["oom_profile_graph", "oom_run_eager"])
def test_check_fails_out_of_memory_whatever_the_budgets(name: str, tmp_path: Path) -> None:
    junit = tmp_path / "check.xml"
    result = run_traceparse(
        "check", str(FIXTURES / name), "--max-peak", "1TiB", "--junit", str(junit)
    )
    assert result.returncode == EXIT_OUT_OF_MEMORY == 5, result.stderr
    assert "FAIL out_of_memory: mklcpu on localhost: Out of memory at step 3" in result.stdout
    assert "ran out of memory" in result.stderr
    xml = junit.read_text()
    assert 'type="OutOfMemory"' in xml and "Out of memory at step 3" in xml
    summary = tmp_path / "summary.md"
    result = run_traceparse(
        "check",
        str(FIXTURES / name),
        "--max-peak",
        "1TiB",
        "--github-summary",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert result.returncode == 5
    assert "out\\_of\\_memory" in summary.read_text() or "out_of_memory" in summary.read_text()
    assert "Out of memory at step 3" in summary.read_text()


def test_check_json_says_why(tmp_path: Path) -> None:
    result = run_traceparse(
        "check", str(FIXTURES / "oom_callback_graph"), "--max-peak", "1TiB", "--format", "json"
    )
    assert result.returncode == 5
    data = json.loads(result.stdout)
    assert data["passed"] is False
    (oom,) = [r for r in data["results"] if r["budget"] == "out_of_memory"]
    assert oom["measured"] == 2**42 and oom["status"] == "fail"


def test_oom_command_prints_the_breakdown_and_what_to_free() -> None:
    result = run_traceparse("oom", str(FIXTURES / "oom_profile_graph"))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "In use at the failure, by layer" in text
    assert "In use at the failure, by op" in text
    assert "Nothing can be freed to fit it" in text
    assert "hidden" in text
    data = json.loads(
        run_traceparse("oom", str(FIXTURES / "oom_run_graph"), "--format", "json").stdout
    )
    (failure,) = data[0]["failures"]
    assert failure["requested_bytes"] == 2**42 and failure["step"] == 3
    assert sum(row["bytes"] for row in failure["by_layer"]) == failure["in_use_bytes"]


def test_run_kept_the_scripts_exit_status() -> None:
    for name in ("oom_run_eager", "oom_run_graph"):
        assert MANIFEST["fixtures"][name]["exit_code"] == 1


def test_reports_open_with_the_failure(tmp_path: Path) -> None:
    for fmt in ("md", "html"):
        out = tmp_path / f"report.{fmt}"
        result = run_traceparse(
            "report", str(FIXTURES / "oom_callback_eager"), "--format", fmt, "-o", str(out)
        )
        assert result.returncode == 0, result.stderr
        text = out.read_text()
        assert "Out of memory at step 3" in text
        assert text.index("Out of memory at step 3") < text.index("Peak in use")
        assert "In use at the failure, by layer" in text
    prof = traceparse.load(FIXTURES / "oom_callback_eager")
    from traceparse.report.notebook import NotebookReport

    assert "Out of memory at step 3" in prof._repr_html_()
    assert str(NotebookReport(prof)).startswith("Out of memory at step 3")


def test_batch_lists_out_of_memory_captures_apart(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_traceparse(
        "batch", str(FIXTURES / "oom_profile_eager"), str(FIXTURES / "leak"), "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert "1 ended in out-of-memory" in result.stdout
    summary = (out / "summary.md").read_text()
    assert "## Ended in out-of-memory" in summary
    assert "Out of memory at step 3" in summary


@pytest.mark.parametrize("name", GOOD_XPLANE_FIXTURES)
def test_captures_that_did_not_fail_show_no_failure(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    assert prof.failure is None and prof.failures() == []
    from traceparse.report import render_markdown

    assert "Out of memory" not in render_markdown([prof])


def test_breakdown_at_defaults_to_the_failure_or_the_peak() -> None:
    prof = traceparse.load(FIXTURES / "oom_profile_graph")
    f = prof.failure
    assert f is not None and f.time_ps is not None
    assert prof.breakdown_at().equals(prof.breakdown_at(f.time_ps, f.host))
    healthy = traceparse.load(FIXTURES / "keras_train")
    assert healthy.breakdown_at() is healthy.breakdown


def test_json_outputs_carry_the_failure_only_when_there_is_one(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert run_traceparse("report", str(FIXTURES / "oom_run_eager"), "-o", str(out)).returncode == 0
    (profile,) = json.loads(out.read_text())["profiles"]
    (failure,) = profile["failures"]
    assert failure["requested_bytes"] == 2**42 and failure["out_of_memory"] is True
    assert sum(r["bytes"] for r in failure["by_op"]) == failure["in_use_bytes"]
    shown = run_traceparse("summary", str(FIXTURES / "oom_run_eager"), "--format", "json")
    assert json.loads(shown.stdout)[0]["failures"][0]["step"] == 3
    healthy = run_traceparse("summary", str(FIXTURES / "leak"), "--format", "json")
    assert "failures" not in json.loads(healthy.stdout)[0]
