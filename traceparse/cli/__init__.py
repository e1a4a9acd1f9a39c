"""The ``traceparse`` command (``app``) and one module per subcommand.

``main`` and ``run`` load on first use, so that importing one subcommand's
module does not build the whole command.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name in ("main", "run"):
        from traceparse.cli import app

        return getattr(app, name)
    raise AttributeError(f"module 'traceparse.cli' has no attribute {name!r}")
