"""The analyses' names and limits that renderers say: one definition each, in the
analysis that decides them, handed to renderers here so that they read the
records stage only (tests/test_layout.py)."""

from traceparse.analysis.attribution import PARTS
from traceparse.analysis.failure import Failure
from traceparse.analysis.leaks import MIN_STEPS, LeakReport
from traceparse.analysis.naming import EXPLICIT_ROWS, OPTIMIZER_NAMES
from traceparse.analysis.predict import MAX_BATCH, POOLED_BELOW, Fit
from traceparse.analysis.rollups import scope_of
from traceparse.analysis.steps import STEP_ID

__all__ = [
    "EXPLICIT_ROWS",
    "MAX_BATCH",
    "MIN_STEPS",
    "OPTIMIZER_NAMES",
    "PARTS",
    "POOLED_BELOW",
    "STEP_ID",
    "Failure",
    "Fit",
    "LeakReport",
    "scope_of",
]
