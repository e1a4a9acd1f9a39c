"""Analyses over a ``Profile``'s tables: peak, attribution, roll-ups, steps, leaks.

Each module does one job on whole columns; ``Profile`` exposes them as
properties and methods. Nothing here reads a capture or renders a report; the
records built from these numbers are ``traceparse.records``.
"""

import warnings
from typing import Any

from traceparse.analysis.attribution import PARTS, attribution_table
from traceparse.analysis.layers import layers_table
from traceparse.analysis.leaks import LeakReport, leak_report
from traceparse.analysis.peak import live_at_peak_table, peak_table, select
from traceparse.analysis.rollups import NO_SCOPE, ops_table, scope_of, scopes_table
from traceparse.analysis.steps import steps_table

__all__ = [
    "NO_SCOPE",
    "PARTS",
    "LeakReport",
    "attribution_table",
    "layers_table",
    "leak_report",
    "live_at_peak_table",
    "ops_table",
    "peak_table",
    "scope_of",
    "scopes_table",
    "select",
    "steps_table",
]

# Names that moved to traceparse.records, kept a release with a DeprecationWarning.
_MOVED = {
    "AllocatorRecord": "record",
    "LeakVerdict": "record",
    "Part": "record",
    "StepUnit": "record",
    "AllocatorSummary": "summary",
    "build_records": "summary",
    "build_summaries": "summary",
}


def __getattr__(name: str) -> Any:
    old = _MOVED.get(name)
    if old is None:
        raise AttributeError(f"module 'traceparse.analysis' has no attribute {name!r}")
    warnings.warn(
        f"traceparse.analysis.{name} moved to traceparse.records.{name}; the old name goes "
        "in a later release",
        DeprecationWarning,
        stacklevel=2,
    )
    with warnings.catch_warnings():  # the shim's own warning would blame this line
        warnings.simplefilter("ignore", DeprecationWarning)
        if old == "record":
            from traceparse.analysis import record as shim
        else:
            from traceparse.analysis import summary as shim  # type: ignore[no-redef]
    return getattr(shim, name)
