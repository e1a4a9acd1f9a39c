"""Analyses over a ``Profile``'s tables: peak, attribution, roll-ups, steps, leaks, summary.

Each module does one job on whole columns; ``Profile`` exposes them as
properties and methods. Nothing here reads a capture or renders a report.
"""

from traceparse.analysis.attribution import PARTS, attribution_table
from traceparse.analysis.layers import layers_table
from traceparse.analysis.leaks import LeakReport, leak_report
from traceparse.analysis.peak import live_at_peak_table, peak_table, select
from traceparse.analysis.record import AllocatorRecord, LeakVerdict, Part, StepUnit
from traceparse.analysis.rollups import NO_SCOPE, ops_table, scope_of, scopes_table
from traceparse.analysis.steps import steps_table
from traceparse.analysis.summary import AllocatorSummary, build_records, build_summaries

__all__ = [
    "NO_SCOPE",
    "PARTS",
    "AllocatorRecord",
    "AllocatorSummary",
    "LeakReport",
    "LeakVerdict",
    "Part",
    "StepUnit",
    "attribution_table",
    "build_records",
    "build_summaries",
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
