"""The second breaker pass over the command line (issue 52): every command over
damaged run directories (``tests/fuzz/cli_cases.py``, the long run is
``run_fuzz.py --cli``), and each finding of that pass as a crafted case.

Each finding's input is built here from a real fixture; the command runs in this
process (``cli.app.main``) and must end in 0 or a refusal (2 to 5) in one line,
never an internal error (benchmarks/FUZZ_RESULTS.md lists the findings).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES
from fuzz.cli_cases import COMMANDS, make_cli_case
from fuzz.harness import exercise_cli
from helpers.space import SpaceBuilder, alloc, free

import traceparse
from traceparse.cli.app import main


def copy_run(fixture: str, root: Path) -> Path:
    """The fixture's run directory copied to ``root/<fixture>/plugins/profile/run``."""
    (found,) = {p.parent for p in (FIXTURES / fixture).rglob("*.xplane.pb")}
    run = root / fixture / "plugins" / "profile" / "run"
    shutil.copytree(found, run)
    return run


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``traceparse --no-color ARGV`` in this process."""
    code = main(["--no-color", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def no_internal_error(code: int, err: str) -> None:
    assert code in (0, 2, 3, 4, 5), err
    assert "internal error" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_survives_a_damaged_run_directory(command: str, tmp_path: Path) -> None:
    # One seeded case per command: the long run (run_fuzz.py --cli) draws thousands.
    rng = random.Random(f"in-suite:{command}")
    case = make_cli_case(rng, tmp_path, command)
    # exercise_cli raises on an internal error, a traceback, an unknown exit code
    # or unsafe output; a refusal in one line is an outcome like success.
    assert exercise_cli(case.argv, tmp_path).startswith(("ok", "exit", "error page"))


def test_a_lone_surrogate_in_the_variable_inventory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Finding 1: json.dumps writes a model named from a non-UTF-8 path as "\udcff";
    # pyarrow could not encode it and every command was an internal error.
    run = copy_run("keras_inventory", tmp_path)
    inventory = run / "localhost.variables.json"
    document = json.loads(inventory.read_text())
    first = document["variables"][0]
    first["model"], first["layer"], first["name"] = "\udcff", "l\udcfe", "v\udcfd:0"
    inventory.write_text(json.dumps(document))
    for command in ("summary", "layers", "peak"):
        code, _out, err = cli(capsys, command, str(run))
        no_internal_error(code, err)
        assert code == 0, err
    # The surrogate kept as its escape: the name stays readable.
    variables = traceparse.load(run).variables
    assert "\\udcff" in set(variables["model"]) and "v\\udcfd:0" in set(variables["name"])


@pytest.mark.parametrize("command", ["predict", "advise"])
def test_predict_says_when_the_batch_record_was_refused(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Finding 2: a batch record the reader refuses (here nested too deeply) made
    # predict and advise fall back to the shapes without a word: the refusal was
    # only in summary's diagnostics, not in the commands that use the record.
    run = copy_run("layers_cnn", tmp_path)
    record = run / "localhost.batch.json"
    record.write_bytes(
        b'{"format":"traceparse.batch","version":1,"x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    )
    argv = [command, str(run)] + (["--batch", "64"] if command == "predict" else [])
    code, _out, err = cli(capsys, *argv)
    no_internal_error(code, err)
    warned = [line for line in err.splitlines() if str(record) in line]
    assert len(warned) == 1 and "nested too deeply" in warned[0], err
    # Given --from-batch, the record is not used and not mentioned.
    code, _out, err = cli(capsys, *argv, "--from-batch", "32")
    assert code == 0 and str(record) not in err, err


# Bidi overrides and isolates, C1 controls, the Unicode line separators: what a
# terminal or an editor acts on instead of showing.
UNSAFE_IN_TEXT = re.compile("[\x80-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


@pytest.mark.parametrize("command", ["ops", "layers", "summary", "allocations", "oom"])
def test_json_on_stdout_escapes_what_a_terminal_would_obey(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Finding 3: `--format json` wrote op names as they were, so a name holding
    # U+202E reordered the line on the reader's terminal (tables escape it). JSON
    # spells such characters \uXXXX with the same meaning.
    name = "model/\u202edense\u2028x/\x85MatMul"
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 1_000, 0x10, 4096, 4096, tf_op=name, shape="[32,32]")
    free(b, line, 9_000, 0x10, 4096, 0)
    run = tmp_path / "logs" / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    (run / "h.xplane.pb").write_bytes(b.space.SerializeToString())
    code, out, err = cli(capsys, command, str(run), "--format", "json")
    assert code == 0, err
    assert not UNSAFE_IN_TEXT.search(out), repr(UNSAFE_IN_TEXT.search(out))
    assert name in json.dumps(json.loads(out), ensure_ascii=False)  # read back, the same


def test_a_fifo_given_as_the_capture_is_called_a_fifo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Finding 4: a FIFO (or a device) named on the command line was called "a
    # directory with no plugins/profile/ under it"; it is now read as the file it
    # was given as, and the reader refuses it without opening it (no hang).
    run = tmp_path / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    fifo = run / "h.xplane.pb"
    os.mkfifo(fifo)
    for path in (str(fifo), os.devnull):
        code, _out, err = cli(capsys, "summary", path)
        assert code == 3, err
        (line,) = err.splitlines()
        assert path in line and "not a regular file" in line and "directory" not in line, line


def events_without_an_allocator(path: Path) -> Path:
    """A capture whose allocator's events are joined by events naming no allocator
    (what a damaged capture holds): the latter's capacity is unknown (NA)."""
    b = SpaceBuilder()
    line = b.line()
    alloc(b, line, 1_000, 0x10, 4 * 4096, 4 * 4096, tf_op="dense/MatMul", shape="[4,1024]")
    free(b, line, 9_000, 0x10, 4 * 4096, 0)
    b.event(line, 1, 2_000, addr=0x20, requested_bytes=512, allocation_bytes=512)
    run = path / "logs" / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    (run / "h.xplane.pb").write_bytes(b.space.SerializeToString())
    return run


