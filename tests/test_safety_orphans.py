"""Workers of a batch whose parent was killed stop at once, and write nothing more."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from helpers.procs import _wait_for_a_result, many_captures


def _snapshot(out: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``out``: (size, mtime) by path."""
    found: dict[str, tuple[int, int]] = {}
    for directory, names, files in os.walk(out):
        for name in [*names, *files]:
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue
            found[path] = (info.st_size, info.st_mtime_ns)
    return found


def _alive(pid: int) -> bool:
    psutil = pytest.importorskip("psutil")
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_kill_9_of_the_parent_stops_its_workers(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    tree = many_captures(tmp_path / "logs", 40)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "traceparse", "batch", str(tree), "-o", str(out), "-j", "2"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_a_result(out, process)  # type: ignore[arg-type]
        workers = [child.pid for child in psutil.Process(process.pid).children(recursive=True)]
        assert workers
        process.send_signal(signal.SIGKILL)  # the parent alone, as the OOM killer does
        process.wait()
        time.sleep(0.5)
        at_kill = _snapshot(out)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [pid for pid in workers if _alive(pid)] == []
        time.sleep(1)
        assert _snapshot(out) == at_kill
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def test_an_orphaned_worker_exits_before_writing() -> None:
    # The check every task makes before it writes (the portable fallback, without
    # the Linux death signal): a grandchild whose parent has exited stops there.
    code = (
        "import os, sys, time\n"
        "from traceparse.batching import orphans\n"
        "read, write = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.close(read)\n"
        "    middle = os.getpid()\n"  # not getppid() in the grandchild: see below
        "    if os.fork() == 0:\n"
        "        orphans.watch_parent(middle, poll_s=3600, death_signal=False)\n"
        "        time.sleep(1)\n"  # by now its parent has exited
        "        orphans.stop_if_orphaned()\n"
        "        os.write(write, b'wrote after its parent died')\n"
        "    os._exit(0)\n"
        "os.close(write)\n"
        "sys.stdout.write(os.read(read, 100).decode())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_the_watch_thread_ends_an_orphan_on_its_own() -> None:
    code = (
        "import os, sys, time\n"
        "from traceparse.batching import orphans\n"
        "read, write = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.close(read)\n"
        # The middle process's pid, taken before the fork: asked for in the
        # grandchild, getppid() may already name its new parent.
        "    middle = os.getpid()\n"
        "    if os.fork() == 0:\n"
        "        orphans.watch_parent(middle, poll_s=0.1, death_signal=False)\n"
        "        time.sleep(3)\n"  # the watch thread ends the process before this
        "        os.write(write, b'still running')\n"
        "    os._exit(0)\n"
        "os.close(write)\n"
        "sys.stdout.write(os.read(read, 100).decode())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_the_parent_death_signal_is_set_on_linux() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("prctl is Linux's")
    code = (
        "import ctypes, signal\n"
        "from traceparse.batching import orphans\n"
        "import os\n"
        "orphans.watch_parent(os.getppid())\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "value = ctypes.c_int()\n"
        "libc.prctl(2, ctypes.byref(value), 0, 0, 0)\n"  # PR_GET_PDEATHSIG
        "print(value.value == signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr
