"""A Profile as a small HTML summary for Jupyter: ``Profile._repr_html_``.

What a notebook cell shows: one line per allocator of the run (its peak,
capacity and use, the fullest flagged), then per allocator where the bytes at
the peak come from (the attribution parts, summing to the bytes in use) and
who holds them: the largest layers, ops and tensors. The numbers and words are
the reports' own (``view.build_view``); this module only lays them out. No
scripts, no external resources: inline styles scoped to one class, every name
escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from traceparse.output.sentences import more_rows
from traceparse.output.units import format_bytes
from traceparse.records import fullest
from traceparse.report.escape import html_text
from traceparse.report.failure import failure_lines, html_failure
from traceparse.report.source import ProfileLike
from traceparse.report.view import AllocatorView, TableView, build_view

__all__ = ["DEFAULT_TOP", "NotebookReport", "profile_html"]

# Rows per holder table in a notebook cell (the profile's tables have the rest).
DEFAULT_TOP = 5
# The holder tables shown, in order (view.py's keys).
_HOLDERS = ("layers", "top_ops", "top_tensors")
# Where a notebook's reader finds each table whole.
_WHOLE = {"layers": "prof.layers()", "top_ops": "prof.ops", "top_tensors": "prof.live_at_peak()"}

_STYLE = (
    "<style>"
    ".traceparse-nb table{border-collapse:collapse;margin:.3em 0 .8em}"
    ".traceparse-nb th,.traceparse-nb td{padding:.15em .6em;text-align:left}"
    ".traceparse-nb td.n,.traceparse-nb th.n{text-align:right;"
    "font-variant-numeric:tabular-nums}"
    ".traceparse-nb tr.total td{font-weight:bold}"
    ".traceparse-nb h4{margin:.8em 0 .2em}"
    "</style>"
)


class NotebookReport:
    """A profile's summary with ``top`` rows per holder table: Jupyter shows it as HTML,
    ``str()`` as its headlines. ``NotebookReport(prof, top=10)`` in a cell."""

    def __init__(self, profile: ProfileLike, top: int = DEFAULT_TOP) -> None:
        self._profile = profile
        self._top = top

    def _repr_html_(self) -> str:
        return profile_html(self._profile, self._top)

    def __str__(self) -> str:
        lines = list(failure_lines(self._profile))  # issue 39: the failure first
        for profile in build_view([self._profile], _version(), top=self._top).profiles:
            for a in profile.allocators:
                lines.append(a.headline)
        return "\n".join(lines) or "No memory events in this capture."


def profile_html(profile: ProfileLike, top: int = DEFAULT_TOP) -> str:
    """The summary of ``profile`` as an HTML fragment (no scripts)."""
    view = build_view([profile], _version(), top=top)
    parts = [_STYLE, '<div class="traceparse-nb">']
    for p in view.profiles:
        hosts = ", ".join(p.hosts)
        parts.append(f"<h3>traceparse: run {html_text(p.run)} ({html_text(hosts)})</h3>")
        parts.append(html_failure(p.profile))  # issue 39: the failure first (empty if none)
        if not p.allocators:
            notes = p.diagnostics or ["No memory events in this capture."]
            parts += [f"<p>{html_text(note)}</p>" for note in notes]
            continue
        parts.append(_overview(p.allocators))
        for a in p.allocators:
            parts.append(_allocator(a))
    parts.append("</div>")
    return "\n".join(parts)


def _overview(allocators: Sequence[AllocatorView]) -> str:
    """One row per host and allocator: peak, capacity, use; the fullest flagged."""
    top = fullest([a.summary for a in allocators])
    rows = []
    for a in allocators:
        s = a.summary
        flag = " ◀ fullest" if s is top and len(allocators) > 1 else ""
        capacity = _bytes(s.capacity_bytes)
        rows.append(
            f"<tr><td><code>{html_text(a.allocator)}</code></td>"
            f"<td><code>{html_text(a.host)}</code></td>"
            f'<td class="n">{_bytes(s.peak_bytes)}</td><td class="n">{capacity}</td>'
            f'<td class="n">{html_text(a.utilisation)}</td><td>{html_text(flag)}</td></tr>'
        )
    head = (
        '<tr><th>allocator</th><th>host</th><th class="n">peak</th>'
        '<th class="n">capacity</th><th class="n">use</th><th></th></tr>'
    )
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _allocator(a: AllocatorView) -> str:
    out = [f"<h4>{html_text(a.allocator)} on {html_text(a.host)}</h4>"]
    for fact in a.leads:  # a section that must be read first (report.view.LEADS)
        detail = f" ({html_text(fact.detail)})" if fact.detail else ""
        out.append(f"<p><b>{html_text(fact.label)}</b>: {html_text(fact.value)}{detail}</p>")
    out.append(f"<p>{html_text(a.headline)}</p>")
    tables = {t.key: t for t in a.tables}
    for key in ("attribution", *_HOLDERS):
        if key in tables:
            out.append(_table(tables[key]))
    return "\n".join(out)


def _table(table: TableView) -> str:
    """A table of the view as it is: the view cut its rows (``top``) and counted the rest."""
    rows = table.rows
    head = "".join(
        f"<th{' class=n' if numeric else ''}>{html_text(h)}</th>"
        for h, numeric in zip(table.headers, table.numeric, strict=True)
    )
    body = []
    for i, row in enumerate(rows):
        total = table.total_last and i == len(rows) - 1
        cells = []
        for cell, numeric in zip(row, table.numeric, strict=True):
            text = html_text(cell.text)
            if cell.kind in ("name", "ident"):
                text = f"<code>{text}</code>"
            cells.append(f'<td class="n">{text}</td>' if numeric else f"<td>{text}</td>")
        body.append(f"<tr{' class=total' if total else ''}>{''.join(cells)}</tr>")
    more = table.hidden_rows
    # Said as what the cell's reader can do (no HTML report exists until one is
    # written): the table that has them all, or the report's own top=0.
    whole = _WHOLE.get(table.key)
    hint = (
        f"<code>{html_text(whole)}</code> has them all"
        if whole
        else html_text("NotebookReport(profile, top=0) shows all")
    )
    note = f"<p><small>{html_text(more_rows(more))} ({hint})</small></p>" if more > 0 else ""
    return (
        f"<div><b>{html_text(table.title)}</b><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>{note}</div>"
    )


def _bytes(value: object) -> str:
    return html_text(format_bytes(value))  # "-" when unknown


def _version() -> str:
    from traceparse.version import __version__

    return __version__
