"""The memory settings of the commands that read captures (``cli/process.py``)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from traceparse.cli.commands import COMMANDS
from traceparse.cli.process import LIBRARY_ENVIRONMENT

FIXTURES = Path(__file__).parent.parent / "fixtures"
ON_GLIBC = sys.platform == "linux" and platform.libc_ver()[0] == "glibc"
SETTINGS = set(LIBRARY_ENVIRONMENT) | {"GLIBC_TUNABLES"}


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    done = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _settled(**env: str) -> dict[str, bool]:
    code = "from traceparse.cli.process import settle_for_captures as s; import json"
    return json.loads(_python(f"{code}; print(json.dumps(s()))", **env))


@pytest.mark.skipif(not ON_GLIBC, reason="mallopt is glibc's")
def test_settles_a_fresh_process() -> None:
    assert _settled() == {"malloc": True, "numpy_hugepages_off": True}


@pytest.mark.skipif(not ON_GLIBC, reason="mallopt is glibc's")
def test_the_pool_is_off_where_glibc_keeps_freed_memory() -> None:
    """Two caches of freed memory would each hold their own peak."""
    code = (
        "from traceparse.cli.process import settle_for_captures as s; "
        "from traceparse.core import memory; s(); print(memory.available())"
    )
    assert _python(code) == "False"
    assert LIBRARY_ENVIRONMENT["TRACEPARSE_NO_POOL"] == "1"


def test_leaves_the_users_own_settings() -> None:
    assert _settled(MALLOC_MMAP_THRESHOLD_="65536", NUMPY_MADVISE_HUGEPAGE="1") == {
        "malloc": False,
        "numpy_hugepages_off": False,
    }
    assert not _settled(GLIBC_TUNABLES="glibc.malloc.trim_threshold=1")["malloc"]


def test_numpy_imported_already_is_left_alone() -> None:
    code = (
        "import numpy, json; from traceparse.cli.process import settle_for_captures as s; "
        "print(json.dumps(s()['numpy_hugepages_off']))"
    )
    assert _python(code) == "false"


def test_summary_runs_without_huge_pages_and_run_keeps_the_defaults() -> None:
    """The analysing commands settle their process; those that run TensorFlow or
    the user's script (whose children inherit the environment) do not."""
    capture = FIXTURES / "keras_train"
    code = (
        "import contextlib, io, os; from traceparse.cli.app import main; "
        f"out = io.StringIO(); r = contextlib.redirect_stdout(out); r.__enter__(); "
        f"main(['summary', {str(capture)!r}]); r.__exit__(None, None, None); "
        "print(os.environ.get('NUMPY_MADVISE_HUGEPAGE'))"
    )
    assert _python(code) == "0"
    assert not COMMANDS["run"].reads_captures and not COMMANDS["demo"].reads_captures
    readers = [name for name, command in COMMANDS.items() if command.reads_captures]
    assert {"summary", "report", "batch", "check", "steps"} <= set(readers)


def test_readme_gives_the_same_environment() -> None:
    readme = " ".join((Path(__file__).parent.parent / "README.md").read_text().split())
    for name, value in LIBRARY_ENVIRONMENT.items():
        assert f"{name}={value}" in readme
