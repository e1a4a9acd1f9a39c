"""The report formats, in one registry: name, file suffixes, renderer.

Every place that offers, checks or writes a report reads this list: the
``report`` and ``batch`` commands, the batch runner's file names, the Keras
callback's ``report=`` path and the pytest plugin's option. Adding a format is
an entry here and its renderer module.

The table exports (``csv``, ``parquet``...) are ``output/export.py``'s; the
suffixes of both are in ``FILE_SUFFIXES``, what the command line reads an
output file's name with.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceparse.errors import UsageError
from traceparse.output.export import TABLE_SUFFIXES

if TYPE_CHECKING:  # the command line reads this list without loading pandas
    from traceparse.report.source import ProfileLike

__all__ = [
    "DEFAULT_TOP",
    "FILE_SUFFIXES",
    "NAMES",
    "REPORT_FORMATS",
    "ReportFormat",
    "format_of_path",
    "named",
    "suffix_words",
]

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


@dataclass(frozen=True)
class ReportFormat:
    """One report format: what it is called, the file names it takes, its renderer."""

    name: str  # as --format and report=... name it
    suffixes: tuple[str, ...]  # the first is the one traceparse names files with
    title: str
    render: Callable[..., str]  # (profiles, version, *, top) -> the report's text

    @property
    def suffix(self) -> str:
        return self.suffixes[0]


REPORT_FORMATS: tuple[ReportFormat, ...] = (
    ReportFormat("md", (".md", ".markdown"), "Markdown", render_markdown),
    ReportFormat("html", (".html", ".htm"), "HTML", render_html),
    ReportFormat("json", (".json",), "JSON", render_json),
)
NAMES: tuple[str, ...] = tuple(f.name for f in REPORT_FORMATS)
# Every output file suffix the command line knows -> the format it asks for.
FILE_SUFFIXES: dict[str, str] = {
    **TABLE_SUFFIXES,
    **{suffix: f.name for f in REPORT_FORMATS for suffix in f.suffixes},
}


def named(name: str) -> ReportFormat:
    """The format called ``name``; ``UsageError`` listing the others when none is."""
    for found in REPORT_FORMATS:
        if found.name == name:
            return found
    raise UsageError(f"unknown report format {name!r}: choose one of {', '.join(NAMES)}")


def format_of_path(path: str | os.PathLike[str]) -> ReportFormat | None:
    """The report format a file's name asks for (``memory.html``: html), or None."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    return next((f for f in REPORT_FORMATS if suffix in f.suffixes), None)


def suffix_words() -> str:
    """The formats' own suffixes in a sentence: ``.md, .html or .json``."""
    words = [f.suffix for f in REPORT_FORMATS]
    return ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else words[0]
