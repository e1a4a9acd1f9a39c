"""The HTML report: one self-contained file, readable offline, safe to open.

Everything is inline: CSS, charts as SVG, and one script (``interact``: sorting
and filtering). The page carries a Content Security Policy that allows that
script only, by its hash, and no network at all, so markup that a hostile name
smuggled in could not run; every string from the capture goes through
``html_text``; charts come from ``plots`` (matplotlib's
SVG writer escapes their labels). Layout per allocator: headline cards, the
memory timeline, the ops and scopes at the peak as bars, the attribution as a
stacked bar, then the tables.
"""

from __future__ import annotations

from collections.abc import Sequence

from traceparse.output.cells import NO_OP
from traceparse.output.units import is_missing
from traceparse.records.timeline import timeline_section
from traceparse.report.escape import html_text as esc
from traceparse.report.failure import html_failure
from traceparse.report.interact import SCRIPT
from traceparse.report.source import ProfileLike
from traceparse.report.style import CSP, STYLE
from traceparse.report.view import (
    MAX_ROWS,
    AllocatorView,
    Cell,
    ProfileView,
    ReportView,
    TableView,
    build_view,
)
from traceparse.report.whatif import html_whatif

__all__ = ["render_html", "render_html_view"]

# Above this many steps the timeline shades none (it would be a grey wash).
MAX_SHADED_STEPS = 400


def render_html(
    profiles: Sequence[ProfileLike], version: str | None = None, *, top: int = MAX_ROWS
) -> str:
    """The HTML report over ``profiles``: a complete, self-contained document."""
    from traceparse.version import __version__

    return render_html_view(build_view(profiles, version or __version__, top=top, predict=True))


