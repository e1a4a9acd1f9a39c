"""The what-if section (``records.whatif.WhatIfRecord``) as Markdown and HTML."""

from __future__ import annotations

from traceparse.records.whatif import WhatIfRecord, WhatIfRow
from traceparse.report.escape import html_text, md_text
from traceparse.units import format_bytes

HEADER = ("change", "saved at the peak", "peak [low, high]", "largest batch", "cost")


def _cells(r: WhatIfRow) -> tuple[str, ...]:
    bounds = (
        f"{format_bytes(r.peak_bytes)} [{format_bytes(r.low_bytes)}, {format_bytes(r.high_bytes)}]"
    )
    saved = format_bytes(r.saved_bytes, signed=r.saved_bytes < 0)
    largest = "-" if r.largest_batch is None else f"{r.largest_batch:,}"
    return (r.change, saved, bounds, largest, r.cost)


def _title(record: WhatIfRecord, key: tuple[str, str]) -> tuple[str, WhatIfRow]:
    first = next(r for r in record.rows if (r.host, r.allocator) == key)
    return (
        f"{key[1]} ({key[0]}): captured peak {format_bytes(first.captured_peak_bytes)} "
        f"at batch {first.batch_size}",
        first,
    )


def whatif_markdown(record: WhatIfRecord) -> str:
    lines = [f"# What would save memory: {md_text(record.path)}", ""]
    for key in record.allocators():
        title, _ = _title(record, key)
        lines += [f"## {md_text(title)}", "", "| " + " | ".join(HEADER) + " |"]
        lines.append("|" + "---|" * len(HEADER))
        for r in (r for r in record.rows if (r.host, r.allocator) == key):
            lines.append("| " + " | ".join(md_text(c) for c in _cells(r)) + " |")
        lines.append("")
    lines.append("Predicted from the capture (docs/whatif.md); the bounds hold what is uncertain.")
    return "\n".join(lines) + "\n"


def whatif_html(record: WhatIfRecord) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>What would save memory: {html_text(record.path)}</title></head><body>",
        f"<h1>What would save memory: {html_text(record.path)}</h1>",
    ]
    for key in record.allocators():
        title, _ = _title(record, key)
        parts.append(f"<h2>{html_text(title)}</h2><table><tr>")
        parts += [f"<th>{html_text(h)}</th>" for h in HEADER]
        parts.append("</tr>")
        for r in (r for r in record.rows if (r.host, r.allocator) == key):
            parts.append("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in _cells(r)) + "</tr>")
        parts.append("</table>")
    parts.append(
        "<p>Predicted from the capture (docs/whatif.md); the bounds hold what is uncertain.</p>"
    )
    parts.append("</body></html>\n")
    return "".join(parts)
