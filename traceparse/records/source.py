"""What a renderer may read from a profile besides its records (``Profile`` has it).

Renderers (report/, gate/, the CLI's views, the integrations) annotate with
this Protocol rather than import ``core``: a stage never names a later one, and
a renderer reads the records and the profile's already-built tables only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import pandas as pd

if TYPE_CHECKING:
    from traceparse.records.allocator import AllocatorRecord
    from traceparse.records.terms import Failure, LeakReport

__all__ = ["RecordSource"]


class RecordSource(Protocol):
    """The part of ``traceparse.Profile`` renderers use."""

    @property
    def path(self) -> str: ...
    @property
    def run(self) -> str | None: ...
    @property
    def allocations(self) -> pd.DataFrame: ...
    @property
    def step_markers(self) -> pd.DataFrame: ...
    def summary(self, predict: bool = False) -> Sequence[AllocatorRecord]: ...
    def failures(self) -> Sequence[Failure]: ...
    def diagnostics(self) -> list[str]: ...
    def leaks(self) -> LeakReport: ...
    def breakdown_at(self, time_ps: int | None = None, host: str | None = None) -> pd.DataFrame: ...
    def live_at_peak(
        self, allocator: str | None = None, host: str | None = None, expand_xla: bool = False
    ) -> pd.DataFrame: ...
