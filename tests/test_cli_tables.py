"""Every table command in every format, summary and report, on the real fixtures.

Each case runs the real command in a subprocess. Goldens (tests/golden/cli/)
pin the plain ``summary`` output and the ``--format json`` tables; run names
(capture timestamps) are normalised. To accept a deliberate change:

    TRACEPARSE_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_cli_tables.py
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import MEMORY_FIXTURES

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "cli"
UPDATE = os.environ.get("TRACEPARSE_UPDATE_GOLDEN") == "1"
TABLE_COMMANDS = ["allocations", "ops", "scopes", "steps", "peak"]
RUN_NAME = re.compile(r"\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}")


def traceparse(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS")}
    return subprocess.run(
        [sys.executable, "-m", "traceparse", *args],
        cwd=REPO,
        capture_output=True,
        timeout=180,
        env=env,
    )


def ok(*args: str) -> subprocess.CompletedProcess[bytes]:
    result = traceparse(*args)
    assert result.returncode == 0, result.stderr.decode()
    return result


def normalise(text: str) -> str:
    return RUN_NAME.sub("<run>", text)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    text = normalise(text)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with TRACEPARSE_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its golden (see module docstring)"


# -- table commands × formats --------------------------------------------------


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_table_format(command: str) -> None:
    out = ok(command, "fixtures/keras_train").stdout.decode()
    lines = out.splitlines()
    assert "run " in lines[0] or "peak" in lines[0]
    assert any(set(line) <= {"-", " "} and "--" in line for line in lines)
    assert "\x1b[" not in out  # not a terminal: no colour codes
    assert "MiB" in out or "KiB" in out


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_csv_format(command: str) -> None:
    out = ok(command, "fixtures/keras_train", "--format", "csv").stdout.decode()
    frame = pd.read_csv(io.StringIO(out))
    assert len(frame) > 0
    byte_columns = [c for c in frame.columns if c.endswith("_bytes")]
    assert byte_columns, frame.columns
    assert all(pd.api.types.is_numeric_dtype(frame[c]) for c in byte_columns)


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_json_format_matches_golden(command: str) -> None:
    out = ok(command, "fixtures/keras_train", "--format", "json", "--top", "10").stdout.decode()
    rows = json.loads(out)
    assert isinstance(rows, list) and rows and isinstance(rows[0], dict)
    check_golden(f"{command}_keras_train.json", out)


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_parquet_format(command: str, tmp_path: Path) -> None:
    target = tmp_path / "nested" / f"{command}.parquet"
    result = ok(command, "fixtures/keras_train", "-o", str(target))  # format from the suffix
    assert result.stdout == b""
    frame = pd.read_parquet(target)
    assert len(frame) > 0
    assert not list(target.parent.glob(".*.tmp"))


def test_csv_file_output_and_options(tmp_path: Path) -> None:
    target = tmp_path / "allocations.csv"
    ok(
        "allocations",
        "fixtures/keras_train",
        "-o",
        str(target),
        "--sort",
        "requested_bytes",
        "--top",
        "5",
        "--columns",
        "op,shape,requested_bytes",
        "--allocator",
        "mklcpu",
    )
    frame = pd.read_csv(target)
    assert list(frame.columns) == ["op", "shape", "requested_bytes"]
    assert len(frame) == 5
    assert frame["requested_bytes"].is_monotonic_decreasing


def test_table_top_and_footer() -> None:
    out = ok("allocations", "fixtures/keras_train", "--top", "3").stdout.decode()
    assert "more rows" in out.splitlines()[-1]
    assert len(out.splitlines()) == 1 + 2 + 3 + 1  # title, header, rule, rows, footer


def test_steps_in_step_order() -> None:
    rows = json.loads(ok("steps", "fixtures/keras_train", "--format", "json").stdout)
    steps = [r["step"] for r in rows if r["step"] is not None]
    assert steps == sorted(steps)


def test_peak_per_allocator() -> None:
    rows = json.loads(
        ok("peak", "fixtures/keras_train", "--per-allocator", "--format", "json").stdout
    )
    assert [r["allocator"] for r in rows] == ["mklcpu"]
    assert rows[0]["in_use_bytes"] > 0


@pytest.mark.parametrize(
    "fixture", [*MEMORY_FIXTURES, "legacy", "legacy_binary", "both", "no_memory"]
)
def test_peak_rows_add_up_to_the_allocators_counter(fixture: str) -> None:
    rows = pd.DataFrame(json.loads(ok("peak", f"fixtures/{fixture}", "--format", "json").stdout))
    peaks = json.loads(
        ok("peak", f"fixtures/{fixture}", "--per-allocator", "--format", "json").stdout
    )
    assert len(peaks) == (0 if fixture == "no_memory" else 1)
    for peak in peaks:
        mine = rows[(rows["host"] == peak["host"]) & (rows["allocator"] == peak["allocator"])]
        assert int(mine["allocated_bytes"].sum()) == peak["in_use_bytes"], fixture
    if fixture == "keras_callback":  # Keras allocated part of it before the capture
        before = rows[rows["region"] == "before_capture"]
        assert before["op"].tolist() == ["(allocated before the capture)"]
        assert int(before["allocated_bytes"].iloc[0]) > 0


def test_scopes_depth() -> None:
    shallow = json.loads(ok("scopes", "fixtures/keras_train", "--format", "json").stdout)
    deep = json.loads(
        ok("scopes", "fixtures/keras_train", "--depth", "2", "--format", "json").stdout
    )
    assert len(deep) >= len(shallow)


@pytest.mark.parametrize("fixture", ["layers_cnn", "layers_cnn_xla"])
def test_scopes_name_layers_and_as_written_keeps_the_op_names_scopes(fixture: str) -> None:
    layers = json.loads(ok("scopes", f"fixtures/{fixture}", "--format", "json").stdout)
    assert [row["scope"] for row in layers][:2] == ["conv_a", "conv_b"]
    written = ok("scopes", f"fixtures/{fixture}", "--as-written", "--format", "json").stdout
    scopes = {row["scope"] for row in json.loads(written)}
    assert "mycnn_1" in scopes and "conv_a" not in scopes
    head = ok("scopes", f"fixtures/{fixture}", "--as-written").stdout.decode().splitlines()[0]
    assert head.startswith("Scopes (depth 1, as written)")


def test_no_memory_capture_says_so() -> None:
    result = ok("ops", "fixtures/no_memory")
    assert b"no memory events" in result.stdout
    assert b"host tracer level" in result.stderr


def test_several_runs_note_which_is_shown() -> None:
    result = ok("ops", "fixtures/two_runs")
    assert b"holds 2 runs; showing the newest" in result.stderr
    assert ok("ops", "fixtures/two_runs", "--quiet").stderr == b""


def test_legacy_capture() -> None:
    out = ok("allocations", "fixtures/legacy", "--format", "json").stdout
    assert json.loads(out)


# -- summary -------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["keras_train", "leak", "no_memory"])
def test_summary_matches_golden(fixture: str) -> None:
    out = ok("summary", f"fixtures/{fixture}").stdout.decode()
    check_golden(f"summary_{fixture}.txt", out)


def test_summary_of_several_paths_and_runs() -> None:
    out = ok("summary", "fixtures/two_runs", "fixtures/eager_ops").stdout.decode()
    assert out.count("Allocator mklcpu on localhost") == 3
    assert out.count("\nRun ") + out.startswith("Run ") == 3


def test_summary_json(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    ok("summary", "fixtures/leak", "-o", str(target))
    data = json.loads(target.read_text())
    assert data[0]["allocators"][0]["allocator"] == "mklcpu"
    assert data[0]["allocators"][0]["peak_bytes"] > 0


# -- report --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_report_formats(fmt: str, tmp_path: Path) -> None:
    target = tmp_path / f"report.{fmt}"
    ok("report", "fixtures/keras_train", "fixtures/leak", "-o", str(target))
    text = target.read_text()
    assert "mklcpu" in text
    if fmt == "json":
        json.loads(text)
    if fmt == "html":
        assert text.lstrip().lower().startswith("<!doctype html")


def test_report_to_stdout() -> None:
    out = ok("report", "fixtures/keras_train").stdout.decode()  # md by default
    assert out.lstrip().startswith("#")


def test_picosecond_values_are_whole_and_tables_say_when_they_show_words() -> None:
    rows = json.loads(ok("ops", "fixtures/keras_train", "--format", "json").stdout)
    lifetimes = [r["mean_lifetime_ps"] for r in rows if r["mean_lifetime_ps"] is not None]
    assert lifetimes and all(isinstance(v, int) for v in lifetimes)
    out = ok("steps", "fixtures/leak", "--columns", "step,start_ps,duration").stdout.decode()
    header = out.splitlines()[1].split()
    assert header == ["step", "start", "duration"]  # not start_ps over "52.7 µs"
    assert re.search(r"\d (µs|ms|s)\b", out.splitlines()[3])
    by_start = ok("steps", "fixtures/leak", "--sort", "start", "--reverse", "--format", "csv")
    starts = pd.read_csv(io.StringIO(by_start.stdout.decode()))["start_ps"].tolist()
    assert starts == sorted(starts, reverse=True)


def test_percentages_accept_a_percent_sign_and_help_says_what_a_bare_number_means() -> None:
    help_text = ok("check", "--help").stdout.decode()
    assert "1 is 100%" in " ".join(help_text.split())
    both = [
        traceparse("check", "fixtures/leak", "--max-utilisation", value)
        for value in ("90%", "0.9", "90")
    ]
    assert {r.returncode for r in both} == {0}
    tight = traceparse("check", "fixtures/leak", "--max-utilisation", "0.0001%")
    assert tight.returncode == 4, tight.stderr.decode()
