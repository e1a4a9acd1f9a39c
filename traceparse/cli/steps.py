"""``traceparse steps``: memory per step."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand
from traceparse.output.cells import STEP_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile


class StepsCommand(TableCommand):
    """Memory per step: what each training step allocated, freed and kept.

    One row per allocator and step in the newest run under PATH (steps come
    from step markers such as traceparse's cap.step(n), else from the
    allocator's own step ids, which number single executions: those are
    numbered 1, 2, ... in time order and the title says so): start and end,
    allocations, bytes allocated and freed, peak in use, in use at the start
    and end, and the growth a leak would show. In time order.
    """

    name = "steps"
    noun = "Steps"
    default_sort = ()  # the frame's order: per allocator, in time order
    display_columns = tuple(c for c in STEP_COLUMNS if c != "name")

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        return profile.steps

    def describe(self, profile: Profile, args: argparse.Namespace) -> str:
        from traceparse.analysis.steps import STEP_ID

        sources = set(profile.steps["source"].astype(str))
        if sources == {STEP_ID}:
            return (
                f"Executions in run {profile.run} ({profile.host}); no step markers, so the "
                "step column numbers TensorFlow's executions in time order"
            )
        return super().describe(profile, args)

    def empty_message(self, profile: Profile) -> str:
        if profile.allocations.empty:
            return "No steps: the capture has no memory events."
        return (
            "No steps: the capture has no step markers. Mark steps with "
            "`with cap.step(n):` (traceparse.profile) or tf.profiler.experimental.Trace"
            "('train', step_num=n, _r=1)."
        )
