"""The sections built from a profile on demand, beside the allocator record's own
(``records.allocator.SECTIONS``): one builder here, one view in a renderer each.

An allocator record's sections are fields of ``AllocatorRecord`` (built by
``records.build``, written by ``to_dict``). These are made from a profile's tables
when a renderer asks, since not every output needs them (a timeline series, a
flame tree, the gate's per-op requests) or they belong to a host, not to an
allocator (the failure, the what-ifs): each is listed here with its builder and the renderer
function that draws it (by dotted name: a stage never imports a later one). A new
section is a builder module in ``records/``, an entry here, and its view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traceparse.records.failure import failure_sections
from traceparse.records.flame import flame_tree
from traceparse.records.gate import op_requests, padding_rows
from traceparse.records.timeline import timeline_section
from traceparse.records.whatif import whatif_section

__all__ = ["PROFILE_SECTIONS", "ProfileSection"]


@dataclass(frozen=True)
class ProfileSection:
    """A section: its name, its builder, and the renderer functions that draw it
    (``module:function``)."""

    name: str
    build: Callable[..., Any]
    views: tuple[str, ...]
    doc: str


PROFILE_SECTIONS = {
    s.name: s
    for s in (
        ProfileSection(
            "failure",
            failure_sections,
            (
                "traceparse.report.failure:markdown_failure",
                "traceparse.report.failure:html_failure",
                "traceparse.report.failure:failure_records",
                "traceparse.gate.failure:out_of_memory_results",
                "traceparse.cli._failure_view:print_failure_detail",
                "traceparse.batching.tasks:_out_of_memory",
            ),
            "Per failed host: the failure and who held the bytes then, by layer and by op.",
        ),
        ProfileSection(
            "timeline",
            timeline_section,
            ("traceparse.report.html:_charts",),
            "One allocator's bytes in use over time, its start, its host's step spans.",
        ),
        ProfileSection(
            "flame",
            flame_tree,
            ("traceparse.report.flame:flame_section",),
            "The bytes made during the capture at the peak, by the stack that made them.",
        ),
        ProfileSection(
            "op_requests",
            op_requests,
            ("traceparse.gate.figures:figures_of",),
            "Per op: bytes requested, those live at the peak, the largest shapes.",
        ),
        ProfileSection(
            "padding",
            padding_rows,
            ("traceparse.gate.budgets:_top_padding",),
            "The allocations live at the peak the allocator padded, most first.",
        ),
        ProfileSection(
            "whatif",
            whatif_section,
            (
                "traceparse.report.whatif:markdown_whatif",
                "traceparse.report.whatif:html_whatif",
                "traceparse.report.whatif:whatif_json",
            ),
            "Per allocator: each change (precision, optimizer, remat) ranked by bytes saved "
            "at the peak, with the bounds, the largest batch it allows and its cost.",
        ),
    )
}
