"""``Profile``'s source lines (docs/sources.md): ``lines()``.

A mixin of ``Profile``, like ``core/xla_tables.py``: the rule is in
``analysis/lines.py``; this hands it the Profile's tables, conforms and caches
each answer, and says how to get source lines where the capture has none
(``core.diagnostics.sources_note``). ``stacks`` and ``has_sources``, which the
summary reads, stay in ``core/profile.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from traceparse.analysis.lines import LINES, lines_table
from traceparse.core.diagnostics import sources_note
from traceparse.core.memory import pooled_cache
from traceparse.tables import contracts

if TYPE_CHECKING:
    from traceparse.core.xla import XlaParts
    from traceparse.decode.trace import MemoryTrace

__all__ = ["SourceLines"]


class SourceLines:
    """The source-line tables of ``Profile``, from the tables it builds."""

    if TYPE_CHECKING:  # Profile's, built there
        traces: list[MemoryTrace]
        _xla: XlaParts
        _tables: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]
        allocations: pd.DataFrame
        breakdown: pd.DataFrame

        def _conform(self, frame: pd.DataFrame, table: contracts.Table) -> pd.DataFrame: ...
        @property
        def has_sources(self) -> bool: ...

    @pooled_cache
    def lines(self, by_stack: bool = False) -> pd.DataFrame:
        """Bytes per line of the program's own code, largest first (``analysis/lines.py``):
        held at each allocator's peak and allocated over the capture, with the
        layers and ops under each line. ``by_stack=True`` keeps whole stacks apart.
        Without source lines the table's ``attrs["diagnostic"]`` says how to get them.
        """
        _ = self._tables  # the join fills the stacks
        table = lines_table(
            self.breakdown, self.allocations, self._xla.stacks, by_stack=bool(by_stack)
        )
        table = self._conform(table, LINES)
        if not self.has_sources:
            table.attrs["diagnostic"] = sources_note(self.traces)
        return table
