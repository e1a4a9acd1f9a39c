"""Terminal rendering (rich and plain), progress, and the command registry, in process."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from traceparse.cli._table import pick_columns, sort_rows
from traceparse.cli.app import build_parser
from traceparse.cli.base import Command
from traceparse.cli.commands import COMMANDS
from traceparse.errors import UsageError
from traceparse.output.cells import column_kind, render_plain_table
from traceparse.output.terminal import Progress, Terminal

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "op": pd.Categorical(["model/dense/MatMul", "model/conv/Conv2D", "Fill"]),
            "allocated_bytes": pd.array([4 * 2**20, 16 * 2**20, None], dtype="Int64"),
            "lifetime_ps": pd.array([1_500_000_000, None, 20], dtype="Int64"),
            "alloc_ps": [0, 10, 20],
            "fragmentation": [0.125, 0.0, None],
            "step": pd.array([0, 1, None], dtype="Int64"),
        }
    )


def test_column_kinds() -> None:
    assert column_kind("allocated_bytes") == "bytes"
    assert column_kind("growth_bytes") == "signed_bytes"
    assert column_kind("lifetime_ps") == "duration"
    assert column_kind("alloc_ps") == "time"
    assert column_kind("fragmentation") == "percent"
    assert column_kind("count") == "count"
    assert column_kind("op") == "text"
    assert column_kind("step", "Int64") == "number"


def test_plain_table_uses_human_units(frame: pd.DataFrame) -> None:
    out = io.StringIO()
    Terminal(stream=out).table(frame, title="Allocations", footer="… 1 more rows")
    lines = out.getvalue().splitlines()
    assert lines[0] == "Allocations"
    assert lines[1].split() == [
        "op",
        "allocated_bytes",
        "lifetime_ps",
        "alloc_ps",
        "fragmentation",
        "step",
    ]
    assert set(lines[2]) <= {"-", " "}
    expected = ["model/dense/MatMul", "4", "MiB", "1.50", "ms", "0", "ps", "12.5%", "0"]
    assert lines[3].split() == expected
    assert lines[5].split()[:2] == ["Fill", "-"]
    assert lines[-1] == "… 1 more rows"
    assert "\x1b[" not in out.getvalue()


def test_plain_table_fits_a_width_by_shortening_text() -> None:
    headers = ["op", "bytes"]
    rows = [["a/very/long/scope/name/that/goes/on/and/on/MatMul", "4 MiB"]]
    lines = render_plain_table(headers, rows, [False, True], width=30)
    assert all(len(line) <= 30 for line in lines)
    assert "…" in lines[2] and lines[2].split()[0].endswith("MatMul")


def test_rich_table_without_colour_has_no_escapes(frame: pd.DataFrame) -> None:
    pytest.importorskip("rich")
    out = io.StringIO()
    term = Terminal(stream=out, color=False, use_rich=True, width=80)
    term.heading("capture")
    term.fields([("Peak", "16 MiB")])
    term.table(frame, title="Allocations")
    text = out.getvalue()
    assert "\x1b[" not in text
    assert "16 MiB" in text and "Fill" in text and "12.5%" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_rich_is_not_used_off_a_terminal() -> None:
    assert Terminal(stream=io.StringIO()).use_rich is False


def test_no_color_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert Terminal(stream=io.StringIO()).color is False


def test_quiet_drops_notes_not_warnings() -> None:
    err = io.StringIO()
    term = Terminal(stream=io.StringIO(), err=err, quiet=True)
    term.note("hint")
    term.warn("careful")
    assert err.getvalue() == "traceparse: warning: careful\n"


def test_progress_stays_hidden_for_short_work() -> None:
    err = io.StringIO()
    bar = Progress("Reading", 2, err, enabled=True, delay_s=0.2)
    bar.begin()
    bar.advance()
    bar.end()
    time.sleep(0.3)
    assert err.getvalue() == ""


def test_progress_shows_for_long_work_and_clears(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("traceparse.output.terminal.rich_available", lambda: False)
    err = io.StringIO()
    bar = Progress("Reading", 2, err, enabled=True, delay_s=0.05)
    bar.begin()
    time.sleep(0.2)
    bar.advance()
    bar.end()
    text = err.getvalue()
    assert "Reading… 1/2" in text
    assert text.endswith("\r\x1b[K")


class _Tty(io.StringIO):
    """A stderr that says it is a terminal (where a progress display would go)."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_asks_for_no_progress_however_slow_the_work(
    monkeypatch: pytest.MonkeyPatch, quiet: bool
) -> None:
    """Issue 36: on a busy machine a read outlasts the delay; ``--quiet`` (what a test
    of the output asks for) still shows nothing on a terminal's stderr."""
    monkeypatch.setattr("traceparse.output.terminal.rich_available", lambda: False)
    monkeypatch.setitem(Progress.__init__.__kwdefaults__, "delay_s", 0.0)  # slow at once
    err = _Tty()
    term = Terminal(stream=io.StringIO(), err=err, quiet=quiet)
    with term.progress("Reading", total=1) as bar:
        deadline = time.monotonic() + 30
        while not quiet and not err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        bar.advance()
    assert ("Reading" in err.getvalue()) is not quiet


