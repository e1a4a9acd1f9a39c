"""A capture's failure on a terminal (issue 39): the sentence ``summary`` and ``run``
open with, and the tables of ``traceparse oom``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceparse.output.failure import (
    failure_sentence,
    failure_title,
    stack_lines,
    to_free_sentence,
)
from traceparse.output.sentences import more_rows
from traceparse.records.failure import failure_sections
from traceparse.report.failure import FRAMES, TOP

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal


def print_failure_headline(profile: Any, term: Terminal) -> bool:
    """The failure sentence of each failed host, before the peak; False when none."""
    views = failure_sections(profile)
    for view in views:
        f = view.failure
        term.line()
        term.line(
            f"On {f.host}: {failure_sentence(f, view.holders())}",
            style="bold red",
        )
    if views:
        term.note("`traceparse oom` shows who held the memory when it failed.")
    return bool(views)


def print_failure_detail(profile: Any, term: Terminal, top: int = TOP) -> bool:
    """The failure, the breakdown at its moment by layer and by op, and how much
    would have had to be freed; False when the capture did not fail."""
    views = failure_sections(profile)
    for view in views:
        f = view.failure
        term.heading(f"{failure_title(f)} on {f.host}", level=2)
        term.line(failure_sentence(f, view.holders()), style="bold red")
        fields = [("Exception", f.exception_type)]
        if f.op:
            fields.append(("Op", f.op))
        if f.requested_bytes is not None:
            fields.append(("Requested", f"{f.requested_bytes:,} bytes"))
        if f.shape or f.dtype:
            fields.append(("Shape × dtype", f"{f.shape or '?'} {f.dtype or '?'}"))
        if f.allocator:
            fields.append(("Allocator", f.allocator + (f" on {f.device}" if f.device else "")))
        elif f.unmatched_allocator:
            fields.append(
                ("Allocator", f"not in this capture (the message names {f.unmatched_allocator})")
            )
        if f.step is not None:
            fields.append(("Step", str(f.step)))
        if f.in_use_bytes is not None:
            fields.append(("In use then", f"{f.in_use_bytes:,} bytes"))
        if f.free_bytes is not None:
            fields.append(("Free then", f"{f.free_bytes:,} bytes"))
        term.line()
        term.fields(fields)
        free = to_free_sentence(f)
        if free:
            term.line()
            term.line(free)
        for title, table in view.tables():
            if table.empty:
                continue
            hidden = len(table) - top
            term.line()
            term.table(
                table.head(top).rename(columns={"name": title}),
                title=f"In use at the failure, by {title}",
                footer=more_rows(hidden, "--top 0 shows all") if hidden > 0 else None,
                kinds={"share": "percent"},
                key=title,
            )
        heading, frames = stack_lines(f, FRAMES)
        if frames:
            term.line()
            term.line(f"{heading}:")
            term.bullets(frames)
    if any(view.failure.out_of_memory for view in views):
        term.note(
            "`traceparse predict PATH --batch N` asks the refused request again at N: "
            "which smaller batch gets past it."
        )
    return bool(views)
