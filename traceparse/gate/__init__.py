"""Memory as a CI gate: budgets, baselines, diffs and JUnit XML.

>>> from traceparse.gate import Budgets, judge
>>> prof = traceparse.load("logs/")                                        # doctest: +SKIP
>>> verdict = judge(prof, Budgets.from_options(max_peak="2GiB"), "logs/")  # doctest: +SKIP
>>> [r.line() for r in verdict.breaches]                                   # doctest: +SKIP

Nothing here reads a capture (callers pass a Profile, or a Baseline made from
one with ``baseline_of``); nothing imports TensorFlow.
"""

from traceparse.gate.baseline import Baseline, baseline_of, read_baseline
from traceparse.gate.budgets import Budgets, Contributor, Result, Tolerance, evaluate
from traceparse.gate.diff import AllocatorDiff, DiffRow, diff_figures
from traceparse.gate.figures import AllocatorFigures, OpFigures, figures_of
from traceparse.gate.junit import junit_xml
from traceparse.gate.verdict import Verdict, judge

__all__ = [
    "AllocatorDiff",
    "AllocatorFigures",
    "Baseline",
    "Budgets",
    "Contributor",
    "DiffRow",
    "OpFigures",
    "Result",
    "Tolerance",
    "Verdict",
    "baseline_of",
    "diff_figures",
    "evaluate",
    "figures_of",
    "judge",
    "junit_xml",
    "read_baseline",
]
