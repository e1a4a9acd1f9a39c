"""The records: one per allocator of a run, every section a renderer shows built once.

Between the analyses and the outputs: ``build_records`` turns the analyses'
tables into ``AllocatorRecord`` s (``Profile.summary()`` hands them out), and
the terminal, the reports, the JSON and the gate render them. ``to_dict()`` is
the one JSON of an allocator; ``docs/record-schema.json`` documents it.

Sections made from a profile on demand (the failure, the timeline, the flame
tree, the gate's per-op requests and padded rows) are listed, each with its
builder and its views, in ``records.sections.PROFILE_SECTIONS``. Renderers read
this package only, never ``analysis`` or ``core`` (tests/test_layout.py):
``records.terms`` hands them the analyses' names and limits, and
``records.source.RecordSource`` is what they may read off a Profile.
"""

from traceparse.records.allocator import (
    LIVE_PARTS,
    RECORD_VERSION,
    SECTIONS,
    AllocatorRecord,
    LeakVerdict,
    Note,
    Part,
    StepUnit,
    fullest,
    live_at_peak_bytes,
    notes_of,
    owned,
    step_unit,
)
from traceparse.records.build import build_records

__all__ = [
    "LIVE_PARTS",
    "RECORD_VERSION",
    "SECTIONS",
    "AllocatorRecord",
    "LeakVerdict",
    "Note",
    "Part",
    "StepUnit",
    "build_records",
    "fullest",
    "live_at_peak_bytes",
    "notes_of",
    "owned",
    "step_unit",
]