def render_html_view(view: ReportView) -> str:
    sections = sum(len(p.allocators) for p in view.profiles)
    parts = [
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{esc(view.title)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        "<main>",
        f"<h1>{esc(view.title)}</h1>",
        f'<p class="meta">{len(view.profiles)} run{"" if len(view.profiles) == 1 else "s"}, '
        f"{sections} allocator{'' if sections == 1 else 's'} · traceparse {esc(view.version)}"
        f" · generated {esc(view.generated_at)}</p>",
    ]
    if view.profiles:
        parts.append(_overview(view))
    for profile in view.profiles:
        parts.append(_profile(profile))
    parts += [
        "<footer>Times are from the start of each capture. Bytes are binary units "
        "(1 MiB = 1,048,576 bytes). Made by traceparse from the TensorFlow profiler's "
        "allocator events.</footer>",
        "</main>",
        # Sorting and filtering; the policy allows this exact text only (by its hash).
        f"<script>{SCRIPT}</script>",
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


def _overview(view: ReportView) -> str:
    rows = []
    for profile in view.profiles:
        if not profile.allocators:
            hosts = ", ".join(f"<code>{esc(h)}</code>" for h in profile.hosts)
            rows.append(
                f"<tr><td><code>{esc(profile.run)}</code></td><td>{hosts}</td><td>-</td>"
                '<td class="num">-</td><td class="num">-</td><td class="num">-</td>'
                '<td><span class="badge unknown">no memory events</span></td></tr>'
            )
        for a in profile.allocators:
            facts = {f.label: f for f in a.facts}
            rows.append(
                "<tr>"
                f"<td><code>{esc(profile.run)}</code></td>"
                f"<td><code>{esc(a.host)}</code></td>"
                f'<td><a href="#{esc(a.anchor)}"><code>{esc(a.allocator)}</code></a></td>'
                f'<td class="num"><strong>{esc(facts["Peak in use"].value)}</strong></td>'
                f'<td class="num">{esc(facts["Capacity"].value)}</td>'
                f'<td class="num">{esc(a.utilisation)}</td>'
                f'<td><span class="badge {a.verdict_level}">{esc(a.verdict)}</span></td>'
                "</tr>"
            )
    head = (
        "<tr><th>Run</th><th>Host</th><th>Allocator</th><th class=num>Peak</th>"
        "<th class=num>Capacity</th><th class=num>Utilisation</th><th>Leak check</th></tr>"
    )
    return (
        f'<div class="scroll"><table class="overview"><thead>{head}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _profile(profile: ProfileView) -> str:
    hosts = ", ".join(f"<code>{esc(h)}</code>" for h in profile.hosts)
    parts = [
        f'<section class="run" id="{esc(profile.anchor)}">',
        f"<h2>Run <code>{esc(profile.run)}</code> on {hosts}</h2>",
        '<p class="paths">'
        + "<br>".join(f"Capture: <code>{esc(p)}</code>" for p in profile.paths)
        + "</p>",
    ]
    # Issue 39: a capture that ended in failure says so first (empty otherwise).
    failure = html_failure(profile.profile)
    if failure:
        parts.append(failure)
    if not profile.allocators:
        parts.append(
            '<p class="empty">No memory to report: this capture has no allocator events.</p>'
        )
    if profile.diagnostics:
        parts.append(_diagnostics(profile.diagnostics))
    charted = _charted(profile.allocators)
    for allocator in profile.allocators:
        parts.append(_allocator(profile, allocator, charts=id(allocator) in charted))
    # Issue 50: what would save memory, where the capture gives a batch size.
    whatif = html_whatif(profile.profile)
    if whatif:
        parts.append(whatif)
    parts.append("</section>")
    return "\n".join(parts)


def _diagnostics(notes: Sequence[str]) -> str:
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f'<ul class="diagnostics">{items}</ul>'


# Charts cost about a quarter of a second per allocator (matplotlib); a capture
# has one allocator per device and a few for the host, so a few dozen at most for
# a run of several hosts. A damaged capture can name thousands: beyond this many,
# the allocators with the smaller peaks get their tables but no charts.
MAX_CHARTED_ALLOCATORS = 32


def _charted(allocators: Sequence[AllocatorView]) -> set[int]:
    """The ids of the allocators drawn: the MAX_CHARTED_ALLOCATORS largest peaks."""
    if len(allocators) <= MAX_CHARTED_ALLOCATORS:
        return {id(a) for a in allocators}
    ranked = sorted(allocators, key=lambda a: -(_int(a.summary.peak_bytes) or 0))
    return {id(a) for a in ranked[:MAX_CHARTED_ALLOCATORS]}


def _allocator(profile: ProfileView, a: AllocatorView, *, charts: bool = True) -> str:
    drawn = (
        [_charts(profile, a), _flame(profile, a)]  # flame: report/flame.py; docs/sources.md
        if charts
        else [
            f'<p class="note">No charts for this allocator: the run has '
            f"{len(profile.allocators):,} allocators, and the "
            f"{MAX_CHARTED_ALLOCATORS} with the largest peaks are drawn.</p>"
        ]
    )
    parts = [
        f'<section class="allocator" id="{esc(a.anchor)}">',
        f"<h3><code>{esc(a.host)}</code> · <code>{esc(a.allocator)}</code></h3>",
        f'<p class="headline">{esc(a.headline)}</p>',
        _cards(a),
        *drawn,
    ]
    for table in a.tables:
        parts.append(_table(table))
    if a.diagnostics:
        parts.append("<h4>Diagnostics</h4>")
        parts.append(_diagnostics(a.diagnostics))
    parts.append("</section>")
    return "\n".join(parts)


def _flame(profile: ProfileView, a: AllocatorView) -> str:
    """The icicle graph of the bytes at the peak by stack, when the profile has
    source lines (a Profile-like object without them gives nothing)."""
    from traceparse.report.flame import flame_section

    source = profile.profile
    if not getattr(source, "has_sources", False):
        return ""
    return flame_section(source, a.host, a.allocator)  # type: ignore[arg-type]


def _cards(a: AllocatorView) -> str:
    cards = []
    for fact in a.facts:
        level = f" {a.verdict_level}" if fact.label == "Leak check" else ""
        detail = f'<div class="detail">{esc(fact.detail)}</div>' if fact.detail else ""
        cards.append(
            f'<div class="card{level}"><div class="label">{esc(fact.label)}</div>'
            f'<div class="value">{esc(fact.value)}</div>{detail}</div>'
        )
    return f'<div class="cards">{"".join(cards)}</div>'


def _charts(profile: ProfileView, a: AllocatorView) -> str:
    try:
        import matplotlib  # noqa: F401

        from traceparse.report import plots
    except ImportError:
        return (
            '<p class="note">Charts need matplotlib: '
            "<code>pip install 'traceparse[report]'</code>.</p>"
        )
    s = a.summary
    p = profile.profile
    series = timeline_section(p.timeline, p.step_markers, a.host, a.allocator)
    steps, note = _shaded(series.steps)
    salt = a.anchor
    figures = [
        _figure(
            "Memory in use over time",
            plots.timeline_svg(
                series.time_ps,
                series.in_use_bytes,
                peak_time_ps=_int(s.peak_time_ps),
                peak_bytes=_int(s.peak_bytes),
                capacity_bytes=_int(s.capacity_bytes),
                steps=steps,
                start_bytes=series.start_bytes,
                # The step the text names (view's _where): the chart says it too.
                peak_step=_step_words(s.step_unit, s.peak_step),
                failure=_failure_mark(profile.profile, a),
                label=f"Memory in use over time, {a.host} {a.allocator}",
                salt=f"{salt}-timeline",
            ),
            "Bytes in use (allocated + reserved) after every allocator event; "
            "the peak is marked, steps are shaded." + note,
            css="timeline",
            element_id=f"timeline-{a.anchor}",
        )
    ]
    bars = []
    for frame, column, what in ((s.top_ops, "op", "Ops"), (s.top_scopes, "scope", "Name scopes")):
        if frame is None or frame.empty or "live_at_peak_bytes" not in frame.columns:
            continue
        top = frame[frame["live_at_peak_bytes"].fillna(0) > 0].head(12)
        if top.empty:
            continue
        bars.append(
            _figure(
                f"{what} at the peak",
                plots.bars_svg(
                    [NO_OP if is_missing(x) else str(x) for x in top[column].astype(object)],
                    [int(v) for v in top["live_at_peak_bytes"]],
                    label=f"{what} holding memory at the peak",
                    salt=f"{salt}-{column}",
                ),
                f"{what} by bytes live at the peak (the largest {len(top)}).",
                css="bars",
            )
        )
    figures.extend(bars)
    figures.extend(_layers_chart(profile, a))
    if a.attribution_parts and any(v > 0 for _, v in a.attribution_parts):
        figures.append(
            _figure(
                "What the bytes in use at the peak are",
                plots.attribution_svg(
                    a.attribution_parts,
                    label="What the bytes in use at the peak are",
                    salt=f"{salt}-attribution",
                ),
                "The bytes in use at the peak, by what explains them.",
                css="attribution",
            )
        )
    figures.extend(_prediction_chart(a))
    return "\n".join(figures)


def _prediction_chart(a: AllocatorView) -> list[str]:
    """The predicted peak against the batch size, where the record has a prediction
    (issue 40: the captured batch size could be read off the capture)."""
    from traceparse.report.predict import record_prediction_caption, record_prediction_svg

    prediction = getattr(a.summary, "prediction", None)
    if not prediction:
        return []
    label = "Predicted peak against batch size"
    svg = record_prediction_svg(
        prediction, f"{label}, {a.host} {a.allocator}", f"{a.anchor}-predict"
    )
    return [_figure(label, svg, record_prediction_caption(prediction), css="prediction")]


def _layers_chart(profile: ProfileView, a: AllocatorView) -> list[str]:
    from traceparse.report import layer_plots

    top = layer_plots.layers_of(a.summary.layers)
    if top.empty:
        return []
    label = "Layers holding memory at the peak"
    svg = layer_plots.layers_svg(top, label=label, salt=f"{a.anchor}-layers")
    caption = (
        "Each layer's bytes live at the peak: activations, gradients, weights, optimizer "
        "state and other. The table lists what no layer holds."
    )
    return [_figure(label, svg, caption, css="bars")]


def _figure(title: str, svg: str, caption: str, *, css: str, element_id: str | None = None) -> str:
    ident = f' id="{esc(element_id)}"' if element_id else ""
    return (
        f"<h4>{esc(title)}</h4>"
        f'<figure class="chart {css}"{ident}>{svg}<figcaption>{esc(caption)}</figcaption></figure>'
    )


def _shaded(spans: Sequence[tuple[int, int, int]]) -> tuple[list[tuple[int, int, int]], str]:
    """The step spans the chart shades, and the caption's words when it shades none."""
    if len(spans) > MAX_SHADED_STEPS:
        return [], f" ({len(spans)} steps: too many to shade.)"
    return list(spans), ""


def _step_words(unit: object, step: int | None) -> str:
    """``step 2`` (or ``execution 2``); empty where the step is not known."""
    return "" if step is None or is_missing(step) else f"{unit} {int(step)}"


def _failure_mark(profile: ProfileLike, a: AllocatorView) -> tuple[int, str] | None:
    """Where on this allocator's timeline the capture failed, and the words for it."""
    from traceparse.output.failure import failure_title

    found = getattr(profile, "failures", None)  # a stand-in for a Profile may have none
    for f in (found() if callable(found) else found) or []:
        if f.host != a.host or f.time_ps is None or f.allocator not in (None, a.allocator):
            continue
        step = _step_words(a.summary.step_unit, f.step)
        step = f", {step}" if step else ""
        return int(f.time_ps), ("out of memory" if f.out_of_memory else failure_title(f)) + step
    return None


def _int(value: object) -> int | None:
    return None if is_missing(value) else int(value)  # type: ignore[call-overload]


def _name(text: str) -> str:
    """A long op or scope name as code that may wrap after each ``/``."""
    return "<code>" + "/<wbr>".join(esc(part) for part in text.split("/")) + "</code>"


def _td(cell: Cell, numeric: bool) -> str:
    if cell.kind == "name":
        return f'<td class="name">{_name(cell.text)}</td>'
    if cell.kind == "ident":
        return f'<td class="ident"><code>{esc(cell.text)}</code></td>'
    return f'<td class="num">{esc(cell.text)}</td>' if numeric else f"<td>{esc(cell.text)}</td>"


def _order(table: TableView) -> list[int]:
    """The columns in the order shown: a source line next to the name it belongs to.

    A wide table scrolls sideways and its last columns are off screen at common
    widths (the largest tensors have eleven); where in the user's code a tensor
    was made is what they act on, so it follows the op rather than ending the row.
    """
    order = list(range(len(table.headers)))
    if "source" in table.columns and len(order) > 2:
        source = table.columns.index("source")
        order.remove(source)
        order.insert(1, source)
    return order


def _source_td(cell: Cell) -> str:
    """A source line (``dir/file.py:12 fn``) that may wrap after each ``/``."""
    if cell.text in ("", "-"):
        return f"<td>{esc(cell.text)}</td>"
    return f'<td class="source">{_name(cell.text)}</td>'


def _table(table: TableView) -> str:
    order = _order(table)
    head = "".join(
        f'<th class="num">{esc(table.headers[i])}</th>'
        if table.numeric[i]
        else f"<th>{esc(table.headers[i])}</th>"
        for i in order
    )
    source = table.columns.index("source") if "source" in table.columns else None
    rows = []
    for i, row in enumerate(table.rows):
        total = table.total_last and i == len(table.rows) - 1
        cells = "".join(
            _source_td(row[j]) if j == source else _td(row[j], table.numeric[j]) for j in order
        )
        rows.append(f'<tr class="total">{cells}</tr>' if total else f"<tr>{cells}</tr>")
    note = ""
    if table.hidden_rows:
        note = (
            f'<p class="note">{len(table.rows)} of {table.total_rows} rows; '
            "the JSON report has all.</p>"
        )
    body = (
        f'<div class="scroll"><table class="{esc(table.key)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>{note}"
    )
    if table.key == "steps":
        return (
            f"<details><summary>{esc(table.title)} ({table.total_rows})</summary>{body}</details>"
        )
    return f"<h4>{esc(table.title)}</h4>{body}"
