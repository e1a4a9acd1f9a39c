"""Deprecated: the allocator record moved to ``traceparse.records``.

The old spelling keeps working for a release with a ``DeprecationWarning``
(CHANGELOG.md).
"""

from __future__ import annotations

import warnings

from traceparse.records.allocator import (
    LIVE_PARTS,
    OPTIONAL_FIELDS,
    AllocatorRecord,
    LeakVerdict,
    Note,
    Part,
    StepUnit,
    live_at_peak_bytes,
    notes_of,
    owned,
    step_unit,
)

__all__ = [
    "LIVE_PARTS",
    "OPTIONAL_FIELDS",
    "AllocatorRecord",
    "LeakVerdict",
    "Note",
    "Part",
    "StepUnit",
    "live_at_peak_bytes",
    "notes_of",
    "owned",
    "step_unit",
]

warnings.warn(
    "traceparse.analysis.record moved to traceparse.records; the old name goes in a later release",
    DeprecationWarning,
    stacklevel=2,
)
