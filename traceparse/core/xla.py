"""XLA parts of ``Profile``: programs, buffers, links, slabs at the peak.

Kept apart from ``core/profile.py`` so that a capture without programs pays
for nothing: programs are parsed only when a table that needs them is built.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from traceparse.analysis.rollups import scope_of
from traceparse.analysis.xla import peak_fill
from traceparse.analysis.xla_live import (
    NO_TF_OP,
    covered_bytes,
    held_rows,
    linked_slabs,
    live_deltas,
    op_types,
    slab_frame,
    slab_rows,
)
from traceparse.decode.trace import MemoryTrace
from traceparse.decode.xla import XlaProgram
from traceparse.tables.sources import allocation_sources
from traceparse.tables.xla import buffer_info, buffers_table, function_of, programs_table
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
            program = pd.Series(pd.NA, index=allocations.index, dtype=object).astype("category")
            index = pd.Series(pd.NA, index=allocations.index, dtype="Int64")
        source = allocation_sources(allocations, {t.host: t.runs for t in self.traces})
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

    def slabs(self, live: pd.DataFrame) -> pd.DataFrame:
        """Per linked temp slab live at a peak: its buffers at the program's peak
        (``SLAB_COLUMNS``; a value with no TF op has ``tf_op`` NO_TF_OP). Only
        the programs of those slabs are indexed."""
        if self.links is None:  # nothing linked (or no programs): no parsing, no rows
            return slab_frame([])
        found = linked_slabs(live)
        rows = held_rows(live, self.held(live.index))
        if found:
            wanted = {(host, program, index) for _, host, program, index in found}
            names = {(host, program) for host, program, _ in wanted}
            used = [(h, p) for h, p in self.programs if (h, p.name) in names]
            by_name = {(h, p.name): p for h, p in used}

            def info(host: str, program: str, buffer: int) -> tuple[object, ...]:
                return buffer_info(by_name[(host, program)], buffer)

            rows = slab_rows(found, peak_fill(used, wanted), info) + rows
        return slab_frame(rows)

    def held(self, labels: pd.Index) -> dict[object, Held]:
        """Label -> agreed value, for the rows of ``labels`` that have one (parses
        only the programs of those rows)."""
        if self.links is None or not self.shared:
            return {}
        rows = {self.shared[label]: label for label in labels if label in self.shared}
        return {rows[row]: value for row, value in self.links.held(rows).items()}

    @staticmethod
    def covered(slabs: pd.DataFrame) -> pd.Series:
        return covered_bytes(slabs)


_COUNTS = (
    "count",
    "unestimated",
    "live_at_peak",
    "live_at_peak_bytes",
    "live_at_end",
    "live_at_end_bytes",
    "ops",
)


def with_live_deltas(
    table: pd.DataFrame,
    live: pd.DataFrame,
    slabs: pd.DataFrame,
    depth: int | None = None,
    as_written: bool = False,
) -> pd.DataFrame:
    """A roll-up (``ops``, or ``scopes`` at ``depth``) whose live-at-peak columns
    count the HLO buffers of linked slabs under their TF ops instead of the slab
    (under the scope ``scope_of`` gives their TF op, as for an allocation's op)."""
    deltas = live_deltas(live, slabs)
    if not deltas:
        return table
    key = "op" if depth is None else "scope"
    if depth is not None:
        by_scope: dict[tuple[object, object, object], list[int]] = {}
        for (host, allocator, op), (n, size) in deltas.items():
            # NO_TF_OP names no scope: it stays one row of its own.
            scope = (
                op
                if op == NO_TF_OP
                else scope_of(op, depth, as_written)
                if isinstance(op, str)
                else None
            )
            acc = by_scope.setdefault((host, allocator, scope), [0, 0])
            acc[0] += n
            acc[1] += size
        deltas = {k: v for k, v in by_scope.items() if v != [0, 0]}
    names = [table[c].astype(object).tolist() for c in ("host", "allocator", key)]
    rows = enumerate(zip(*names, strict=True))
    position = {(h, a, n if isinstance(n, str) else None): i for i, (h, a, n) in rows}
    add = np.zeros((len(table), 2), dtype=np.int64)
    new: list[tuple[object, object, object, int, int]] = []
    for k, (n, size) in deltas.items():
        if k in position:
            add[position[k]] += (n, size)
        else:
            new.append((*k, n, size))
    return _rebuild(table, add, new, key, op_types(slabs) if new else {})


def _rebuild(
    table: pd.DataFrame,
    add: np.ndarray,
    new: list[tuple[object, object, object, int, int]],
    key: str,
    types: dict[str, object],
) -> pd.DataFrame:
    """``table`` with ``add`` (live count, bytes) added per row, one row per
    (host, allocator, name, live, bytes) of ``new`` (other counts 0, other
    values NA), ordered by host, allocator, live_at_peak_bytes and
    allocated_bytes (largest first, NA last) and name (NA last). A roll-up is a
    few hundred rows, so this is done on lists and the frame built once:
    pandas' appends and multi-column sorts of categoricals cost more."""
    keys = ("host", "allocator", key)
    columns: dict[str, list[object]] = {}
    for column in table.columns:
        values = table[column].tolist()
        if column in ("live_at_peak", "live_at_peak_bytes"):
            delta = add[:, 0 if column == "live_at_peak" else 1].tolist()
            values = [v + d for v, d in zip(values, delta, strict=True)]
        if column in keys:
            values += [row[keys.index(column)] for row in new]
        elif column == "live_at_peak":
            values += [row[3] for row in new]
        elif column == "live_at_peak_bytes":
            values += [row[4] for row in new]
        elif column in _COUNTS:
            values += [0] * len(new)
        elif column == "op_type":
            values += [types.get(str(row[2])) for row in new]
        else:
            values += [None] * len(new)
        columns[column] = values

    def missing(value: object) -> bool:
        return value is None or value is pd.NA or value != value

    def number(value: object) -> tuple[bool, int]:
        return (True, 0) if missing(value) else (False, -int(value))  # type: ignore[call-overload]

    def text(value: object) -> tuple[bool, str]:
        return (True, "") if missing(value) else (False, str(value))

    host, allocator, name = (columns[c] for c in keys)
    live, allocated = columns["live_at_peak_bytes"], columns["allocated_bytes"]
    order = sorted(
        range(len(host)),
        key=lambda i: (
            str(host[i]),
            str(allocator[i]),
            number(live[i]),
            number(allocated[i]),
            text(name[i]),
        ),
    )
    data: dict[str, object] = {}
    for column, dtype in table.dtypes.items():
        values = [columns[str(column)][i] for i in order]
        if isinstance(dtype, pd.CategoricalDtype):  # the values present, in order
            data[str(column)] = pd.Categorical([None if missing(v) else v for v in values])
        else:
            data[str(column)] = pd.array(values, dtype=dtype)
    return pd.DataFrame(data)
