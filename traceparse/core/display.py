"""How a Profile shows itself in a notebook, through a renderer of a later stage.

core comes before report in the pipeline and imports nothing of it; the HTML
renderer lives in report (``traceparse.report.notebook``). The package face
(``traceparse/__init__.py``, which may import any stage) hands it over with
``use`` when ``traceparse`` is imported, which happens before any ``Profile``
exists, so ``import traceparse`` stays cheap and the stages stay in order.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

__all__ = ["profile_html", "use"]

Renderer = Callable[[Any, int], str]
_renderer: list[Renderer] = []


def use(renderer: Renderer) -> None:
    """Make ``renderer(profile, top)`` the HTML of a Profile in a notebook."""
    _renderer[:] = [renderer]


def profile_html(profile: Any, top: int) -> str:
    """``profile``'s summary as an HTML fragment (no scripts)."""
    if not _renderer:  # only when the package face was bypassed
        return f"<pre>{html.escape(repr(profile))}</pre>"
    return str(_renderer[0](profile, top))
