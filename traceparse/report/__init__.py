"""Reports over profiles: Markdown (CI job summaries), self-contained HTML, JSON.

>>> profiles = traceparse.load_all("logs/")  # doctest: +SKIP
>>> from traceparse.report import write_report
>>> write_report(profiles, "html", "memory.html")  # doctest: +SKIP

Reporters take already-built ``Profile`` objects and render; they never open a
capture. Each report has a section per run, host and allocator.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Literal, get_args

from traceparse.report.source import ProfileLike

__all__ = ["FORMATS", "Format", "render_html", "render_json", "render_markdown", "write_report"]

Format = Literal["md", "html", "json"]
FORMATS: tuple[str, ...] = get_args(Format)


# Rows per table in Markdown and HTML unless told (0: every row).
DEFAULT_TOP = 20


def render_markdown(
    profiles: Sequence[ProfileLike], version: str | None = None, *, top: int = DEFAULT_TOP
) -> str:
    """Markdown for a GitHub job summary: headline first, then tables and diagnostics;
    ``top`` rows per table (0: all), the rest counted."""
    from traceparse.report.markdown import render_markdown as render

    return render(profiles, version, top=top)


def render_html(
    profiles: Sequence[ProfileLike], version: str | None = None, *, top: int = DEFAULT_TOP
) -> str:
    """One self-contained HTML page (inline CSS and SVG, one script of its own that
    the page's policy allows by hash, no network); ``top`` rows per table (0: all)."""
    from traceparse.report.html import render_html as render

    return render(profiles, version, top=top)


def render_json(
    profiles: Sequence[ProfileLike], version: str | None = None, *, top: int = 0
) -> str:
    """JSON with a ``schema_version``, the summaries and the tables as records: every
    row, whatever ``top`` says."""
    from traceparse.report.jsonreport import render_json as render

    return render(profiles, version)


_RENDERERS: dict[str, Callable[..., str]] = {
    "md": render_markdown,
    "html": render_html,
    "json": render_json,
}


def write_report(
    profiles: Sequence[ProfileLike],
    fmt: Format,
    path: str | os.PathLike[str] | None = None,
    *,
    top: int = DEFAULT_TOP,
) -> str:
    """Render ``profiles`` as ``fmt`` ("md", "html" or "json"); write it to ``path``
    atomically when given. Markdown and HTML show ``top`` rows per table (0: all).
    Returns the text either way."""
    try:
        render = _RENDERERS[fmt]
    except KeyError:
        from traceparse.errors import UsageError

        raise UsageError(
            f"unknown report format {fmt!r}: choose one of {', '.join(FORMATS)}"
        ) from None
    text = render(list(profiles), None, top=top)
    if path is not None:
        from traceparse.files.atomic import atomic_write

        atomic_write(path, text)
    return text
