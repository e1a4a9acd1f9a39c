"""Running the traceparse command in a process of its own."""

from __future__ import annotations

import subprocess

from conftest import run_traceparse


def traceparse_cli(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m traceparse ARGS``, with time for a batch's worker processes."""
    return run_traceparse(*args, timeout=300, env=env)
