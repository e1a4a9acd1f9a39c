"""The ``traceparse`` command as users run it: help, errors, exit codes, run, demo.

Every test here runs the real command in a subprocess (``python -m traceparse``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, run_traceparse

COMMANDS = ["run", "summary", "report", "peak", "allocations", "ops", "scopes", "steps", "demo"]


traceparse = run_traceparse


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("traceparse")
    return lines[0]


# -- help and usage ------------------------------------------------------------


def test_help_lists_every_command_and_the_exit_codes() -> None:
    result = traceparse("--help")
    assert result.returncode == 0
    for name in COMMANDS:
        assert f"\n    {name}" in result.stdout
    for code in ("0  success", "1  internal error", "2  usage error", "3  input problem", "4  "):
        assert code in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command: str) -> None:
    result = traceparse(command, "--help")
    assert result.returncode == 0, result.stderr
    assert f"usage: traceparse {command}" in result.stdout
    assert "exit codes:" in result.stdout


def test_version() -> None:
    result = traceparse("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("traceparse ")


def test_no_command_is_a_usage_error() -> None:
    result = traceparse()
    assert result.returncode == 2
    assert "COMMAND" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--bogus",),
        ("summary", str(FIXTURES / "keras_train"), "--bogus"),
        ("ops", str(FIXTURES / "keras_train"), "--format", "xml"),
        ("ops", str(FIXTURES / "keras_train"), "--top", "-1"),
        ("ops",),
        ("frobnicate",),
    ],
)
def test_usage_errors_exit_2_in_one_line(args: tuple[str, ...]) -> None:
    line = assert_one_line_error(traceparse(*args), 2)
    assert "--help" in line


def test_bad_sort_column_and_allocator_exit_2() -> None:
    keras = str(FIXTURES / "keras_train")
    line = assert_one_line_error(traceparse("ops", keras, "--sort", "nonsense"), 2)
    assert "nonsense" in line and "op" in line
    line = assert_one_line_error(traceparse("allocations", keras, "--allocator", "GPU_9"), 2)
    assert "GPU_9" in line and "mklcpu" in line


# -- input problems: exit 3, one line naming the file ---------------------------


@pytest.mark.parametrize("command", ["summary", "report", "peak", "allocations", "ops", "steps"])
def test_missing_path_exits_3_naming_it(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-logdir"
    line = assert_one_line_error(traceparse(command, str(missing)), 3)
    assert str(missing) in line


@pytest.mark.parametrize("fixture", ["corrupt", "not_a_capture"])
def test_corrupt_capture_exits_3_naming_the_file(fixture: str) -> None:
    line = assert_one_line_error(traceparse("summary", f"fixtures/{fixture}"), 3)
    assert f"fixtures/{fixture}/plugins/profile/" in line
    assert "localhost.xplane.pb" in line


def test_directory_without_a_capture_exits_3(tmp_path: Path) -> None:
    line = assert_one_line_error(traceparse("ops", str(tmp_path)), 3)
    assert str(tmp_path) in line


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = traceparse("summary", str(tmp_path / "missing"), "--debug")
    assert result.returncode == 3
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("traceparse: error:")


def test_unwritable_output_exits_2(tmp_path: Path) -> None:
    line = assert_one_line_error(
        traceparse("ops", "fixtures/keras_train", "--format", "csv", "-o", str(tmp_path)), 2
    )
    assert str(tmp_path) in line


# -- fast start ----------------------------------------------------------------


def test_importing_the_cli_loads_no_heavy_modules() -> None:
    # The CLI adds nothing heavy to what `import traceparse` loads; TensorFlow,
    # matplotlib and rich wait for the command that needs them. (pandas, which
    # the package imports, may bring pyarrow along: that is pandas' choice.)
    code = textwrap.dedent(
        """
        import sys
        import traceparse
        before = set(sys.modules)
        import traceparse.cli.app
        traceparse.cli.app.build_parser()
        added = set(sys.modules) - before
        heavy = ("tensorflow", "matplotlib", "pyarrow", "rich", "keras", "pandas", "numpy")
        print(sorted(m for m in added if m.split(".")[0] in heavy))
        print(sorted(m for m in ("tensorflow", "matplotlib", "rich", "keras") if m in sys.modules))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "[]"]


# -- run and demo (need TensorFlow) ---------------------------------------------


def test_run_keeps_the_script_output_and_exit_code(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import tensorflow as tf

            x = tf.ones((256, 1024))  # 1 MiB: big enough for mklcpu to record
            y = tf.matmul(x, tf.ones((1024, 512)))
            print("script says", sys.argv[1:], int(y.shape[0]))
            sys.exit(7)
            """
        )
    )
    logdir = tmp_path / "logs"
    result = traceparse("run", "--logdir", str(logdir), str(script), "--flag", "value")
    assert result.returncode == 7, result.stderr
    assert result.stdout == "script says ['--flag', 'value'] 256\n"
    assert "Capture:" in result.stderr
    assert "mklcpu" in result.stderr
    assert list(logdir.glob("plugins/profile/*/*.xplane.pb"))


def test_run_missing_script_is_a_usage_error(tmp_path: Path) -> None:
    line = assert_one_line_error(traceparse("run", str(tmp_path / "nope.py")), 2)
    assert "nope.py" in line


def test_demo_captures_summarises_and_writes_reports(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    output = tmp_path / "demo-output"
    started = time.monotonic()
    result = traceparse("demo", "--output", str(output), timeout=300)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "Allocator mklcpu" in result.stdout or "Allocator GPU" in result.stdout
    assert "debug_cache" in result.stdout  # the planted leak shows up by name
    html = (output / "report.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html")
    assert (output / "report.md").read_text().strip()
    assert list((output / "logs").glob("plugins/profile/*/*.xplane.pb"))
    assert elapsed < 120, f"the demo took {elapsed:.0f} s"
