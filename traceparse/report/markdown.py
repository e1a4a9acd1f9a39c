"""The Markdown report: reads well as a GitHub Actions job summary.

Headline first (an overview row per allocator: peak, capacity, utilisation,
leak check), then per allocator its facts, the top tensors/ops/scopes, the
attribution and the steps, and diagnostics as a list. Names from the capture
are code spans and free text is escaped (``escape``), so no op or scope name
can leave its cell, open a link or inject HTML.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from traceparse.output.units import plural
from traceparse.report.escape import html_text, md_code, md_text
from traceparse.report.failure import markdown_failure
from traceparse.report.source import ProfileLike
from traceparse.report.view import (
    MAX_ROWS,
    AllocatorView,
    Cell,
    ProfileView,
    ReportView,
    TableView,
    build_view,
)
from traceparse.report.whatif import markdown_whatif

__all__ = ["md_sentence", "render_markdown", "render_markdown_view"]

# Cells we formatted ourselves ("1.5 MiB", "12.3 ms", "91.2%", "1,024", "-").
_SAFE_NUMBER = re.compile(r"^[-+]?[0-9][0-9,.]*(?: ?[a-zA-Zµ%]+)?$|^-$")
_LEVEL_MARK = {"ok": "✅", "warn": "⚠️", "unknown": "❔"}


def render_markdown(
    profiles: Sequence[ProfileLike], version: str | None = None, *, top: int = MAX_ROWS
) -> str:
    """The Markdown report over ``profiles``."""
    from traceparse.version import __version__

    return render_markdown_view(build_view(profiles, version or __version__, top=top))


def render_markdown_view(view: ReportView) -> str:
    out: list[str] = [f"# {md_text(view.title)}", ""]
    sections = sum(len(p.allocators) for p in view.profiles)
    out.append(
        f"{plural(len(view.profiles), 'run')}, {plural(sections, 'allocator')}"
        f" · traceparse {md_text(view.version)} · generated {md_text(view.generated_at)}"
    )
    out.append("")
    if view.profiles:
        out.extend(_overview(view))
    for profile in view.profiles:
        out.extend(_profile(profile))
    out.append(
        "<sub>Times are from the start of each capture. Bytes are binary units "
        "(1 MiB = 1,048,576 bytes).</sub>"
    )
    return "\n".join(out).rstrip("\n") + "\n"


def _cell(cell: Cell) -> str:
    if cell.kind in ("name", "ident"):
        return md_code(cell.text)
    return _plain(cell.text)


def _plain(text: str) -> str:
    """Text as written: our own numbers verbatim (cleaner source), the rest escaped."""
    return text if _SAFE_NUMBER.match(text) else md_text(text)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _overview(view: ReportView) -> list[str]:
    out = [
        _row(["Run", "Host", "Allocator", "Peak", "Capacity", "Utilisation", "Leak check"]),
        _row(["---", "---", "---", "--:", "--:", "--:", "---"]),
    ]
    for profile in view.profiles:
        if not profile.allocators:
            hosts = ", ".join(md_code(h) for h in profile.hosts)
            out.append(
                _row([md_code(profile.run), hosts, "-", "-", "-", "-", "❔ no memory events"])
            )
        for a in profile.allocators:
            facts = {f.label: f for f in a.facts}
            out.append(
                _row(
                    [
                        md_code(profile.run),
                        md_code(a.host),
                        f"[{md_code(a.allocator)}](#{a.anchor})",
                        f"**{_plain(facts['Peak in use'].value)}**",
                        _plain(facts["Capacity"].value),
                        _plain(a.utilisation),
                        f"{_LEVEL_MARK[a.verdict_level]} {md_text(a.verdict)}",
                    ]
                )
            )
    return [*out, ""]


def _profile(profile: ProfileView) -> list[str]:
    hosts = ", ".join(md_code(h, table=False) for h in profile.hosts)
    out = [f"## Run {md_code(profile.run, table=False)} on {hosts}", ""]
    for path in profile.paths:
        out.append(f"- Capture: {md_code(path, table=False)}")
    out.append("")
    # Issue 39: a capture that ended in failure says so first (empty otherwise).
    out.extend(markdown_failure(profile.profile))
    if not profile.allocators:
        out.append("**No memory to report:** this capture has no allocator events.")
        out.append("")
    if profile.diagnostics:
        out.append("**Diagnostics**")
        out.append("")
        out.extend(f"- {md_text(d)}" for d in profile.diagnostics)
        out.append("")
    for allocator in profile.allocators:
        out.extend(_allocator(allocator))
    # Issue 50: what would save memory, where the capture gives a batch size.
    out.extend(markdown_whatif(profile.profile))
    return out


def _allocator(a: AllocatorView) -> list[str]:
    # An explicit anchor: GitHub's generated heading ids are not predictable
    # for names with punctuation.
    out = [
        f'<a id="{a.anchor}"></a>',
        "",
        f"### {md_code(a.host, table=False)} · {md_code(a.allocator, table=False)}",
        "",
        f"{_LEVEL_MARK[a.verdict_level]} **{md_text(a.headline)}**",
        "",
        _row(["Measure", "Value"]),
        _row(["---", "---"]),
    ]
    for fact in a.facts:
        value = _plain(fact.value)
        if fact.detail:
            value += f" ({md_text(fact.detail)})"
        out.append(_row([md_text(fact.label), value]))
    out.append("")
    for table in a.tables:
        out.extend(_table(table))
    if a.diagnostics:
        out.append("#### Diagnostics")
        out.append("")
        out.extend(f"- {md_text(d)}" for d in a.diagnostics)
        out.append("")
    return out


def _table(table: TableView) -> list[str]:
    body = [
        _row([md_text(h) for h in table.headers]),
        _row(["--:" if n else "---" for n in table.numeric]),
        *(_row([_cell(c) for c in row]) for row in table.rows),
    ]
    if table.hidden_rows:
        body += ["", f"_{len(table.rows)} of {table.total_rows} rows; the JSON report has all._"]
    if table.key == "steps":
        # Long and secondary: folded, so the summary stays short.
        return [
            "<details>",
            f"<summary>{html_text(table.title)} ({table.total_rows})</summary>",
            "",
            *body,
            "",
            "</details>",
            "",
        ]
    return [f"#### {md_text(table.title)}", "", *body, ""]


# A name a plain sentence quotes (output.failure.plain_code): between two backticks.
_QUOTED = re.compile(r"`([^`\n]*)`")


def md_sentence(text: str) -> str:
    """A plain sentence in Markdown: its quoted names as code spans, the rest as text.

    Our sentences quote names in backticks; ``md_text`` alone escapes them, and the
    page shows ``\\`RandomUniform\\``` with its backslashes' backticks instead of
    code. Every piece still goes through ``md_code`` or ``md_text``, so a name
    holding a backtick of its own splits wrongly but is never read as Markdown."""
    out: list[str] = []
    at = 0
    for match in _QUOTED.finditer(text):
        out.append(_spaced(text[at : match.start()]))
        out.append(md_code(match.group(1)))
        at = match.end()
    out.append(_spaced(text[at:]))
    return "".join(out)


def _spaced(text: str) -> str:
    """``md_text`` of a piece of a sentence, keeping the spaces at its ends."""
    if not text.strip():
        return " " if text else ""
    lead = " " if text[0].isspace() else ""
    return lead + md_text(text) + (" " if text[-1].isspace() else "")
