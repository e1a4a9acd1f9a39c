"""What every hostile input must survive: load, every analysis, every renderer.

``exercise`` raises whatever escapes; the callers decide that anything but a
``TraceparseError`` naming the file is a failure. Besides not crashing, the
outputs must be safe: the HTML has no element or attribute that runs code, and
no CSV cell can be read as a formula.
"""

from __future__ import annotations

import csv
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import traceparse
from traceparse.output.export import to_csv
from traceparse.report import render_html, render_json, render_markdown
from traceparse.report.interact import SCRIPT

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?(e[+-]?\d+)?$")


class UnsafeOutput(AssertionError):
    """An output that could be turned against its reader."""


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.bad: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        refresh = tag == "meta" and values.get("http-equiv", "").lower() == "refresh"
        if tag in ("script", "iframe", "object", "embed", "img", "link", "base") or refresh:
            self.bad.append(f"<{tag}>")
        for name, value in values.items():
            if name.startswith("on"):
                self.bad.append(f"{tag} {name}=")
            if name in ("href", "src", "xlink:href") and not value.startswith(("#", "data:")):
                self.bad.append(f"{tag} {name}={value}")


def check_html(text: str) -> None:
    # The report's own table script (sortable, filterable tables) is allowed, once,
    # exactly as written: any other script is content that escaped.
    page = _Elements()
    page.feed(text.replace(f"<script>{SCRIPT}</script>", "", 1))
    if page.bad:
        raise UnsafeOutput(f"the HTML report holds {page.bad[:5]}")


def check_csv(text: str) -> None:
    for row in csv.reader(io.StringIO(text, newline="")):
        for cell in row:
            if cell.startswith(_FORMULA_START) and not _NUMBER.match(cell):
                raise UnsafeOutput(f"a CSV cell a spreadsheet would run: {cell[:60]!r}")


def exercise(path: Path, *, html: bool = True) -> str:
    """Load ``path``, run the analyses, renderers and CSV exports over it, and check
    that the outputs are safe.

    Returns "ok" or the name of the ``TraceparseError`` subclass raised; any
    other exception propagates. A ``TraceparseError`` must name the file.
    """
    try:
        profile = traceparse.load(path)
        profile.summary()
        profile.steps  # noqa: B018 - each property builds one analysis
        profile.attribution  # noqa: B018
        profile.scopes(2)
        check_csv(to_csv(profile.ops))
        check_csv(to_csv(profile.allocations))
        render_markdown([profile])
        render_json([profile])
        if html:
            check_html(render_html([profile]))
    except traceparse.TraceparseError as exc:
        if str(path) not in str(exc):
            raise AssertionError(f"the error does not name the file: {exc}") from exc
        return type(exc).__name__
    return "ok"
