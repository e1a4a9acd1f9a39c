"""The summary of captures on a terminal; shared by ``summary``, ``run`` and ``demo``.

It walks the same view the Markdown and HTML reports are built from
(``traceparse.report.view``), so labels, units and column choices agree
across the terminal and the reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal
    from traceparse.report.source import ProfileLike

# Per-allocator tables the terminal summary leaves to their own subcommand.
_SKIPPED_TABLES = {"steps": "traceparse steps"}
# Columns of the reports' tables that make a terminal line too long (by the
# record's column names); the report, `traceparse peak` and `traceparse
# allocations` show them.
_NARROW = {"top_tensors": {"op_type", "region", "estimated_bytes", "estimate_status", "alloc_ps"}}
# Columns a summary keeps longer than their declared priority: where in the
# user's code a tensor was made is what they act on, so it outlasts the dtype,
# shape, requested bytes and step (it goes after the bytes at the peak, before
# the name).
_KEPT = {"source": 2}  # tables.columns.HEADLINE
_VERDICT_STYLES = {"ok": "green", "warn": "bold yellow", "unknown": "dim"}


def _capture_label(paths: Sequence[str]) -> str:
    if len(paths) == 1:
        return paths[0]
    return f"{paths[0]} (+{len(paths) - 1} more hosts)"


def print_summaries(profiles: Sequence[ProfileLike], term: Terminal, *, top: int = 10) -> None:
    """Per capture and allocator: peak, capacity, top tensors and ops, attribution, leaks."""
    from traceparse import __version__
    from traceparse.report.view import build_view

    with term.progress("Analysing", total=len(profiles)) as bar:
        for profile in profiles:
            profile.summary()  # computed once and cached; the view below reuses it
            bar.advance()
        view = build_view(profiles, __version__, top=top)

    # ``load_each`` gives one profile per run and host: a run's hosts open with one
    # overview of every host and allocator, then each host's own blocks.
    runs: dict[str, list[Any]] = {}
    for pv in view.profiles:
        runs.setdefault(pv.run, []).append(pv)
    for index, (run, pvs) in enumerate(runs.items()):
        if index:
            term.line()
        hosts = [h for pv in pvs for h in pv.hosts]
        allocators = [av for pv in pvs for av in pv.allocators]
        if len(pvs) > 1:
            term.heading(f"Run {run}: {len(hosts)} hosts", level=1)
            term.fields([("Run", run), ("Hosts", ", ".join(hosts))])
            if len(allocators) > 1:
                term.line()
                _print_overview(allocators, term)
            for pv in pvs:
                term.line()
                _print_profile(pv, term, top, overview=False)
        else:
            _print_profile(pvs[0], term, top, overview=True)


def _print_profile(pv: Any, term: Terminal, top: int, *, overview: bool) -> None:
    """One capture: its heading, the overview of its allocators, each allocator's blocks."""
    term.heading(_capture_label(pv.paths), level=1)
    term.fields([("Run", pv.run), ("Hosts" if len(pv.hosts) > 1 else "Host", ", ".join(pv.hosts))])
    from traceparse.cli._failure_view import print_failure_headline

    print_failure_headline(pv.profile, term)  # issue 39: a failure comes before the peak
    if not pv.allocators:
        term.line()
        term.line("No memory events: nothing to attribute (see the diagnostics below).")
    if overview and len(pv.allocators) > 1:
        term.line()
        _print_overview(pv.allocators, term)
    for av in pv.allocators:
        term.line()
        term.heading(f"Allocator {av.allocator} on {av.host}", level=2)
        _print_facts(av, term)
        for table in av.tables:
            if table.key in _SKIPPED_TABLES:
                continue
            term.line()
            _print_table(table, term, top)
        if av.diagnostics:
            term.line()
            term.line(f"Notes on {av.allocator} on {av.host}", style="bold")
            term.bullets(av.diagnostics, style="yellow")
    if pv.diagnostics:
        term.line()
        term.line("Diagnostics of the capture", style="bold")
        term.bullets(pv.diagnostics, style="yellow")


def _print_overview(allocators: Sequence[Any], term: Terminal) -> None:
    """One line per host and allocator, the fullest flagged, before the full blocks."""
    from traceparse.output.units import format_bytes, format_duration_ps, format_percent
    from traceparse.records import fullest

    top = fullest([av.summary for av in allocators])
    rows = []
    for av in allocators:
        s = av.summary
        rows.append(
            [
                str(av.host),
                str(av.allocator),
                format_bytes(s.peak_bytes),
                format_bytes(s.capacity_bytes),
                av.utilisation,
                format_percent(s.before_capture_share),
                format_duration_ps(s.peak_time_ps),
                "<- fullest" if s is top else "",
            ]
        )
    by = (
        "utilisation"
        if top is not None and top.utilisation is not None
        else "peak (no capacity known)"
    )
    term.text_table(
        ["Host", "Allocator", "Peak", "Capacity", "Used", "Before capture", "Peak at", ""],
        rows,
        right=[False, False, True, True, True, True, True, False],
        title=f"Allocators ({len(allocators)}; the fullest by {by} is flagged)",
        key="Allocator",
    )


def _print_facts(av: Any, term: Terminal) -> None:
    rows: list[tuple[str, str]] = []
    styles: dict[str, str] = {}
    for fact in av.facts:
        if fact.value == "-" and not fact.detail:
            continue  # unknown here (CPU allocators report no capacity): say nothing
        text = fact.value if not fact.detail else f"{fact.value} ({fact.detail})"
        if fact.line:
            text = fact.line  # the view's one line: the verdict said once
        if fact.label == "Leak check":
            styles[fact.label] = _VERDICT_STYLES.get(av.verdict_level, "")
        rows.append((fact.label, text))
    term.fields(rows, styles=styles)


def _print_table(table: Any, term: Terminal, top: int) -> None:
    """A table of the view as it is: the view cut its rows (``--top``) and counted the rest."""
    from traceparse.output.sentences import more_rows

    narrow = _NARROW.get(table.key, set())
    keep = [
        i for i in range(len(table.headers)) if not (table.columns and table.columns[i] in narrow)
    ]
    shown = [[row[i].text for i in keep] for row in table.rows]
    footer = more_rows(table.hidden_rows, "--top 0 shows all") if table.hidden_rows else None
    term.text_table(
        [table.headers[i] for i in keep],
        shown,
        right=[table.numeric[i] for i in keep],
        title=table.title,
        footer=footer,
        priority=_priorities([table.columns[i] for i in keep] if table.columns else []),
    )


def _priorities(columns: Sequence[str]) -> list[int] | None:
    """Which columns a narrow terminal drops first: the declared priorities
    (``tables.columns``), the source line raised to the headline's (``_KEPT``)."""
    from traceparse.tables.columns import COLUMNS, PLAIN

    if not columns:
        return None
    return [_KEPT.get(c, COLUMNS[c].priority if c in COLUMNS else PLAIN) for c in columns]
