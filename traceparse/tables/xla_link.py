"""Which allocator events a compiled program made.

An XLA program asks TF's allocator for its temp slab and its outputs on each
run; the event carries no shape or dtype, only ``requested_bytes`` equal to
the program allocation's size. An allocation is linked to a program
allocation when

- its requested bytes equal that allocation's size, the allocation is one the
  runtime makes per run (``xla.made_per_run``: temp, output, a parameter's
  output twin), and
- the program's TF function is running on the host's op line at that moment
  (a ``__inference_f_27`` event covers it) or the allocation's op names it, or
  the allocation has no op at all: every TF op names its allocations, so an
  event with none and a program allocation's exact size is the XLA runtime's
  (``model.fit`` under XLA launches its step with no event on the op line).
  An allocation whose op names something else is never linked on size alone.

When several program allocations fit, nothing is guessed: within one program
the program is named and the index left NA; across programs neither is set.
Both cases are counted in ``diagnostics``. Within one program, when every
candidate holds the same value (``held_value``: same shape and dtype, and the
same TF op or none), the allocation is still named by that value (``Links.held``)
while its index stays NA.

Linking reads each program's skim (``XlaProgram.skim``: module name and buffer
allocations); only ``Links.held`` and ``Links.notes`` read further (the buffer
assignment and the computations that define the candidates' buffers), and
only for the programs with such shared candidates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla import buffer_info, function_of, made_per_run, module_index

# (dtype, shape, estimated_bytes, tf_op, tf_op_type) of what an allocation holds.
Held = tuple[str, str, int, str | None, str | None]


@dataclass
class Links:
    """Per allocation row: the program and allocation index (None when unlinked)."""

    program: list[str | None]
    index: list[int | None]
    runs: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Row -> (host, program, candidate indices) of a row linked to one program
    # whose index is ambiguous. Whether the candidates hold one value needs
    # the instructions (a full parse), so it is decided only when asked (``held``).
    shared: dict[int, tuple[str, str, tuple[int, ...]]] = field(default_factory=dict)
    programs: dict[tuple[str, str], XlaProgram] = field(default_factory=dict)
    # Rows whose size fits allocations of several programs, per "programs a, b".
    across: Counter[str] = field(default_factory=Counter)
    _agreed: dict[tuple[str, str, tuple[int, ...]], Held | None] = field(default_factory=dict)

    def columns(self, like: pd.Index) -> tuple[pd.Series, pd.Series]:
        return (
            pd.Series(self.program, index=like, dtype=object).astype("category"),
            pd.Series(self.index, index=like, dtype="Int64"),
        )

    def held(self, rows: Iterable[int] | None = None) -> dict[int, Held]:
        """Row -> the value every candidate allocation of its one program holds,
        for ``rows`` (default: every such row); parses only their programs."""
        found: dict[int, Held] = {}
        for row in self.shared if rows is None else rows:
            value = self._value(row)
            if value is not None:
                found[row] = value
        return found

    def _value(self, row: int) -> Held | None:
        key = self.shared.get(row)
        if key is None:
            return None
        if key not in self._agreed:
            host, name, indices = key
            self._agreed[key] = _agreed(self.programs[(host, name)], indices)
        return self._agreed[key]

    @property
    def notes(self) -> list[str]:
        """What could not be linked to one allocation (decides every shared row)."""
        ambiguous: Counter[str] = Counter(
            {f"programs {names}": count for names, count in self.across.items()}
        )
        held_by: Counter[str] = Counter()
        for row, (_, name, indices) in self.shared.items():
            what = f"allocations {_few([str(i) for i in indices])} of {name}"
            (ambiguous if self._value(row) is None else held_by)[what] += 1
        notes = [
            f"{count} allocator events have the size of {what} "
            "(XLA); they were not linked to one allocation."
            for what, count in sorted(ambiguous.items())
        ]
        notes += [
            f"{count} allocator events have the size of {what} (XLA), which all hold "
            "the same shape x dtype: they are named by it, with no allocation index."
            for what, count in sorted(held_by.items())
        ]
        return notes


def link_allocations(
    allocations: pd.DataFrame,
    programs: Sequence[tuple[str, XlaProgram]],
    function_runs: dict[str, pd.DataFrame],
) -> Links:
    """Link each allocation row to at most one (program, allocation index)."""
    n = len(allocations)
    links = Links([None] * n, [None] * n)
    # (host, size) -> [(program, index, function)]
    candidates: dict[tuple[str, int], list[tuple[str, int, str | None]]] = {}
    links.programs = {(host, program.name): program for host, program in programs}
    for host, program in programs:
        # The skim read: linking never parses the instructions (decode/xla.py).
        function = function_of(program.skim.module)
        for alloc in program.skim.allocations:
            if made_per_run(alloc) and alloc.size > 0:
                candidates.setdefault((host, alloc.size), []).append(
                    (program.name, alloc.index, function)
                )
    if not candidates or not n:
        return links
    sizes = np.array(sorted({size for _, size in candidates}), dtype=np.int64)
    requested = allocations["requested_bytes"].to_numpy(dtype=np.int64, na_value=-1)
    rows = np.flatnonzero(np.isin(requested, sizes))
    hosts = allocations["host"].astype(object).to_numpy()
    ops = allocations["op"].astype(object).to_numpy()
    times = allocations["alloc_ps"].to_numpy(dtype=np.int64)
    for row in rows.tolist():
        host = hosts[row]
        fits = candidates.get((host, int(requested[row])), [])
        running = _running(function_runs.get(host), int(times[row]))
        op = ops[row] if isinstance(ops[row], str) else None
        seen = [c for c in fits if c[2] is not None and (c[2] == op or c[2] in running)]
        # No TF op recorded: TF ops always name their allocations, so one with no op
        # and a program allocation's exact size is the runtime's, made for it even
        # when the launch left no event on the op line (Keras fit under XLA).
        fits = seen or (fits if op is None else [])
        if not fits:
            continue
        names = {c[0] for c in fits}
        if len(fits) == 1:
            links.program[row], links.index[row] = fits[0][0], fits[0][1]
            links.runs[(host, fits[0][0])] += 1
        elif len(names) == 1:
            links.program[row] = fits[0][0]
            links.runs[(host, fits[0][0])] += 1
            links.shared[row] = (host, fits[0][0], tuple(sorted(c[1] for c in fits)))
        else:
            links.across[_few(sorted(names))] += 1
    return links


def _few(items: list[str], shown: int = 4) -> str:
    """The first few candidates and how many more: a crafted program can have
    thousands of one size, and a diagnostic is one readable line."""
    if len(items) <= shown:
        return ", ".join(items)
    return f"{', '.join(items[:shown])} and {len(items) - shown:,} more"


def held_value(program: XlaProgram, index: int) -> Held | None:
    """What a per-run allocation holds when the module says so unambiguously:
    an entry parameter's output twin holds the parameter (aliasing keeps the
    output's shape and dtype), an output the buffers that fill it whole. None
    when those disagree on shape, dtype or TF op, or when there are none."""
    allocs = program.assignment.buffer_allocations
    alloc = next((a for a in allocs if a.index == index), None)
    if alloc is None:
        return None
    values: set[Held] = set()
    for assigned in alloc.assigned:
        if assigned.offset != 0 or assigned.size != alloc.size:
            continue
        name, tf_op, tf_op_type, dtype, shape, estimated = buffer_info(
            program, assigned.logical_buffer_id
        )
        if alloc.is_entry_computation_parameter and not _is_parameter(program, name):
            continue  # values the program later writes over the parameter's bytes
        if dtype is None or shape is None or estimated is None:
            return None
        values.add((str(dtype), str(shape), int(str(estimated)), _text(tf_op), _text(tf_op_type)))
    return values.pop() if len(values) == 1 else None


def _agreed(program: XlaProgram, indices: Sequence[int]) -> Held | None:
    """The value all of ``indices`` hold, or None when any differs or is unknown."""
    values = {held_value(program, i) for i in indices}
    found = values.pop() if len(values) == 1 else None
    return found


def _is_parameter(program: XlaProgram, instruction: object) -> bool:
    # buffer_info found the instruction through the module index, so it is there.
    found = module_index(program).by_name.get(instruction) if isinstance(instruction, str) else None
    return found is not None and found.opcode == "parameter"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _running(runs: pd.DataFrame | None, time_ps: int) -> set[str]:
    """The functions whose run on the op line covers ``time_ps``."""
    if runs is None or runs.empty:
        return set()
    start = runs["start_ps"].to_numpy(dtype=np.int64)
    end = runs["end_ps"].to_numpy(dtype=np.int64)
    covering = (start <= time_ps) & (time_ps <= end)
    return set(runs["function"].to_numpy()[covering].tolist())
