"""``traceparse batch`` with real worker processes: the command, crashes, interruption, URLs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO
from helpers.batch import GOOD, capture_files, make_tree, summary_bytes
from helpers.cli import traceparse_cli
from helpers.procs import _wait_for_a_result, many_captures

import traceparse


def run_script(script: Path, *args: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a Python script with path arguments from the repository root."""
    return subprocess.run(
        [sys.executable, str(script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


# -- the command ----------------------------------------------------------------------


def test_command_on_a_mixed_tree_exits_3_and_resumes(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", [*GOOD, "corrupt", "no_memory"])
    out = tmp_path / "out"
    first = traceparse_cli("batch", str(tree), "-o", str(out), "-j", "2")
    assert first.returncode == 3, first.stderr
    assert first.stdout.splitlines()[0] == (
        "7 captures: 5 ok, 1 without memory events, 1 failed "
        "(7 analysed now, 0 unchanged and reused)"
    )
    corrupt = capture_files(tree / "corrupt")[0]
    assert f"traceparse: warning: {corrupt}: not a readable XSpace" in first.stderr
    assert "Traceback" not in first.stderr
    before = summary_bytes(out)

    again = traceparse_cli("batch", str(tree), "-o", str(out), "-j", "2")
    assert again.returncode == 3
    assert "(0 analysed now, 7 unchanged and reused)" in again.stdout
    assert summary_bytes(out) == before


def test_command_exits_0_when_all_succeed_and_writes_only_what_is_asked(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak", "no_memory"])
    out = tmp_path / "out"
    result = traceparse_cli("batch", str(tree), "-o", str(out), "--reports", "none", "-j", "1")
    assert result.returncode == 0, result.stderr
    assert "2 captures: 1 ok, 1 without memory events, 0 failed" in result.stdout
    assert sorted(p.name for p in out.rglob("report.*")) == []
    assert len(list(out.rglob("result.json"))) == 2


@pytest.mark.parametrize(
    "args",
    [
        ("batch", "x", "-o", "out", "--reports", "pdf"),
        ("batch", "x"),
        ("batch", "x", "-o", "out", "-j", "-1"),
    ],
)
def test_command_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    result = traceparse_cli(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1


# -- crashes and interruptions ---------------------------------------------------------

_CRASHING_SCRIPT = """
import json, os, sys
from traceparse.batching import tasks

# Runs again in every spawned worker (as __mp_main__): a capture whose path
# says "crash" kills the worker process outright, as the OOM killer would.
_original = tasks._analyse

def _analyse(task):
    if "crash" in task.capture.path:
        os._exit(9)
    return _original(task)

tasks._analyse = _analyse

if __name__ == "__main__":
    import traceparse
    result = traceparse.batch(sys.argv[1], sys.argv[2], jobs=2, reports=())
    print(json.dumps({"failed": result.failed, "ok": result.ok, "exit": result.exit_code}))
"""


def test_a_capture_that_kills_its_worker_is_one_error_row(tmp_path: Path) -> None:
    tree = many_captures(tmp_path / "logs", 6)
    crash = tree / "crash" / "plugins" / "profile" / "2026_01_01_00_00_00"
    crash.mkdir(parents=True)
    shutil.copy2(capture_files(FIXTURES / "leak")[0], crash / "localhost.xplane.pb")
    script = tmp_path / "crashing.py"
    script.write_text(_CRASHING_SCRIPT)
    done = run_script(script, tree, tmp_path / "out", timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] == 6 and result["exit"] == 3
    [(path, reason)] = result["failed"]
    assert path == str(crash / "localhost.xplane.pb")
    assert reason.startswith("the worker process died while analysing it")


def test_an_unguarded_script_fails_fast_and_says_why(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak", "eager_ops"])
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys, traceparse\ntraceparse.batch(sys.argv[1], sys.argv[2], jobs=2)\n"
    )
    start = time.monotonic()
    done = run_script(script, tree, tmp_path / "out", timeout=120)
    assert done.returncode == 1
    assert time.monotonic() - start < 60
    assert 'under `if __name__ == "__main__":`' in done.stderr.strip().splitlines()[-1]
    assert "exited while starting" in done.stderr.strip().splitlines()[-1]


def _start_batch(tree: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "traceparse", "batch", str(tree), "-o", str(out), "-j", "2"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _assert_whole(out: Path) -> None:
    """Every file there is complete (the lock file and temporaries aside)."""
    for path in out.rglob("*.json"):
        json.loads(path.read_text())
    for path in out.rglob("report.html"):
        assert path.read_text().rstrip().endswith("</html>")


def test_a_killed_batch_leaves_whole_files_and_resumes(tmp_path: Path) -> None:
    tree = many_captures(tmp_path / "logs", 10)
    out = tmp_path / "out"
    process = _start_batch(tree, out)
    _wait_for_a_result(out, process)
    os.killpg(process.pid, signal.SIGKILL)  # the parent and its workers, mid-write
    process.wait()
    _assert_whole(out)
    if (out / "summary.csv").exists():  # only if it had finished after all
        assert (out / "summary.csv").read_text().count("\n") == 11

    resumed = traceparse.batch(tree, out, jobs=2)
    assert resumed.reused >= 1 and resumed.analysed + resumed.reused == 10
    assert not list(out.rglob("*.tmp"))
    fresh = traceparse.batch(tree, tmp_path / "fresh", jobs=0)
    assert summary_bytes(out) == summary_bytes(tmp_path / "fresh")
    assert fresh.analysed == 10


def test_ctrl_c_stops_the_batch_and_its_workers(tmp_path: Path) -> None:
    tree = many_captures(tmp_path / "logs", 10)
    out = tmp_path / "out"
    process = _start_batch(tree, out)
    _wait_for_a_result(out, process)
    os.killpg(process.pid, signal.SIGINT)  # as a terminal does: to the whole group
    _, stderr = process.communicate(timeout=60)
    if process.returncode == 130:
        assert stderr.strip().endswith("traceparse: interrupted")
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
        assert not (out / "summary.csv").exists()
    else:  # it had finished before the signal arrived
        assert process.returncode == 0, stderr
    _assert_whole(out)
    resumed = traceparse.batch(tree, out, jobs=0, reports=("md", "html", "json"))
    assert resumed.ok == 10


def test_sigterm_stops_the_workers_too(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    tree = many_captures(tmp_path / "logs", 10)
    out = tmp_path / "out"
    process = _start_batch(tree, out)
    _wait_for_a_result(out, process)
    children = psutil.Process(process.pid).children(recursive=True)
    workers = [c for c in children if "spawn_main" in " ".join(c.cmdline())]
    assert workers
    process.terminate()  # SIGTERM to the parent alone, as `timeout` or a CI runner sends it
    _, stderr = process.communicate(timeout=60)
    if process.returncode == 0:  # it had finished before the signal arrived
        return
    assert process.returncode == 130, stderr
    assert stderr.strip().endswith("traceparse: interrupted")
    alive = [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    assert alive == []
    _assert_whole(out)


# -- URLs ---------------------------------------------------------------------------------


def test_memory_and_file_urls(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for name in ("leak", "corrupt", "no_memory"):
        source = capture_files(FIXTURES / name)[0]
        fs.pipe(
            f"/batch-test/{name}/plugins/profile/2026_01_01_00_00_00/host1.xplane.pb",
            source.read_bytes(),
        )
    try:
        out = tmp_path / "out"
        # memory:// exists only in this process: those captures are analysed here.
        result = traceparse.batch("memory://batch-test", out, jobs=2, reports=["md"])
        assert result.exit_code == 3
        statuses = {
            path.split("/batch-test/")[1].split("/")[0]: status
            for path, status in zip(result.table["path"], result.table["status"], strict=True)
        }
        assert statuses == {"corrupt": "error", "leak": "ok", "no_memory": "empty"}
        assert all(path.startswith("memory://") for path in result.table["path"])
        again = traceparse.batch("memory://batch-test", out, jobs=2, reports=["md"])
        assert (again.analysed, again.reused) == (0, 3)
    finally:
        fs.rm("/batch-test", recursive=True)

    tree = make_tree(tmp_path / "logs", ["leak"])
    result = traceparse.batch(f"file://{tree}", tmp_path / "out2", jobs=0, reports=())
    assert list(result.table["path"]) == [str(capture_files(tree)[0])]
