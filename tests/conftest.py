"""Shared paths and helpers for the tests. Real captures live in fixtures/."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


class LazyModule:
    """A module imported on first use, inside a test: collecting the tests never
    imports TensorFlow, xprof or dask (``pytest --collect-only`` stays fast), and
    a test that uses a missing one is skipped, as ``pytest.importorskip`` does."""

    def __init__(self, name: str, reason: str | None = None) -> None:
        self._name = name
        self._reason = reason
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):  # pytest looks for fixture markers when collecting
            raise AttributeError(attribute)
        if self._module is None:
            self._module = pytest.importorskip(self._name, reason=self._reason)
        return getattr(self._module, attribute)


def needs(package: str) -> pytest.MarkDecorator:
    """Skip unless ``package`` is installed; finding it does not import it."""
    missing = importlib.util.find_spec(package) is None
    return pytest.mark.skipif(missing, reason=f"needs {package}")


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


# Readable captures that hold no memory events: tensors under the oneDNN pool's
# 256 KiB, and JAX on CPU (no BFC allocator; its compiled program is the record).
NO_MEMORY_FIXTURES = ("no_memory", "jax_optax_cpu")


def memory_fixtures() -> list[str]:
    """The fixtures holding a capture with memory events (xplane or the older
    memory_profile JSON), by name, sorted: every one but the unreadable and the
    empty."""
    names = []
    for directory in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        files = [*directory.rglob("*.xplane.pb"), *directory.rglob("*.memory_profile.json*")]
        if files and directory.name not in ("corrupt", "not_a_capture", *NO_MEMORY_FIXTURES):
            names.append(directory.name)
    return names


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


# Modules whose tests start TensorFlow, worker processes or a browser: seconds to
# minutes each. `make quick` (pytest -m "not slow") leaves them out; `make test`
# (CI) runs everything.
SLOW_MODULES = {
    "test_batch_dask",
    "test_batch_processes",
    "test_capture",
    "test_hostile_fuzz",
    "test_keras_callback",
    "test_pytest_plugin",
    "test_report_browser",
    "test_report_interact",
    "test_safety_orphans",
    "test_safety_run",
    "test_sources_capture",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