# -- sorting and column picking -----------------------------------------------


def test_sort_quantities_largest_first_and_text_ascending(frame: pd.DataFrame) -> None:
    by_bytes = sort_rows(frame, "allocated_bytes")
    assert by_bytes["op"].tolist() == ["model/conv/Conv2D", "model/dense/MatMul", "Fill"]
    by_op = sort_rows(frame, "op")
    assert by_op["op"].tolist() == ["Fill", "model/conv/Conv2D", "model/dense/MatMul"]
    assert sort_rows(frame, "op", reverse=True)["op"].tolist()[0] == "model/dense/MatMul"
    by_time = sort_rows(frame, "alloc_ps")
    assert by_time["alloc_ps"].tolist() == [0, 10, 20]


def test_sort_and_columns_reject_unknown_names(frame: pd.DataFrame) -> None:
    with pytest.raises(UsageError, match="allocated_bytes"):
        sort_rows(frame, "size")
    with pytest.raises(UsageError, match="nope"):
        pick_columns(frame, "op,nope")
    assert pick_columns(frame, " op , step ") == ["op", "step"]


# -- the registry ----------------------------------------------------------------


def test_every_command_is_documented_and_registered() -> None:
    parser = build_parser()
    for name, command in COMMANDS.items():
        assert issubclass(command, Command)
        assert command.name == name
        assert command.summary_line(), f"{name} has no docstring"
        sub = parser.parse_args(_minimal_args(name))
        assert isinstance(sub.command_object, command)


def _minimal_args(name: str) -> list[str]:
    if name == "run":
        return ["run", "script.py"]
    if name == "demo":
        return ["demo"]
    if name == "batch":
        return ["batch", "some/path", "-o", "out"]
    if name == "baseline":
        return ["baseline", "some/path", "-o", "baseline.json"]
    if name == "diff":
        return ["diff", "a/path", "b/path"]
    if name == "predict":
        return ["predict", "some/path", "--batch", "64"]
    return [name, "some/path"]


def test_common_options_work_before_and_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--quiet", "ops", "x"])
    after = parser.parse_args(["ops", "x", "--quiet", "--no-color"])
    assert before.quiet and not before.no_color
    assert after.quiet and after.no_color


def test_adding_a_command_is_one_class(monkeypatch: pytest.MonkeyPatch) -> None:
    class HelloCommand(Command):
        """Say hello.

        A command made in a test.
        """

        name = "hello"

        def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
            parser.add_argument("who")

        def run(self, args: argparse.Namespace, term: Terminal) -> int:
            term.line(f"hello {args.who}")
            return 0

    monkeypatch.setitem(COMMANDS, "hello", HelloCommand)
    from traceparse.cli.app import main

    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["hello", "world"]) == 0
    assert out.getvalue() == "hello world\n"


def test_plain_output_without_rich_installed() -> None:
    # rich is an optional extra: block its import and render a table anyway.
    code = textwrap.dedent(
        """
        import sys
        sys.modules["rich"] = None
        from traceparse.cli.app import main
        sys.exit(main(["allocations", "fixtures/keras_train", "--top", "3"]))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert "allocated_bytes" in result.stdout


def test_a_fitted_table_keeps_the_layer_of_a_wrapped_name() -> None:
    # Issue 52: at 80 columns `ops` showed sequential_1_1/…/MaxPool2d.
    name = "StatefulPartitionedCall/sequential_1_1/max_pooling2d_1/MaxPool2d"
    frame = pd.DataFrame(
        {
            "op": pd.Categorical([name, "adam/Mul_19"]),
            "op_type": pd.Categorical(["MaxPool", "Mul"]),
            "count": pd.array([3, 1], dtype="Int64"),
            "allocated_bytes": pd.array([96 * 2**20, 2**20], dtype="Int64"),
            "padding_bytes": pd.array([0, 0], dtype="Int64"),
            "largest_bytes": pd.array([32 * 2**20, 2**20], dtype="Int64"),
            "live_at_peak_bytes": pd.array([32 * 2**20, 0], dtype="Int64"),
            "live_at_end_bytes": pd.array([0, 0], dtype="Int64"),
        }
    )
    out = io.StringIO()
    Terminal(stream=out, width=80).table(frame, key="op")
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    row = next(line for line in text.splitlines() if "MaxPool2d" in line)
    assert row.split()[0] in ("…/max_pooling2d_1/MaxPool2d", "…/" + name.split("/", 1)[1]), text
