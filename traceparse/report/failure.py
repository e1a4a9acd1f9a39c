"""The failure section reports open with when a capture ended in an exception (issue 39).

The section (the failure, who held the bytes at its moment by layer and by op,
every row) is built in ``records.failure``; ``markdown_failure`` and
``html_failure`` render it, cut to ``TOP`` rows a table and saying how many
they left out. A capture that did not fail has no section and renders nothing,
so reports of healthy captures are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traceparse.output.failure import (
    failure_sentence,
    failure_title,
    first_line,
    stack_lines,
    to_free_sentence,
)
from traceparse.output.units import format_bytes, format_percent
from traceparse.records.failure import failure_sections
from traceparse.report.escape import html_text, md_code, md_text, one_line

# Rows of each "at the failure" table.
TOP = 10
# Frames of the stack that defined the failing node shown.
FRAMES = 8


def _left_out(shown: int, total: int) -> str:
    """The line under a failure table cut to ``shown`` of ``total`` rows."""
    return f"{shown} of {total} rows; the JSON report has all."


# -- Markdown ------------------------------------------------------------------------


def markdown_failure(profile: Any, top: int = TOP) -> list[str]:
    """Markdown lines opening a run's section (``top`` rows a table); empty when the
    capture did not fail."""
    out: list[str] = []
    for view in failure_sections(profile):
        f = view.failure
        sentence = failure_sentence(
            f,
            view.holders(),
            code=lambda s: md_code(s, table=False),
            text=lambda s: md_text(one_line(s)[:200]),
        )
        out += [
            "> [!CAUTION]",
            f"> **{failure_title(f)}** on {md_code(f.host, table=False)}: {sentence}",
            "",
        ]
        free = to_free_sentence(f)
        if free:
            out += [md_text(free), ""]
        for title, table in view.tables():
            if table.empty:
                continue
            out += [
                f"**In use at the failure, by {title}**",
                "",
                f"| {title.capitalize()} | Bytes | Share |",
                "| --- | --: | --: |",
            ]
            for name, size, share in table.head(top).itertuples(index=False):
                out.append(f"| {md_code(name)} | {format_bytes(size)} | {format_percent(share)} |")
            out.append("")
            if len(table) > top:
                out += [f"_{_left_out(top, len(table))}_", ""]
        heading, frames = stack_lines(f, FRAMES)
        if frames:
            out += [f"**{heading}**", ""]
            out += [f"- {md_code(line, table=False)}" for line in frames]
            out.append("")
        if not f.out_of_memory and first_line(f.message) != f.message.strip():
            out += [f"Message: {md_code(one_line(f.message)[:500], table=False)}", ""]
    return out


# -- HTML -----------------------------------------------------------------------------


def html_failure(profile: Any, top: int = TOP) -> str:
    """The HTML block opening a run's section (``top`` rows a table); empty when the
    capture did not fail."""
    parts: list[str] = []
    for view in failure_sections(profile):
        f = view.failure
        sentence = failure_sentence(
            f,
            view.holders(),
            code=lambda s: f"<code>{html_text(one_line(s)[:200])}</code>",
            text=lambda s: html_text(one_line(s)[:200]),
        )
        parts.append('<section class="failure diagnostics">')
        parts.append(
            f"<p><strong>{html_text(failure_title(f))}</strong> on "
            f"<code>{html_text(one_line(f.host))}</code>: {sentence}</p>"
        )
        free = to_free_sentence(f)
        if free:
            parts.append(f"<p>{html_text(free)}</p>")
        for title, table in view.tables():
            if table.empty:
                continue
            rows = "".join(
                f"<tr><td><code>{html_text(one_line(name))}</code></td>"
                f'<td class="num">{format_bytes(size)}</td>'
                f'<td class="num">{format_percent(share)}</td></tr>'
                for name, size, share in table.head(top).itertuples(index=False)
            )
            parts.append(
                f"<h4>In use at the failure, by {title}</h4>"
                f'<div class="scroll"><table><thead><tr><th>{title.capitalize()}</th>'
                "<th class=num>Bytes</th><th class=num>Share</th></tr></thead>"
                f"<tbody>{rows}</tbody></table></div>"
            )
            if len(table) > top:
                parts.append(f'<p class="note">{html_text(_left_out(top, len(table)))}</p>')
        heading, frames = stack_lines(f, FRAMES)
        if frames:
            items = "".join(f"<li><code>{html_text(one_line(line))}</code></li>" for line in frames)
            parts.append(f"<h4>{heading}</h4><ul>{items}</ul>")
        parts.append("</section>")
    return "\n".join(parts)


def failure_lines(profile: Any) -> Sequence[str]:
    """The plain sentences (no tables), for the notebook's short view and the gate."""
    return [failure_sentence(v.failure, v.holders()) for v in failure_sections(profile)]


def failure_records(profile: Any) -> list[dict[str, Any]]:
    """The failures as JSON data (every field, the sentence, the breakdown at the
    failure by layer and op), for the JSON report and ``summary --format json``."""
    from traceparse.output.failure import failure_record
    from traceparse.output.jsonvalues import json_records

    return [
        {
            **failure_record(view.failure),
            "by_layer": json_records(view.by_layer),
            "by_op": json_records(view.by_op),
        }
        for view in failure_sections(profile)
    ]
