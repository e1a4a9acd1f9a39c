"""Shared paths and helpers for the tests. Real captures live in fixtures/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# TensorFlow turns oneDNN on only on some x86 CPUs (AVX-512 and newer); without
# it the CPU allocator is not the BFC allocator and records no memory events.
# The captures the tests make need those events whatever CPU runs them.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())

# Fixtures that are real, readable captures (not the broken ones).
GOOD_XPLANE_FIXTURES = [
    "keras_train",
    "eager_ops",
    "leak",
    "no_memory",
    "keras_callback",
    "two_runs",
    "keras_inventory",
    "keras_memory_callback",
]
MEMORY_FIXTURES = [
    "keras_train",
    "eager_ops",
    "leak",
    "keras_callback",
    "two_runs",
    "keras_inventory",
    "keras_memory_callback",
]


def run_traceparse(
    *args: str, cwd: Path = REPO, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m traceparse ARGS`` and capture its output (no colour)."""
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    environment.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "traceparse", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
    )


def xplane_files(name: str | None = None) -> list[Path]:
    """The .xplane.pb files of one fixture (or of every good fixture), sorted."""
    names = [name] if name else GOOD_XPLANE_FIXTURES
    files = sorted(f for n in names for f in (FIXTURES / n).rglob("*.xplane.pb"))
    assert files, f"no .xplane.pb fixture found for {names}"
    return files


def fixture_file(name: str) -> Path:
    """The single capture file of a fixture."""
    files = sorted(
        p for p in (FIXTURES / name).rglob("*") if p.is_file() and ".tfevents" not in p.name
    )
    assert len(files) == 1, files
    return files[0]


@pytest.fixture(params=[str(p.relative_to(FIXTURES)) for p in xplane_files()])
def xplane_fixture(request: pytest.FixtureRequest) -> Path:
    """Every real .xplane.pb fixture, one test per file."""
    return FIXTURES / request.param
