"""Escaping for text the capture controls: op names, scopes, shapes, paths, messages.

Any of these can be written by whoever built the model (``tf.name_scope("<script>")``),
so every renderer passes them through here. The rules target GitHub-flavoured
Markdown (cmark-gfm) and HTML5:

- ``md_code``: a name as a code span that no content can leave. The fence is
  longer than any backtick run inside; in a table cell pipes become ``\\|``,
  which GFM's table parser turns back into ``|`` before the inline parser sees
  the span (so the cell keeps its boundaries and the reader sees the name
  unchanged). Outside tables (``table=False``) nothing would undo the escape
  (code spans take no backslash escapes), so pipes stay as they are.
- ``md_text``: free text with every character Markdown could act on
  backslash-escaped, so it renders exactly as written.
- ``html_text``: ``html.escape`` with quotes, for element text and attributes.

Control characters (ESC, BEL, C1) and invisible format characters
(bidirectional overrides such as U+202E, zero-width spaces) are shown as
``\\xNN`` / ``\\uNNNN`` everywhere, as in the terminal (``output.cells.visible``):
a name cannot hide text, reorder it, or carry an escape sequence into a page
that is later printed to a terminal.
"""

from __future__ import annotations

import html
import re

from traceparse.output.cells import visible

__all__ = ["html_text", "md_code", "md_text", "one_line"]

# Tabs too: a font has no glyph for one (matplotlib warns), and a cell shows it as a space.
_LINE_BREAKS = re.compile(r"[\t\r\n\u2028\u2029\x0b\x0c\x85]+")
# Characters that start or end inline constructs anywhere in a line. An "_"
# between two ASCII letters or digits can neither open nor close emphasis, so
# names like dense_1 stay readable in the Markdown source.
_MD_INLINE = re.compile(r"([\\`*\[\]<>|~&!$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# Markers that only act at the start of a line and before a space (lists, headings).
_MD_LINE_START = re.compile(r"^(\s*)([#+\-=]+|\d+[.)])(?=\s|$)")
_BACKTICK_RUNS = re.compile(r"`+")


def one_line(text: object) -> str:
    """``str(text)`` on one line: line breaks and tabs become spaces; control and
    invisible characters (and undecodable bytes of a file name) show as escapes."""
    return visible(_LINE_BREAKS.sub(" ", str(text)), cell=True)


def md_text(text: object) -> str:
    """Free text for a Markdown paragraph, list item or table cell, shown verbatim."""
    escaped = _MD_INLINE.sub(r"\\\1", one_line(text).strip())
    return _MD_LINE_START.sub(_escape_marker, escaped)


def _escape_marker(match: re.Match[str]) -> str:
    space, marker = match.groups()
    if marker[0].isdigit():  # digits cannot be escaped; the "." or ")" can
        return f"{space}{marker[:-1]}\\{marker[-1]}"
    return f"{space}\\{marker}"


def md_code(text: object, *, table: bool = True) -> str:
    """A name as a Markdown code span, safe inside a table cell; ``table=False``
    for headings, list items and paragraphs."""
    content = one_line(text)
    if not content:
        return "-"
    longest = max((len(run) for run in _BACKTICK_RUNS.findall(content)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each end when both are present, and a
    # span that starts or ends with a backtick needs a space to separate it
    # from the fence: pad in those cases so the reader sees the name exactly.
    if (
        content.startswith("`")
        or content.endswith("`")
        or (content.startswith(" ") and content.endswith(" ") and content.strip(" "))
    ):
        content = f" {content} "
    return fence + (content.replace("|", "\\|") if table else content) + fence


def html_text(text: object) -> str:
    """Text for HTML element content or a quoted attribute value; control and
    invisible characters show as escapes (newlines and tabs stay)."""
    return html.escape(visible(str(text)), quote=True)
