"""What every report shows, decided once: sections, headline facts, table columns, units.

Markdown and HTML differ only in markup; both walk the ``ReportView`` built
here, so the numbers, units, column choices and wording agree. Values are
formatted to human units here; escaping is the renderer's job (see
``escape``), since it depends on the markup.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from traceparse.output.cells import (
    MAX_NOTE_WIDTH,
    MAX_REPORT_CELL_WIDTH,
    NO_OP,
    NUMERIC_KINDS,
    STEP_COLUMNS,
    column_kind,
    format_cell,
    shorten,
)
from traceparse.output.cells import Kind as TermKind
from traceparse.output.sentences import allocator_notes, leak_growth, leak_line, leak_sentence
from traceparse.output.units import (
    format_bytes,
    format_count,
    format_duration_ps,
    format_percent,
    is_missing,
)
from traceparse.records import LeakVerdict, StepUnit, step_unit
from traceparse.records.terms import EXPLICIT_ROWS, OPTIMIZER_NAMES
from traceparse.report.source import AllocatorSummaryLike, ProfileLike
from traceparse.tables.columns import COLUMNS, ROLE_BYTE_COLUMNS

__all__ = [
    "AllocatorView",
    "Cell",
    "Fact",
    "ProfileView",
    "ReportView",
    "TableView",
    "build_view",
    "generated_at",
]

Kind = Literal["name", "ident", "text", "number"]

# Rows shown per table in Markdown and HTML unless told (``top``); JSON always
# has every row. The records keep every row: a view cuts them, once.
MAX_ROWS = 20
MAX_STEP_ROWS = 50


@dataclass(frozen=True)
class Cell:
    """One formatted value. ``name`` (long, hierarchical: ops, scopes) and ``ident``
    (short: types, shapes) cells come from the capture and show as code;
    ``number`` cells are right-aligned; ``text`` cells are prose."""

    text: str
    kind: Kind = "text"


@dataclass(frozen=True)
class Fact:
    label: str
    value: str
    detail: str = ""
    # The fact said on one line where value and detail would repeat each other.
    line: str = ""


@dataclass
class TableView:
    key: str
    title: str
    headers: list[str]
    numeric: list[bool]
    rows: list[list[Cell]]
    total_rows: int
    note: str = ""
    # The last row is a total (shown emphasised).
    total_last: bool = False
    # The record's column behind each header (empty for tables made of parts).
    columns: list[str] = field(default_factory=list)

    @property
    def hidden_rows(self) -> int:
        return self.total_rows - len(self.rows)


@dataclass
class AllocatorView:
    host: str
    allocator: str
    anchor: str
    headline: str
    verdict: str
    verdict_level: Literal["ok", "warn", "unknown"]
    utilisation: str
    facts: list[Fact]
    tables: list[TableView]
    diagnostics: list[str]
    summary: AllocatorSummaryLike
    # The attribution as (label, bytes) parts, for the stacked bar.
    attribution_parts: list[tuple[str, int]] = field(default_factory=list)
    # The facts of LEADS (also first in ``facts``): what every output says first.
    leads: list[Fact] = field(default_factory=list)


@dataclass
class ProfileView:
    run: str
    hosts: list[str]
    paths: list[str]
    anchor: str
    diagnostics: list[str]
    allocators: list[AllocatorView]
    profile: ProfileLike


@dataclass
class ReportView:
    title: str
    generated_at: str
    version: str
    profiles: list[ProfileView]


# Attribution components, in the order they stack up to the bytes in use.
ATTRIBUTION_LABELS: dict[str, str] = {
    "shape_explained_bytes": "tensors (shape × dtype)",
    "xla_buffer_bytes": "XLA buffers (shape × dtype)",
    "xla_slack_bytes": "XLA slab slack",
    "shape_unknown_bytes": "shape unknown (not recorded)",
    "unexplained_request_bytes": "requested beyond shape × dtype",
    "padding_bytes": "allocator rounding and slack",
    "variable_bytes": "variables alive before the capture",
    "xla_parameter_bytes": "read as parameters by XLA programs, from before the capture",
    "before_capture_bytes": "allocated before the capture",
    "reserved_bytes": "reserved by the allocator",
}

# With an inventory, what it does not name.
_UNNAMED_LABEL = "allocated before the capture, not named"
_XLA_PARTS = ("xla_buffer_bytes", "xla_slack_bytes")

# Columns holding identifiers from the capture: shown as code. Declared on the
# column (``tables.columns.Column.display``); a few of the view's own too.
_LONG_NAME_COLUMNS = {c.name for c in COLUMNS.values() if c.display == "name"}
_NAME_COLUMNS = {*_LONG_NAME_COLUMNS, *(c.name for c in COLUMNS.values() if c.display == "ident")}

_LAYER_COLUMNS = ["layer", *ROLE_BYTE_COLUMNS, "live_at_peak_bytes", "largest_tensor"]

# Leak verdicts as a colour; the others (too few steps, no events, unknown) are neither.
_VERDICT_LEVELS: dict[LeakVerdict, Literal["ok", "warn"]] = {
    LeakVerdict.STABLE: "ok",
    LeakVerdict.GROWING: "warn",
}


def generated_at() -> str:
    """Now, UTC, to the second; ``SOURCE_DATE_EPOCH`` pins it (reproducible reports)."""
    pinned = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    seconds = int(pinned) if pinned.isdigit() else int(time.time())
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def build_view(
    profiles: Sequence[ProfileLike], version: str, *, top: int = MAX_ROWS, predict: bool = False
) -> ReportView:
    """The view of ``profiles``; each table shows ``top`` rows (0: all) and counts the rest;
    ``predict`` asks the records for their batch-size prediction (the HTML report's plot)."""
    views = [_profile_view(p, i, top, predict) for i, p in enumerate(profiles)]
    return ReportView(
        title="traceparse memory report",
        generated_at=generated_at(),
        version=version,
        profiles=views,
    )


def _profile_view(profile: ProfileLike, index: int, top: int, predict: bool) -> ProfileView:
    anchor = f"run-{index + 1}"
    allocators = [
        _allocator_view(summary, f"{anchor}-{j + 1}", top)
        for j, summary in enumerate(profile.summary(predict=predict))
    ]
    return ProfileView(
        run=str(profile.run) if profile.run is not None else "(unnamed run)",
        hosts=[str(h) for h in profile.hosts],
        paths=[str(p) for p in profile.paths],
        anchor=anchor,
        diagnostics=_notes(profile.diagnostics()),
        allocators=allocators,
        profile=profile,
    )


def _allocator_view(s: AllocatorSummaryLike, anchor: str, top: int) -> AllocatorView:
    """One allocator, from its record alone."""
    verdict = str(s.leak_verdict)
    level: Literal["ok", "warn", "unknown"] = _VERDICT_LEVELS.get(
        LeakVerdict.of(s.leak_verdict), "unknown"
    )
    word = str(s.step_unit)
    tables = [builder(s, top) for builder in TABLES]
    if s.step_unit is StepUnit.EXECUTION:  # no step markers: the "steps" are executions
        tables = [_executions(t) for t in tables]
    own = allocator_notes(s)
    leads = [fact for lead in LEADS for fact in lead(s)]
    return AllocatorView(
        host=str(s.host),
        allocator=str(s.allocator),
        anchor=anchor,
        headline=_headline(s, verdict, word),
        verdict=verdict,
        verdict_level=level,
        utilisation=_percent(s.utilisation),
        facts=[*leads, *_facts(s, verdict, word)],
        leads=leads,
        tables=[t for t in tables if t.total_rows],
        diagnostics=_notes(own),
        summary=s,
        attribution_parts=_attribution_parts(s),
    )


def _tensors_table(s: AllocatorSummaryLike, top: int) -> TableView:
    return _table(
        "top_tensors",
        "Largest tensors live at the peak",
        s.top_tensors,
        None,
        limit=top,
    )


def _ops_table(s: AllocatorSummaryLike, top: int) -> TableView:
    return _table("top_ops", "Ops holding memory at the peak", s.top_ops, None, limit=top)


def _scopes_table(s: AllocatorSummaryLike, top: int) -> TableView:
    return _table(
        "top_scopes",
        "Name scopes holding memory at the peak",
        s.top_scopes,
        None,
        limit=top,
    )


def _variables_table(s: AllocatorSummaryLike, top: int) -> TableView:
    return _table(
        "top_variables",
        # Variables made or replaced during the capture are among them then.
        "Largest variables at the peak"
        if (s.before_capture or {}).get("during_variables")
        else "Largest variables alive before the capture",
        s.top_variables,
        None,
        note="shape × dtype of each variable the inventory named on this allocator",
        limit=top,
    )


def _xla_programs_table(s: AllocatorSummaryLike, top: int) -> TableView:
    """XLA programs holding memory at this allocator's peak (none: not shown)."""
    return _table(
        "xla_programs",
        "XLA programs holding memory at the peak",
        s.xla_programs,
        ["xla_program", "allocations", "allocated_bytes"],
        limit=top,
    )


def _xla_buffers_table(s: AllocatorSummaryLike, top: int) -> TableView:
    """The largest HLO buffers live at this allocator's peak (none: not shown)."""
    return _table(
        "xla_buffers",
        "Largest XLA buffers live at the peak",
        s.xla_buffers,
        ["xla_buffer", "op", "dtype", "shape", "allocated_bytes"],
        limit=top,
    )


def step_word(steps: pd.DataFrame, host: str, allocator: str) -> str:
    """The word for a step: "execution" where the capture has no step markers, else "step"."""
    return str(step_unit(steps, host, allocator))


def _executions(table: TableView) -> TableView:
    """A table of an allocator without step markers: its step column names executions."""
    headers = ["Execution" if h == "Step" else h for h in table.headers]
    title = table.title
    if table.key == "steps":
        title = "Executions (no step markers: TensorFlow's step ids, numbered in time order)"
    return dataclasses.replace(table, headers=headers, title=title)


def _where(s: AllocatorSummaryLike, word: str = "step") -> str:
    parts = []
    if not is_missing(s.peak_time_ps):
        parts.append(f"at {format_duration_ps(s.peak_time_ps)}")
    if not is_missing(s.peak_step):
        parts.append(f"{word} {int(s.peak_step)}")  # type: ignore[arg-type]
    return ", ".join(parts)


def _headline(s: AllocatorSummaryLike, verdict: str, word: str = "step") -> str:
    peak = f"Peak {format_bytes(s.peak_bytes)}"
    if not is_missing(s.capacity_bytes):
        peak += f" of {format_bytes(s.capacity_bytes)}"
        if not is_missing(s.utilisation):
            peak += f" ({_percent(s.utilisation)})"
    where = _where(s, word)
    if where:
        peak += f" {where}"
    return f"{peak}; leak check: {verdict}"


def _percent(fraction: float | None) -> str:
    """A percentage that never reads "0.0%" for a use that is small but real."""
    if not is_missing(fraction) and 0 < fraction < 0.0005:  # type: ignore[operator]
        return "<0.1%"
    return format_percent(fraction)


def _facts(s: AllocatorSummaryLike, verdict: str, word: str = "step") -> list[Fact]:
    capacity_detail = (
        f"{_percent(s.utilisation)} used at the peak" if not is_missing(s.utilisation) else ""
    )
    # One verdict and the figure that goes with it: "+8 MiB per step" only when growing.
    name = f"{s.allocator} on {s.host}"
    leak_text = leak_sentence(s.leak, name=name)
    growth_text = leak_growth(s.leak) if s.leak else "-"
    split = s.before_capture
    before = []
    if split and (
        split.get("unnamed_bytes")
        or split.get("xla_parameters")
        or any(split.get(f"{role}_variables") for role in ("weight", "optimizer", "other"))
    ):
        # Variables made or replaced during the capture are named too: then the line
        # is about every variable at the peak, not only the bytes from before.
        label = "Variables at the peak" if split.get("during_variables") else "Before the capture"
        # The figure heads the card; the sentence that splits it is its detail (issue 52:
        # the HTML set the whole sentence in the headline font).
        total = _before_total(split, unnamed=not split.get("during_variables"))
        before = [Fact(label, format_bytes(total), before_capture_text(split))]
    held = (s.prediction or {}).get("held")
    if not before and held and (held.get("own_held_bytes") or held.get("earlier_layers")):
        # No inventory and no compiled parameters: the prediction's reading of them.
        text = held_before_text(held)
        before = [Fact("Before the capture", format_bytes(held["held_before_bytes"]), text)]
    return [
        Fact("Peak in use", format_bytes(s.peak_bytes), _where(s, word)),
        *before,
        Fact("Capacity", format_bytes(s.capacity_bytes), capacity_detail),
        Fact("Leak check", verdict, leak_text, leak_line(s.leak, verdict, name=name)),
        Fact("Growth", growth_text),
        Fact("Heap at peak", format_bytes(s.heap_bytes)),
        Fact("Reserved at peak", format_bytes(s.reserved_bytes)),
        Fact("Fragmentation at peak", format_percent(s.fragmentation)),
        Fact(
            "Allocations",
            format_count(s.allocations),
            f"{format_count(s.live_at_peak)} live at the peak",
        ),
    ]


def _before_total(split: dict[str, Any], *, unnamed: bool) -> int:
    """The variables' bytes ``before_capture_text`` splits (or the XLA parameters'),
    with ``unnamed`` the bytes from before the capture no variable names too."""
    if "xla_parameter_bytes" in split:
        named = int(split.get("xla_parameter_bytes") or 0)
    else:
        named = sum(
            int(split.get(f"{role}_bytes") or 0) for role in ("weight", "optimizer", "other")
        )
    return named + (int(split.get("unnamed_bytes") or 0) if unnamed else 0)


def held_before_text(held: dict[str, Any]) -> str:
    """``43.1 MiB the model's weights and optimizer state, read off their gradients;
    184 MiB earlier work in this process (...)``: a prediction's ``held`` (a capture
    with no variable inventory)."""
    parts = []
    own, other = int(held.get("own_held_bytes") or 0), int(held.get("other_held_bytes") or 0)
    if own:
        parts.append(
            f"{format_bytes(own)} the model's weights and optimizer state, read off their gradients"
        )
    layer, earlier = held.get("earlier_layer"), held.get("earlier_layers")
    if other and earlier and isinstance(layer, str):
        parts.append(
            f"{format_bytes(other)} earlier work in this process (Keras had built {earlier} "
            f"layers of its kind before this model's {layer}: other models were made first; "
            "a fresh process would not hold it)"
        )
    elif other:
        parts.append(f"{format_bytes(other)} not named")
    return "; ".join(parts)


def before_capture_text(split: dict[str, Any]) -> str:
    """``16 MiB weights in 6 variables, 32 MiB Adam state in 12 variables, 8 MiB not named``.

    The roles' bytes are the variables' shape x dtype; "not named" is the rest
    of what was allocated before the capture and is live at the peak.
    """

    def count(n: int) -> str:
        return f"{format_count(n)} variable" + ("" if n == 1 else "s")

    if "xla_parameter_bytes" in split:
        return _parameters_text(split)
    parts = []
    if split.get("weight_variables"):
        parts.append(
            f"{format_bytes(split['weight_bytes'])} weights in {count(split['weight_variables'])}"
        )
    if split.get("optimizer_variables"):
        name = split.get("optimizer")
        label = f"{OPTIMIZER_NAMES.get(name, name)} state" if name else "optimizer state"
        parts.append(
            f"{format_bytes(split['optimizer_bytes'])} {label} "
            f"in {count(split['optimizer_variables'])}"
        )
    if split.get("other_variables"):
        parts.append(
            f"{format_bytes(split['other_bytes'])} other variables "
            f"in {count(split['other_variables'])}"
        )
    untraced = [
        (
            int(split.get(f"{role}_untraced_variables") or 0),
            int(split.get(f"{role}_untraced_bytes") or 0),
        )
        for role in ("weight", "optimizer", "other")
        if split.get(f"{role}_variables")
    ]
    for i, (n, size) in enumerate(untraced):
        if n:  # alive, but never in the allocator's counters (issue 36)
            parts[i] += f" (and {format_count(n)} under 256 KiB, {format_bytes(size)}, untraced)"
    if not parts:
        parts.append("no variable the inventory names")
    during = int(split.get("during_variables") or 0)
    if during:
        parts[-1] += f" ({format_count(during)} made or replaced during the capture)"
    what = "from before the capture " if during else ""
    parts.append(f"{format_bytes(split.get('unnamed_bytes', 0))} {what}not named")
    return ", ".join(parts)


def _parameters_text(split: dict[str, Any]) -> str:
    """``3 MiB read as parameters by XLA program f (6 parameters: 3 × float32[256,512],
    ...), 894 KiB not named``: no inventory, so the compiled programs' parameters."""
    n = int(split.get("xla_parameters") or 0)
    if not n:
        head = "no parameter of an XLA program that ran"
    else:
        programs = int(split.get("xla_programs") or 0)
        by = (
            f"XLA program {split['xla_program']}"
            if split.get("xla_program")
            else f"{format_count(programs)} XLA programs"
        )
        what = f"{format_count(n)} parameter" + ("" if n == 1 else "s")
        shapes = split.get("xla_parameter_shapes")
        head = (
            f"{format_bytes(split.get('xla_parameter_bytes', 0))} read as parameters by {by} "
            f"({what}{': ' + shapes if shapes else ''})"
        )
    return f"{head}, {format_bytes(split.get('unnamed_bytes', 0))} not named"


def _format(column: str, value: Any, kind: TermKind) -> Cell:
    """One value in human units, chosen by the column's name (as in the terminal)."""
    if column in _NAME_COLUMNS:
        if is_missing(value):
            # Only a missing op or scope means "no op recorded"; a weight belongs to nothing.
            return Cell(NO_OP if column in ("op", "scope") else "-")
        text = shorten(str(value), MAX_REPORT_CELL_WIDTH)
        return Cell(text, "name" if column in _LONG_NAME_COLUMNS else "ident")
    text = shorten(format_cell(value, kind), MAX_REPORT_CELL_WIDTH)
    return Cell(text, "number" if kind in NUMERIC_KINDS else "text")


def _notes(notes: Sequence[Any]) -> list[str]:
    """Diagnostics for the page: each cut to MAX_NOTE_WIDTH (a note may quote a
    crafted name of megabytes; the JSON report keeps them whole)."""
    return [shorten(str(note), MAX_NOTE_WIDTH) for note in notes]


def _header(column: str) -> str:
    """The column's declared header (``Column.title``), or its name in words."""
    declared = COLUMNS.get(column)
    if declared is not None:
        return declared.title
    words = column.removesuffix("_bytes").removesuffix("_ps").replace("_", " ")
    return words[:1].upper() + words[1:]


def _kind(frame: pd.DataFrame, column: str) -> TermKind:
    return "text" if column in _NAME_COLUMNS else column_kind(column, frame[column].dtype)


def _table(
    key: str,
    title: str,
    frame: pd.DataFrame | None,
    wanted: Sequence[str] | None,
    *,
    limit: int = MAX_ROWS,
    note: str = "",
) -> TableView:
    """``frame`` as a table of its first ``limit`` rows (0: all), counting them all."""
    if frame is None or len(frame) == 0:
        return TableView(key, title, [], [], [], 0)
    # Without a choice: the frame's columns, less those declared not shown by default.
    columns = (
        [c for c in wanted if c in frame.columns]
        if wanted
        else [c for c in frame.columns if c not in COLUMNS or COLUMNS[c].shown]
    )
    kinds = [_kind(frame, c) for c in columns]
    shown = frame.head(limit) if limit else frame
    rows = [
        [_format(c, v, k) for c, v, k in zip(columns, record, kinds, strict=True)]
        for record in shown[columns].astype(object).itertuples(index=False, name=None)
    ]
    return TableView(
        key=key,
        title=title,
        headers=[_header(c) for c in columns],
        numeric=[k in NUMERIC_KINDS for k in kinds],
        rows=rows,
        total_rows=len(frame),
        note=note,
        columns=columns,
    )


def _attribution_parts(s: AllocatorSummaryLike) -> list[tuple[str, int]]:
    parts = []
    named = "variable_bytes" in s.attribution or "xla_parameter_bytes" in s.attribution
    for key, value in s.attribution.items():
        if key == "in_use_bytes" or is_missing(value):
            continue
        if key in _XLA_PARTS and not value:  # only captures with linked XLA slabs show them
            continue
        label = ATTRIBUTION_LABELS.get(key, _header(key).lower())
        if named and key == "before_capture_bytes":
            label = _UNNAMED_LABEL
        parts.append((label, int(value)))
    return parts


def _attribution_table(s: AllocatorSummaryLike, top: int = 0) -> TableView:
    """Every part, whatever ``top`` says: the rows add up to the bytes in use."""
    total = s.attribution.get("in_use_bytes")
    if is_missing(total):
        total = s.peak_bytes
    rows = []
    for label, value in _attribution_parts(s):
        share = value / total if not is_missing(total) and total else None
        rows.append(
            [
                Cell(label),
                Cell(format_bytes(value), "number"),
                Cell(format_percent(share), "number"),
            ]
        )
    has_total = bool(rows) and not is_missing(total)
    if has_total:
        rows.append(
            [
                Cell("in use at the peak"),
                Cell(format_bytes(total), "number"),
                Cell("100.0%", "number"),
            ]
        )
    return TableView(
        key="attribution",
        title="Where the bytes in use at the peak come from",
        headers=["Component", "Bytes", "Share"],
        numeric=[False, True, True],
        rows=rows,
        total_rows=len(rows),
        total_last=has_total,
    )


def _layers_table(s: AllocatorSummaryLike, top: int) -> TableView:
    """The largest layers holding bytes, then the rows for what no layer holds (kept:
    with all the layers they sum to the bytes in use at the peak)."""
    mine = s.layers
    if mine is None or mine.empty:
        return _table("layers", "", None, None)
    explicit = mine["layer"].astype(object).isin(EXPLICIT_ROWS)
    if explicit.all():  # no model layer in this capture: the ops and scopes say it all
        return _table("layers", "", None, None)
    named = mine[~explicit]
    shown = pd.concat([named.head(top) if top else named, mine[explicit]])
    table = _table("layers", "Layers holding memory at the peak", shown, _LAYER_COLUMNS, limit=0)
    table.total_rows = len(mine)
    return table


def _steps_table(s: AllocatorSummaryLike, top: int) -> TableView:
    mine = s.steps
    if mine is None or mine.empty:
        return _table("steps", "Steps", None, None)
    columns = [c for c in STEP_COLUMNS if c in mine.columns]  # the JSON has every column
    if len(columns) < 3:  # an unfamiliar layout: show it all
        columns = [c for c in mine.columns if c not in ("host", "allocator")]
    limit = 0 if top == 0 else max(top, MAX_STEP_ROWS)
    return _table("steps", "Steps", mine, columns, limit=limit)


# Facts said before an allocator's own (its peak, capacity, ...): each a function
# of the record giving none when its section is absent. A section that must be
# read first (why the run failed) is one function here.
LEADS: list[Callable[[AllocatorSummaryLike], list[Fact]]] = []

# The tables of an allocator, in the order every output shows them: each a
# function of the record and the rows to show. A new section of the record is
# one more function here (a table with no rows is not shown).
TABLES: list[Callable[[AllocatorSummaryLike, int], TableView]] = [
    _tensors_table,
    _ops_table,
    _scopes_table,
    _layers_table,
    _attribution_table,
    _variables_table,
    _xla_programs_table,
    _xla_buffers_table,
    _steps_table,
]
