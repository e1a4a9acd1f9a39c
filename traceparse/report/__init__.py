"""Reports over profiles: Markdown (CI job summaries), self-contained HTML, JSON.

>>> profiles = traceparse.load_all("logs/")  # doctest: +SKIP
>>> from traceparse.report import write_report
>>> write_report(profiles, "html", "memory.html")  # doctest: +SKIP

Reporters take already-built ``Profile`` objects and render; they never open a
capture. Each report has a section per run, host and allocator.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from traceparse.report.formats import (
    DEFAULT_TOP,
    NAMES,
    named,
    render_html,
    render_json,
    render_markdown,
)

if TYPE_CHECKING:  # the command line reads the formats without loading pandas
    from traceparse.report.source import ProfileLike

__all__ = ["FORMATS", "Format", "render_html", "render_json", "render_markdown", "write_report"]

# A report format's name (report.formats.REPORT_FORMATS lists them).
Format = str
FORMATS: tuple[str, ...] = NAMES


def write_report(
    profiles: Sequence[ProfileLike],
    fmt: Format,
    path: str | os.PathLike[str] | None = None,
    *,
    top: int = DEFAULT_TOP,
) -> str:
    """Render ``profiles`` as ``fmt`` (a name of ``report.formats.REPORT_FORMATS``:
    "md", "html" or "json"); write it to ``path`` atomically when given. Markdown and
    HTML show ``top`` rows per table (0: all). Returns the text either way."""
    text = named(fmt).render(list(profiles), None, top=top)
    if path is not None:
        from traceparse.files.atomic import atomic_write

        atomic_write(path, text)
    return text
