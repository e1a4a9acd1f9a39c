"""The what-if section (``records.whatif.WhatIfRecord``) as Markdown and HTML.

Two places show it: ``traceparse advise``'s own page (``whatif_markdown``,
``whatif_html``) and the reports' section of a run (``markdown_whatif``,
``html_whatif``, ``whatif_json``: the section ``whatif`` of
``records.sections.PROFILE_SECTIONS``, built once per profile). Both draw the
same table per allocator from the record's rows.
"""

from __future__ import annotations

from typing import Any

from traceparse.output.sentences import largest_batch_cell
from traceparse.records.whatif import WhatIfRecord, WhatIfRow, whatif_section
from traceparse.report.escape import html_text, md_text
from traceparse.units import format_bytes

HEADER = ("change", "saved at the peak", "peak [low, high]", "largest batch", "cost")
_NUMERIC = (False, True, True, True, False)
FOOTNOTE = "Predicted from the capture (docs/whatif.md); the bounds hold what is uncertain."
# The reports' section, said once for Markdown and HTML.
SECTION_TITLE = "What would save memory"
SECTION_LEAD = (
    "Each change predicted from this capture at its batch size: its allocations resized "
    "by what the change does and replayed through the allocator model, ranked by bytes "
    "saved at the peak, with the bounds, the largest batch it allows in the allocator's "
    "capacity, and what it costs (docs/whatif.md). Predictions, not measurements: "
    "traceparse advise PATH --capacity SIZE gives them for another capacity."
)


def row_cells(r: WhatIfRow) -> tuple[str, ...]:
    """A row's cells in ``HEADER``'s order (the terminal's ``advise`` draws them too)."""
    bounds = (
        f"{format_bytes(r.peak_bytes)} [{format_bytes(r.low_bytes)}, {format_bytes(r.high_bytes)}]"
    )
    saved = format_bytes(r.saved_bytes, signed=r.saved_bytes < 0)
    largest = largest_batch_cell(r.largest_batch)
    return (r.change, saved, bounds, largest, r.cost)


def _title(record: WhatIfRecord, key: tuple[str, str]) -> tuple[str, WhatIfRow]:
    first = next(r for r in record.rows if (r.host, r.allocator) == key)
    failed = (
        ""
        if first.failed_request is None
        else f" with the request it ran out of memory at ({first.failed_request}) asked again"
    )
    return (
        f"{key[1]} ({key[0]}): captured peak {format_bytes(first.captured_peak_bytes)} "
        f"at batch {first.batch_size}{failed}"
        + (f"; {unchanged}" if (unchanged := unchanged_largest(first)) else ""),
        first,
    )


def unchanged_largest(first: WhatIfRow) -> str:
    """The words that give the largest batch without a change, the one every
    change's is read against (empty where none was found: not searched, no
    capacity, or not even 1 fits, as the changes' cells say)."""
    if first.capacity_bytes is None or first.captured_largest_batch is None:
        return ""
    return (
        f"largest batch without a change: {largest_batch_cell(first.captured_largest_batch)} "
        f"in {format_bytes(first.capacity_bytes)}"
    )


def allocator_rows(record: WhatIfRecord, key: tuple[str, str]) -> list[WhatIfRow]:
    return [r for r in record.rows if (r.host, r.allocator) == key]


def _not_searched(record: WhatIfRecord) -> str:
    """The line saying the largest batches (or the whole section) were left out;
    empty where they were searched."""
    if record.left_out:
        return (
            "The what-ifs were left out: predicting each change replays the capture's "
            "memory events several times, past the report's replay budget; traceparse "
            "advise PATH gives them."
        )
    if record.searched:
        return ""
    return (
        "The largest batch each change allows was not searched: the capture's memory "
        "events are past the report's replay budget; traceparse advise PATH gives it."
    )


def _markdown_tables(record: WhatIfRecord, heading: str) -> list[str]:
    lines: list[str] = []
    for key in record.allocators():
        title, _ = _title(record, key)
        lines += [f"{heading} {md_text(title)}", "", "| " + " | ".join(HEADER) + " |"]
        lines.append("|" + "".join("--:|" if n else "---|" for n in _NUMERIC))
        for r in allocator_rows(record, key):
            lines.append("| " + " | ".join(md_text(c) for c in row_cells(r)) + " |")
        lines.append("")
    return lines


def _html_tables(record: WhatIfRecord, heading: str) -> list[str]:
    parts: list[str] = []
    for key in record.allocators():
        title, _ = _title(record, key)
        parts.append(f"<{heading}>{html_text(title)}</{heading}>")
        head = "".join(
            f'<th class="num">{html_text(h)}</th>' if n else f"<th>{html_text(h)}</th>"
            for h, n in zip(HEADER, _NUMERIC, strict=True)
        )
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="num">{html_text(c)}</td>' if n else f"<td>{html_text(c)}</td>"
                for c, n in zip(row_cells(r), _NUMERIC, strict=True)
            )
            + "</tr>"
            for r in allocator_rows(record, key)
        )
        parts.append(
            f'<div class="scroll"><table class="whatif"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )
    return parts


# -- traceparse advise's own page -----------------------------------------------------


def whatif_markdown(record: WhatIfRecord) -> str:
    lines = [f"# What would save memory: {md_text(record.path)}", ""]
    lines += _markdown_tables(record, "##")
    lines.append(FOOTNOTE)
    return "\n".join(lines) + "\n"


def whatif_html(record: WhatIfRecord) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>What would save memory: {html_text(record.path)}</title></head><body>",
        f"<h1>What would save memory: {html_text(record.path)}</h1>",
    ]
    parts += _html_tables(record, "h2")
    parts.append(f"<p>{html_text(FOOTNOTE)}</p>")
    parts.append("</body></html>\n")
    return "".join(parts)


# -- the reports' section of a run ----------------------------------------------------


def markdown_whatif(profile: Any) -> list[str]:
    """Markdown lines closing a run's section; empty where the profile has no
    what-if section (``records.whatif.whatif_section``)."""
    record = whatif_section(profile)
    if record is None or not (record.rows or record.left_out):
        return []
    lines = [f"### {SECTION_TITLE}", "", md_text(SECTION_LEAD), ""]
    lines += _markdown_tables(record, "####")
    missing = _not_searched(record)
    return lines + ([md_text(missing), ""] if missing else [])


def html_whatif(profile: Any) -> str:
    """The HTML ``<section>`` closing a run's section; empty where the profile has none."""
    record = whatif_section(profile)
    if record is None or not (record.rows or record.left_out):
        return ""
    parts = [
        '<section class="whatif">',
        f"<h3>{html_text(SECTION_TITLE)}</h3>",
        f'<p class="note">{html_text(SECTION_LEAD)}</p>',
        *_html_tables(record, "h4"),
    ]
    missing = _not_searched(record)
    if missing:
        parts.append(f'<p class="note">{html_text(missing)}</p>')
    parts.append("</section>")
    return "\n".join(parts)


def whatif_json(profile: Any) -> dict[str, Any] | None:
    """The JSON report's ``whatif`` of a run: the record's ``to_dict``, null where
    the profile has no what-if section (so every report has the key)."""
    record = whatif_section(profile)
    return None if record is None else record.to_dict()
