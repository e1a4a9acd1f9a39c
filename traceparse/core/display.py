"""How a Profile shows itself in a notebook, through a renderer of a later stage.

core comes before report in the pipeline and imports nothing of it; the HTML
renderer lives in report (``traceparse.report.notebook``). Like pandas'
plotting backend, the renderer is named here and found when a notebook first
asks for it, so ``import traceparse`` stays cheap and the stages stay in order.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["HTML_RENDERER", "profile_html"]

# The module with ``profile_html(profile, top)``.
HTML_RENDERER = "traceparse.report.notebook"


def _renderer() -> Any:
    return importlib.import_module(HTML_RENDERER)


def profile_html(profile: Any, top: int) -> str:
    """``profile``'s summary as an HTML fragment (no scripts)."""
    return str(_renderer().profile_html(profile, top))
