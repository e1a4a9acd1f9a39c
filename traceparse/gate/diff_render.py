"""A diff as a terminal table, Markdown, a small self-contained HTML page, or JSON.

Renderers take ``AllocatorDiff`` records and never read a capture. Tables list
changed rows by impact (``top`` of them; JSON keeps every row, unchanged ones
too). Names are escaped for their format: Markdown code spans (``md_code``),
``html.escape`` for HTML.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from traceparse.gate.diff import AllocatorDiff, DiffRow
from traceparse.output.units import format_bytes
from traceparse.report.escape import html_text, md_code, md_text

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal

__all__ = [
    "DIFF_SCHEMA_VERSION",
    "diff_html",
    "diff_json",
    "diff_markdown",
    "print_diff",
]

DIFF_SCHEMA_VERSION = 1

# What the program asked for (shape, requested bytes) next to what the
# allocator handed out (at the peak, over the capture).
HEADERS = (
    "{by}",
    "change",
    "largest shape",
    "Δ requested",
    "at peak before",
    "at peak after",
    "Δ at peak",
    "Δ allocated",
)
_NUMERIC = (False, False, False, True, True, True, True, True)
# What a narrow terminal keeps longest (tables.columns' scale: the name is 3): the
# shapes and the two changes the headline ranks by, then the change over the
# capture and the row's status, then the bytes at the peak on each side (the
# change at the peak says how they differ).
_PRIORITY = (3, 2, 3, 3, 1, 1, 3, 2)
# The delta columns (coloured in HTML) and the value each shows.
_DELTAS = {3: "requested_delta", 6: "peak_delta", 7: "allocated_delta"}


def _shape(row: DiffRow) -> str:
    before = row.shapes_before[0] if row.shapes_before else None
    after = row.shapes_after[0] if row.shapes_after else None
    if before == after or before is None or after is None:
        return before or after or "-"
    return f"{before} → {after}"


def _cells(row: DiffRow) -> list[str]:
    absent_before = row.status == "new"
    absent_after = row.status == "vanished"
    return [
        row.key,
        row.status,
        _shape(row),
        format_bytes(row.requested_delta, signed=True),
        "-" if absent_before else format_bytes(row.peak_before),
        "-" if absent_after else format_bytes(row.peak_after),
        format_bytes(row.peak_delta, signed=True),
        format_bytes(row.allocated_delta, signed=True),
    ]


def _headers(diff: AllocatorDiff) -> list[str]:
    headers = [h.format(by=diff.by) for h in HEADERS]
    if diff.per_step:  # different step counts: the bytes over a capture compare per step
        headers = [h + " per step" if h in ("Δ requested", "Δ allocated") else h for h in headers]
    return headers


def _shown(diff: AllocatorDiff, top: int) -> tuple[list[DiffRow], str | None]:
    changed = list(diff.changed_rows)
    rows = changed if top <= 0 else changed[:top]
    notes = []
    if len(changed) > len(rows):
        notes.append(f"{len(changed) - len(rows)} more changed {diff.by}s not shown")
    unchanged = len(diff.rows) - len(changed)
    if unchanged:
        notes.append(f"{unchanged} unchanged {diff.by}{'s' if unchanged != 1 else ''} not shown")
    return rows, ("; ".join(notes) + ".") if notes else None


def print_diff(diffs: Sequence[AllocatorDiff], term: Terminal, top: int, title: str) -> None:
    """Headline and table per allocator, on the terminal."""
    term.heading(title)
    for diff in diffs:
        term.line()
        term.line(diff.headline(), style="bold")
        rows, note = _shown(diff, top)
        if rows:
            term.text_table(
                _headers(diff),
                [_cells(r) for r in rows],
                right=list(_NUMERIC),
                priority=list(_PRIORITY),
                footer=note,
                key=_headers(diff)[0],
            )
        elif note:
            term.line(note)


def diff_markdown(diffs: Sequence[AllocatorDiff], top: int, title: str) -> str:
    out = [f"## {md_text(title)}", ""]
    for diff in diffs:
        out += [
            f"### {md_code(diff.allocator, table=False)} on {md_code(diff.host, table=False)}",
            "",
        ]
        out += [md_text(diff.headline()), ""]
        rows, note = _shown(diff, top)
        if rows:
            out.append("| " + " | ".join(md_text(h) for h in _headers(diff)) + " |")
            out.append("| " + " | ".join("---:" if n else "---" for n in _NUMERIC) + " |")
            for row in rows:
                cells = _cells(row)
                out.append("| " + " | ".join([md_code(cells[0]), *cells[1:]]) + " |")
            out.append("")
        if note:
            out += [f"<sub>{md_text(note)}</sub>", ""]
    return "\n".join(out).rstrip("\n") + "\n"


_CSS = (
    "body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1b1f24}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{padding:.25em .6em;border-bottom:1px solid #d0d7de;text-align:left}"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}"
    "code{font:12px ui-monospace,monospace;word-break:break-all}"
    ".up{color:#cf222e}.down{color:#1a7f37}"
)


def diff_html(diffs: Sequence[AllocatorDiff], top: int, title: str) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html_text(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html_text(title)}</h1>",
    ]
    for diff in diffs:
        allocator, host = html_text(diff.allocator), html_text(diff.host)
        parts.append(f"<h2><code>{allocator}</code> on <code>{host}</code></h2>")
        parts.append(f"<p>{html_text(diff.headline())}</p>")
        rows, note = _shown(diff, top)
        if rows:
            head = "".join(
                f"<th{' class=n' if n else ''}>{html_text(h)}</th>"
                for h, n in zip(_headers(diff), _NUMERIC, strict=True)
            )
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>")
            for row in rows:
                cells = _cells(row)
                tds = [
                    f"<td><code>{html_text(cells[0])}</code></td>",
                    f"<td>{html_text(cells[1])}</td>",
                ]
                for i, cell in enumerate(cells[2:], start=2):
                    value = getattr(row, _DELTAS[i]) if i in _DELTAS else 0
                    css = "n" if _NUMERIC[i] else ""
                    css += " up" if value > 0 else " down" if value < 0 else ""
                    tds.append(f'<td class="{css.strip()}">{html_text(cell)}</td>')
                parts.append("<tr>" + "".join(tds) + "</tr>")
            parts.append("</tbody></table>")
        if note:
            parts.append(f"<p><small>{html_text(note)}</small></p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def diff_json(
    diffs: Sequence[AllocatorDiff], before: dict[str, Any], after: dict[str, Any], by: str
) -> str:
    data = {
        "schema_version": DIFF_SCHEMA_VERSION,
        "by": by,
        "before": before,
        "after": after,
        "allocators": [d.to_dict() for d in diffs],
    }
    from traceparse.output.jsonvalues import inert

    return inert(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"