@pytest.mark.parametrize("command", ["advise", "predict"])
def test_an_allocator_of_unknown_capacity(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Finding 5: events naming no allocator have a capacity of NA; advise compared
    # it with itself (`cap == cap`, a NaN test) and raised "boolean value of NA is
    # ambiguous", an internal error.
    run = events_without_an_allocator(tmp_path)
    argv = [command, str(run), "--from-batch", "4"] + (
        ["--batch", "8"] if command == "predict" else []
    )
    code, _out, err = cli(capsys, *argv)
    no_internal_error(code, err)


def test_the_html_report_draws_a_bounded_number_of_allocators(tmp_path: Path) -> None:
    # Finding 6: a damaged capture naming 122 allocators took 18 s (over 30 s on
    # the loaded fuzz machine) in the HTML report and the dashboard: three
    # matplotlib charts per allocator. Past MAX_CHARTED_ALLOCATORS, the allocators
    # with the smaller peaks keep their tables and get a note instead.
    from traceparse.report import render_html
    from traceparse.report.html import MAX_CHARTED_ALLOCATORS

    count = MAX_CHARTED_ALLOCATORS + 8
    b = SpaceBuilder()
    line = b.line()
    for i in range(count):
        size = 4096 * (i + 1)
        b.event(
            line,
            1,
            1_000 + i,
            allocator_name=f"GPU_{i}_bfc",
            addr=0x10 + i,
            requested_bytes=size,
            allocation_bytes=size,
            bytes_allocated=size,
            bytes_reserved=0,
            bytes_available=10**9,
            tf_op="dense/MatMul",
            shape="[4,1024]",
        )
    page = render_html([b.decode()])
    drawn = page.count('id="timeline-')
    assert drawn == MAX_CHARTED_ALLOCATORS, drawn
    assert page.count("No charts for this allocator") == count - MAX_CHARTED_ALLOCATORS

    def section(name: str) -> str:
        return page.split(f"<code>{name}</code></h3>", 1)[1].split("</section>", 1)[0]

    # The largest peaks are the ones drawn.
    assert "No charts" in section("GPU_0_bfc")
    assert "No charts" not in section(f"GPU_{count - 1}_bfc")
