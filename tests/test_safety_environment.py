"""Long names, broken environments and odd arguments: one line and exit 2 or 3, never a crash."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, fixture_file, run_traceparse
from helpers.space import SpaceBuilder, alloc

import traceparse
from traceparse.cli import app as cli
from traceparse.output import cells
from traceparse.output.cells import render_plain_table


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["--quiet", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("traceparse"), err
    assert "internal error" not in err and "Traceback" not in err, err


# -- 7. one long name --------------------------------------------------------------------

MAX_CELL_WIDTH = getattr(
    cells, "MAX_CELL_WIDTH", 120
)  # (so a version without it fails, not errors)
LONG = "scope/" + "x" * 100_000 + "/MatMul"


def long_name_capture(directory: Path, count: int = 3000) -> Path:
    b = SpaceBuilder()
    line = b.line()
    for i in range(count):
        op = LONG if i == 0 else f"op{i % 7}/Add"
        alloc(b, line, 100 + i, addr=i + 1, size=256, total=256 * (i + 1), tf_op=op)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "h.xplane.pb"
    path.write_bytes(b.space.SerializeToString())
    return path


def test_a_long_name_does_not_widen_every_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = long_name_capture(tmp_path)
    code, out, err = _run(["allocations", str(capture), "--top", "0"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) > 3000
    assert max(len(line) for line in lines) < 2 * MAX_CELL_WIDTH + 200
    assert len(out) < 3000 * (MAX_CELL_WIDTH + 200)
    assert "…" in out
    # Files for programs keep the whole name.
    code, out, err = _run(["allocations", str(capture), "--top", "0", "--format", "csv"], capsys)
    assert code == 0, err
    assert LONG in {row["op"] for row in csv.DictReader(io.StringIO(out))}


def test_plain_tables_cap_cells() -> None:
    rows = [["a" * 50_000, "1"], ["b", "2"]]
    lines = render_plain_table(["name", "n"], rows, [False, True])
    assert all(len(line) <= MAX_CELL_WIDTH + 10 for line in lines)
    assert lines[2].startswith("a" * 10) and "…" in lines[2]


# -- 8. environment failures ------------------------------------------------------------


def test_stdout_on_a_full_disk_is_one_line_exit_2() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "traceparse", "summary", str(fixture_file("leak"))],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            timeout=120,
        )
    assert done.returncode == 2, done.stderr
    _one_error_line(done.stderr)
    assert "No space left on device" in done.stderr


def test_a_full_disk_while_batch_writes_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = fixture_file("leak").parents[3]
    from traceparse.batching import summary

    def full(path: object, data: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(summary, "atomic_write", full)
    code, _, err = _run(["batch", str(logs), "-o", str(tmp_path / "out"), "-j", "0"], capsys)
    assert code == 2, err
    _one_error_line(err)
    assert "No space left on device" in err


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: {**r, "rows": "garbage"},
        lambda r: {**r, "rows": [{"peak_bytes": "lots"}]},
        lambda r: {**r, "rows": [[1, 2]]},
        lambda r: {**r, "status": "maybe"},
        lambda r: {**r, "message": {"a": 1}},
    ],
)
def test_a_damaged_result_is_redone(tmp_path: Path, damage: object) -> None:
    logs = fixture_file("leak").parents[3]
    out = tmp_path / "out"
    first = traceparse.batch(logs, out, jobs=0)
    assert first.ok == 1
    (result,) = out.glob("captures/*/result.json")
    record = json.loads(result.read_text())
    result.write_text(json.dumps(damage(record)))  # type: ignore[operator]
    again = traceparse.batch(logs, out, jobs=0)
    assert again.ok == 1 and again.analysed == 1
    assert json.loads(result.read_text()) == {**record, **{"rows": record["rows"]}}


def test_repeated_columns_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["ops", str(fixture_file("leak")), "--columns", "op,op"], capsys)
    assert code == 2, err
    _one_error_line(err)
    assert "op" in err


def test_a_scheduler_that_is_no_address_fails_at_once(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    start = time.monotonic()
    done = run_traceparse(
        "batch", str(fixture_file("leak")), "-o", str(tmp_path / "o"), "--scheduler", "not a url"
    )
    assert time.monotonic() - start < 30
    assert done.returncode == 2, done.stderr
    _one_error_line(done.stderr)


# -- 10. small ones ------------------------------------------------------------------------


def test_an_extension_that_contradicts_the_format_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ["report", "-o", str(tmp_path / "x.pdf")],
        ["report", "--format", "md", "-o", str(tmp_path / "x.html")],
        ["ops", "--format", "csv", "-o", str(tmp_path / "x.json")],
    ):
        command, *rest = argv
        code, _, err = _run([command, str(fixture_file("leak")), *rest], capsys)
        assert code == 2, (argv, err)
        _one_error_line(err)
    assert list(tmp_path.iterdir()) == []


def test_a_run_folder_without_permission_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to take the permission away from another user")
    # root reads any folder; drop to nobody in a child process to check it. The
    # command runs once as root first (on a readable capture, output dropped) so
    # every module it imports, lazily included, is loaded: nobody may not read the
    # interpreter under /root, nor a checkout in a 0700 folder (mktemp -d).
    code = (
        "import contextlib, io, os, sys\n"
        "from traceparse.cli import app\n"
        "with contextlib.redirect_stdout(io.StringIO()), "
        "contextlib.redirect_stderr(io.StringIO()):\n"
        "    app.main(['summary', sys.argv[2]])\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "sys.exit(app.main(['summary', sys.argv[1]]))\n"
    )
    base = Path(tempfile.mkdtemp(prefix="traceparse-perm-"))  # pytest's tmp is 0700
    os.chmod(base, 0o755)
    logs = base / "logs"
    run = logs / "plugins" / "profile" / "r1"
    run.mkdir(parents=True)
    (run / "h.xplane.pb").write_bytes(fixture_file("leak").read_bytes())
    for part in (logs, run.parent.parent, run.parent):
        os.chmod(part, 0o755)
    os.chmod(run, 0o700)
    done = subprocess.run(
        [sys.executable, "-c", code, str(logs), str(fixture_file("leak"))],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))},
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    _one_error_line(done.stderr)
    assert "ermission denied" in done.stderr and "no profiler capture" not in done.stderr
    assert str(run) in done.stderr
    shutil.rmtree(base)
