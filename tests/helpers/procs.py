"""Many captures and waiting for a running batch's first result."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from conftest import FIXTURES

from helpers.batch import GOOD, capture_files


def many_captures(root: Path, count: int) -> Path:
    """``count`` captures: copies of the real fixtures, each its own logdir."""
    sources = [capture_files(FIXTURES / name)[0] for name in GOOD]
    for i in range(count):
        run = root / f"job{i:03d}" / "plugins" / "profile" / "2026_01_01_00_00_00"
        run.mkdir(parents=True)
        shutil.copy2(sources[i % len(sources)], run / "localhost.xplane.pb")
    return root


def _wait_for_a_result(out: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not list(out.glob("captures/*/result.json")):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
