"""XLA parts of ``Profile``: programs, buffers, links and the values they agree on
(the breakdown's XLA rows come from ``analysis.xla_live.slabs_at`` over ``held``
and ``programs``: the analysis is done in ``analysis/``, not here).

Kept apart from ``core/profile.py`` so that a capture without programs pays
for nothing: programs are parsed only when a table that needs them is built.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from traceparse.decode.trace import MemoryTrace
from traceparse.decode.xla import XlaProgram
from traceparse.tables.sources import allocation_sources, recorded_stacks, sources_of
from traceparse.tables.xla import buffers_table, function_of, programs_table
from traceparse.tables.xla_link import Held, Links, link_allocations
from traceparse.tables.xla_params import parameters_table

LINK_COLUMNS = ["xla_program", "xla_allocation_index"]


class XlaParts:
    """The XLA tables of one run's traces."""

    def __init__(self, traces: list[MemoryTrace]) -> None:
        self.traces = traces
        self.links: Links | None = None
        # allocations row label -> its position, for rows whose candidate
        # allocations may all hold one value (Links.shared)
        self.shared: dict[object, int] = {}
        # Each allocation's recorded stack id (docs/sources.md); None without a record.
        self.stacks: pd.Series | None = None

    @property
    def present(self) -> bool:
        """Whether any trace kept a metadata plane (no parsing)."""
        return any(t.xla is not None for t in self.traces)

    @cached_property
    def programs(self) -> list[tuple[str, XlaProgram]]:
        return [(t.host, p) for t in self.traces if t.xla is not None for p in t.xla.programs()]

    @property
    def notes(self) -> list[str]:
        found = [n for t in self.traces if t.xla is not None for n in t.xla.notes]
        return found + (self.links.notes if self.links is not None else [])

    def link(self, allocations: pd.DataFrame) -> pd.DataFrame:
        """``allocations`` with ``xla_program`` and ``xla_allocation_index``."""
        if self.present and self.programs:
            runs = {t.host: t.function_runs for t in self.traces}
            records = {t.host: t.runs for t in self.traces}
            self.links = link_allocations(allocations, self.programs, runs, records)
            program, index = self.links.columns(allocations.index)
            labels = allocations.index
            self.shared = {labels[row]: row for row in self.links.named}
        else:
            # All NA, made from codes: no object per row to turn into categories.
            unlinked = np.full(len(allocations), -1, dtype=np.int8)
            none = pd.Index([], dtype=object)
            program = pd.Series(pd.Categorical.from_codes(unlinked, none), index=allocations.index)
            index = pd.Series(pd.NA, index=allocations.index, dtype="Int64")
        source = allocation_sources(allocations, {t.host: t.runs for t in self.traces})
        if any(t.sources is not None for t in self.traces):
            # TensorFlow's recorded stacks (docs/sources.md) where JAX's frames say nothing.
            self.stacks = recorded_stacks(allocations, self.traces)
            recorded = sources_of(allocations, self.stacks, self.traces)
            source = source.astype(object).where(source.notna(), recorded)
        return allocations.assign(xla_program=program, xla_allocation_index=index, source=source)

    def programs_table(self) -> pd.DataFrame:
        runs = dict(self.links.runs) if self.links is not None else {}
        return programs_table(self.programs if self.present else [], runs)

    def buffers_table(self) -> pd.DataFrame:
        return buffers_table(self.programs if self.present else [])

    def parameters_table(self) -> pd.DataFrame:
        return parameters_table(self.programs if self.present else [])

    def ran(self) -> set[tuple[str, str]]:
        """(host, program) of the programs that ran during the capture: allocator
        events linked to them, their TF function on the op line, or their module
        named by an event (an HLO op's ``hlo_module`` stat). Call after ``link``."""
        if not self.present:
            return set()
        runs = self.links.runs if self.links is not None else {}
        found: set[tuple[str, str]] = set()
        by_host = {t.host: t for t in self.traces}
        for host, program in self.programs:
            trace = by_host[host]
            module = program.skim.module
            function = function_of(module)
            launched = function is not None and bool(
                (trace.function_runs["function"] == function).any()
            )
            if runs.get((host, program.name), 0) or launched or module in trace.stat_names:
                found.add((host, program.name))
        return found

    def held(self, labels: pd.Index) -> dict[object, Held]:
        """Label -> agreed value, for the rows of ``labels`` that have one (parses
        only the programs of those rows); empty when nothing is linked."""
        if self.links is None or not self.shared:
            return {}
        rows = {self.shared[label]: label for label in labels if label in self.shared}
        return {rows[row]: value for row, value in self.links.held(rows).items()}
