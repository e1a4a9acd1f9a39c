"""The gate: judge a profile's budgets and say whether it passes, in one place.

``traceparse check``, the Keras ``MemoryCallback`` and the pytest plugin all
call :func:`judge`; each then shows the verdict its own way (lines on a
terminal, a raised error in ``fit``, a failed test).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceparse.errors import BudgetExceededError, InputError, OutOfMemoryError
from traceparse.gate.budgets import Budgets, Result, evaluate
from traceparse.gate.failure import OUT_OF_MEMORY, out_of_memory_results
from traceparse.gate.render import verdict_line

if TYPE_CHECKING:
    from traceparse.records.source import RecordSource

__all__ = ["Verdict", "judge"]


@dataclass(frozen=True)
class Verdict:
    """Every budget's result for one profile, and what the gate makes of them."""

    results: list[Result]
    source: str  # what was judged, as the user named it (a path, a run directory, a test)

    @property
    def breaches(self) -> list[Result]:
        return [r for r in self.results if r.failed]

    @property
    def passed(self) -> bool:
        return not self.breaches

    @property
    def out_of_memory(self) -> list[Result]:
        """The failures of hosts whose capture ended in out-of-memory (issue 39)."""
        return [r for r in self.results if r.budget == OUT_OF_MEMORY and r.failed]

    @property
    def line(self) -> str:
        """``"1 of 3 budgets breached"``, ``"all 3 budgets within limits"``."""
        if self.out_of_memory:
            budgets = [r for r in self.results if r.budget != OUT_OF_MEMORY]
            tail = f"; {verdict_line(budgets)}" if budgets else ""
            return f"the run ran out of memory{tail}"
        return verdict_line(self.results)

    def error(self) -> BudgetExceededError | OutOfMemoryError:
        """The error for a verdict that did not pass: exit code 5 for out-of-memory,
        4 for a breached budget."""
        if self.out_of_memory:
            return OutOfMemoryError(f"{self.line} in {self.source}", self.source)
        return BudgetExceededError(f"{self.line} in {self.source}", self.source)


def judge(profile: RecordSource, budgets: Budgets, source: str) -> Verdict:
    """Judge every budget of ``budgets`` on ``profile`` (``TraceparseError`` when it cannot).

    A capture that ended in out-of-memory fails first, whatever the budgets say."""
    failed = out_of_memory_results(profile)
    try:
        results = evaluate(profile, budgets)
    except InputError:
        if not failed:  # no memory events: the failure alone is the verdict
            raise
        results = []
    return Verdict(failed + results, source)
