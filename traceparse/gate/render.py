"""Budget results for people: Markdown for CI job summaries, plain tables for test failures.

Names from the capture are Markdown code spans (``md_code``) and free text is
escaped (``md_text``), so an op name cannot break a table or inject markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from traceparse.gate.budgets import Result
from traceparse.output.units import format_bytes, format_percent
from traceparse.report.escape import md_code, md_text

if TYPE_CHECKING:
    from traceparse.records.source import RecordSource

__all__ = ["check_markdown", "failure_message", "top_tensors_lines", "verdict_line"]

_MARK = {"pass": "✅ pass", "fail": "❌ fail", "skip": "⚪ skipped"}
TOP_TENSORS = 10


def verdict_line(results: Sequence[Result]) -> str:
    """``"2 of 5 budgets breached"`` / ``"all 5 budgets within limits"`` (and skipped ones)."""
    failed = sum(r.failed for r in results)
    skipped = sum(r.status == "skip" for r in results)
    judged = len(results) - skipped
    if failed:
        text = f"{failed} of {judged} budget{'s' if judged != 1 else ''} breached"
    elif judged == 1:
        text = "the budget is within its limit"
    elif judged:
        text = f"all {judged} budgets within limits"
    else:
        text = "no budget could be judged"
    if skipped:
        text += f" ({skipped} skipped)"
    return text


def _value(result: Result, value: float | None) -> str:
    if value is None:
        return "-"
    if result.unit == "fraction":
        return format_percent(value)
    if result.unit == "bytes_per_step":
        return f"{format_bytes(value, signed=True)}/step"
    return format_bytes(value)


def check_markdown(results: Sequence[Result], source: str, *, error: str | None = None) -> str:
    """A Markdown section for ``$GITHUB_STEP_SUMMARY``: verdict, one row per result, breaches."""
    failed = any(r.failed for r in results) or error is not None
    mark = "❌" if failed else "✅"
    out = [f"## {mark} traceparse check: {md_text(source)}", ""]
    if error is not None:
        out += [f"**Error:** {md_text(error)}", ""]
        return "\n".join(out) + "\n"
    out += [f"**{md_text(verdict_line(results))}**", ""]
    if results:
        out += [
            "| Budget | Allocator | Host | Measured | Allowed | Result |",
            "| --- | --- | --- | ---: | ---: | --- |",
        ]
        for r in results:
            out.append(
                f"| {r.budget} | {md_code(r.allocator)} | {md_code(r.host)} | "
                f"{_value(r, r.measured)} | {_value(r, r.allowed)} | {_MARK[r.status]} |"
            )
        out.append("")
    for r in results:
        if r.status == "pass":
            if r.caveat:
                where = f"{md_code(r.allocator, table=False)} on {md_code(r.host, table=False)}"
                out += [f"**Note, {r.budget}, {where}:** {md_text(r.caveat)}", ""]
            continue
        where = f"{md_code(r.allocator, table=False)} on {md_code(r.host, table=False)}"
        out.append(f"**{r.budget}, {where}:** {md_text(r.message)}")
        out.append("")
        if r.contributors:
            out += ["| Top contributor | Bytes | Detail |", "| --- | ---: | --- |"]
            for c in r.contributors:
                out.append(
                    f"| {md_code(c.name)} | {format_bytes(c.bytes, signed=c.signed)} | "
                    f"{md_text(c.detail) or '-'} |"
                )
            out.append("")
    return "\n".join(out) + "\n"


def top_tensors_lines(
    profile: RecordSource, host: str, allocator: str, top: int = TOP_TENSORS
) -> list[str]:
    """A plain aligned table of the largest allocations live at the allocator's peak.

    Bytes in use that no allocation holds (from before the capture, reserved)
    get a row each, and the allocations left out are summed, so the table adds
    up to the bytes in use at the peak.
    """
    from traceparse.output.cells import (
        UNOWNED_ROWS,
        cell_text,
        column_kind,
        render_plain_table,
    )
    from traceparse.output.units import is_missing

    live = profile.live_at_peak(allocator=allocator, host=host)
    columns = ["op", "dtype", "shape", "region", "requested_bytes", "allocated_bytes", "step"]
    headers = ["op", "dtype", "shape", "region", "requested", "allocated", "step"]
    if profile.step_markers.empty:
        # Without markers the step is TensorFlow's raw step id: noise to a reader.
        columns, headers = columns[:-1], headers[:-1]
    shown = live.head(top)[columns]
    kinds = {c: column_kind(c, shown[c].dtype) for c in columns}
    rows = [
        [cell_text(c, value, kinds[c]) for c, value in zip(columns, row, strict=True)]
        for row in shown.astype(object).itertuples(index=False, name=None)
    ]
    parts = next(
        (s.attribution for s in profile.summary() if (s.host, s.allocator) == (host, allocator)),
        {},
    )
    for part, label, region in UNOWNED_ROWS:
        value = parts.get(part)
        if value is None or is_missing(value) or not int(value):
            continue
        row = {"op": label, "region": region, "allocated_bytes": int(value)}
        rows.append([cell_text(c, row.get(c), kinds[c]) if c in row else "-" for c in columns])
    lines = render_plain_table(
        headers, rows, [kinds[c] != "text" for c in columns], width=None, indent="  "
    )
    if len(live) > top:
        rest = live["allocated_bytes"].iloc[top:].fillna(0).sum()
        lines.append(
            f"  ... and {len(live) - top} more allocations live at the peak "
            f"({format_bytes(int(rest))})"
        )
    return lines


def failure_message(
    test: str, results: Sequence[Result], profile: RecordSource, report: str | None = None
) -> str:
    """The text a test over budget fails with: the breaches, then the top tensors."""
    breaches = [r for r in results if r.failed]
    out = [f"tf_memory: {verdict_line(results)} in {test}"]
    out.extend(f"  {r.line()}" for r in breaches)
    shown: set[tuple[str, str]] = set()
    peaks = {(s.host, s.allocator): s for s in profile.summary()}
    for r in breaches:
        key = (r.host, r.allocator)
        if key in shown or key not in peaks:
            continue
        shown.add(key)
        summary = peaks[key]
        out += [
            "",
            f"Top tensors live at the peak of {r.where} "
            f"({format_bytes(summary.peak_bytes)} in use, {summary.live_at_peak} allocations):",
        ]
        out += top_tensors_lines(profile, r.host, r.allocator)
    if report:
        out += ["", f"Report: {report}"]
    return "\n".join(out)
