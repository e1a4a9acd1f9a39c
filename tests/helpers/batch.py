"""Trees of fixture captures for the batch tests, and what a batch leaves behind."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES

from traceparse.batching.summary import SUMMARY_FILES

GOOD = ["keras_train", "leak", "eager_ops", "two_runs"]


def make_tree(root: Path, names: list[str]) -> Path:
    """Copy fixture logdirs under ``root`` (contents and mtimes as they are)."""
    for name in names:
        shutil.copytree(FIXTURES / name, root / name)
    return root


def capture_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.xplane.pb"))


def summary_bytes(outdir: Path) -> dict[str, bytes]:
    return {name: (outdir / name).read_bytes() for name in SUMMARY_FILES}
