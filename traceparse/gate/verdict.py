"""The gate: judge a profile's budgets and say whether it passes, in one place.

``traceparse check``, the Keras ``MemoryCallback`` and the pytest plugin all
call :func:`judge`; each then shows the verdict its own way (lines on a
terminal, a raised error in ``fit``, a failed test).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceparse.errors import BudgetExceededError
from traceparse.gate.budgets import Budgets, Result, evaluate
from traceparse.gate.render import verdict_line

if TYPE_CHECKING:
    from traceparse.core.profile import Profile

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
    def line(self) -> str:
        """``"1 of 3 budgets breached"``, ``"all 3 budgets within limits"``."""
        return verdict_line(self.results)

    def error(self) -> BudgetExceededError:
        """The error (exit code 4) for a verdict that did not pass."""
        return BudgetExceededError(f"{self.line} in {self.source}", self.source)


def judge(profile: Profile, budgets: Budgets, source: str) -> Verdict:
    """Judge every budget of ``budgets`` on ``profile`` (``TraceparseError`` when it cannot)."""
    return Verdict(evaluate(profile, budgets), source)
