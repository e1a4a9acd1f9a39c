"""Which allocator events a compiled program made, and what they hold.

An XLA program asks the allocator for its temp slab and its outputs on each
run; the event carries no shape or dtype, only ``requested_bytes`` equal to
the program allocation's size. An allocation is linked to a program
allocation when its requested bytes equal that allocation's size, the
allocation is one the runtime makes per run (``xla.made_per_run``: temp,
output, a parameter's output twin), and

- a run of the program covers it on its thread (the run records,
  ``decode/runs.py``: an execute window naming the module and program id),
  and then only that program is a candidate; or
- the program's TF function is running on the host's op line at that moment
  (a ``__inference_f_27`` event covers it) or the allocation's op names it; or
- by size alone: the allocation has no op (every TF op names its allocations)
  and a run window of the program, on any thread, covers it. A program with no
  run in the capture never gets an allocation this way, unless the capture
  records no run of any program (TensorFlow 2.16 writes none on the CPU): then
  an allocation with no op is linked where one program alone, a TF function's,
  has an allocation of its size (not JAX's, whose allocations have no op).

When several program allocations fit, nothing is guessed: within one program
the program is named and the index left NA; across programs neither is set.
Both cases are counted in ``diagnostics``. Within one program, when every
candidate holds the same value (``held_value``: same shape and dtype, and the
same TF op or none), the allocation is still named by that value (``Links.held``)
while its index stays NA.

A row linked to one output holds what the program left there (``output_value``:
the root's element at that allocation); a transfer of a run's argument (JAX's
``DevicePut`` in a call) the value its program's parameters of that size agree
on. ``Links.held`` names all of these.

Linking reads each program's skim (``XlaProgram.skim``: module name and buffer
allocations); only ``Links.held``, ``Links.sources`` and ``Links.notes`` read
further (the buffer assignment and the computations that define the
candidates' buffers), and only for the programs of the rows asked about.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceparse.decode.runs import RunRecords
from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla import buffer_info, function_of, made_per_run, module_index
from traceparse.tables.xla_runs import (
    Candidate,
    argument_links,
    covering_runs,
    program_id,
    within,
)
from traceparse.tables.xla_runs import windows as runs_of

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
    # Row -> (host, program, index) of a row linked to one allocation.
    single: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    # Row -> (host, program, parameter indices) of a transfer of a run's argument;
    # named by the parameters' agreed value, not linked (no run made it).
    arguments: dict[int, tuple[str, str, tuple[int, ...]]] = field(default_factory=dict)
    # Row -> end (ps) of the run it was made in, where the run records say.
    ends: dict[int, int] = field(default_factory=dict)
    size_only: int = 0  # rows linked by size alone, inside a run window on another thread
    without_runs: int = 0  # rows linked by size alone in a capture that records no runs
    unlinked: int = 0  # rows with a program allocation's size that no run supports
    unlinked_bytes: int = 0  # and the bytes they requested
    # No run of any program recognised on any host (no event names one).
    no_runs: bool = False
    _agreed: dict[tuple[str, str, tuple[int, ...]], Held | None] = field(default_factory=dict)

    def columns(self, like: pd.Index) -> tuple[pd.Series, pd.Series]:
        return (
            pd.Series(self.program, index=like, dtype=object).astype("category"),
            pd.Series(self.index, index=like, dtype="Int64"),
        )

    def held(self, rows: Iterable[int] | None = None) -> dict[int, Held]:
        """Row -> the value it holds, for ``rows`` (default: every row that may have
        one): a row linked to one output (or a parameter's output twin) holds
        what the program left there (``output_value``); a row whose candidate
        allocations of one program all hold one value, that value. Parses only
        those rows' programs."""
        found: dict[int, Held] = {}
        for row in self.named if rows is None else rows:
            value = self._value(row)
            if value is not None:
                found[row] = value
        return found

    def sources(self, rows: Iterable[int] | None = None) -> dict[int, str]:
        """Row -> the HLO source line (``file:line``) of the value a row linked to
        one output holds, where the module records it (JAX does)."""
        found: dict[int, str] = {}
        for row in self.single if rows is None else rows:
            one = self.single.get(row)
            if one is not None:
                source = output_source(self.programs[(one[0], one[1])], one[2])
                if source is not None:
                    found[row] = source
        return found

    @property
    def named(self) -> list[int]:
        """Rows that may hold a known value: shared ones and those linked to one
        allocation the runtime makes per run (temp slabs are split, not named)."""
        return sorted([*self.shared, *self.single, *self.arguments])

    def _value(self, row: int) -> Held | None:
        one = self.single.get(row)
        if one is not None:
            host, name, index = one
            one_key = (host, name, (index,))
            if one_key not in self._agreed:
                self._agreed[one_key] = output_value(self.programs[(host, name)], index)
            return self._agreed[one_key]
        key = self.shared.get(row) or self.arguments.get(row)
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
        if self.size_only:
            notes.append(
                f"{self.size_only} allocator events were linked to an XLA program by their "
                "size alone, made while a run of that program was under way on another thread."
            )
        if self.without_runs:
            notes.append(
                f"{self.without_runs} allocator events were linked to an XLA program by their "
                "size alone: the capture records no run of any program (TensorFlow 2.16 "
                "writes none on the CPU), and one program alone has an allocation of that size."
            )
        if self.unlinked and self.no_runs and not self.runs:
            notes.append(
                f"{self.unlinked} allocator events ({self.unlinked_bytes:,} bytes requested) "
                "have the size of an XLA program allocation, but the capture records no run "
                "of any program that traceparse recognises (no event on the allocating "
                "thread names a program, in its name or in a hlo_module, program_id or "
                "run_id stat): those bytes are left unnamed."
            )
        elif self.unlinked:
            notes.append(
                f"{self.unlinked} allocator events have the size of an XLA program allocation "
                "but no run of that program covers them: they were not linked."
            )
        return notes


def link_allocations(
    allocations: pd.DataFrame,
    programs: Sequence[tuple[str, XlaProgram]],
    function_runs: dict[str, pd.DataFrame],
    records: Mapping[str, RunRecords | None] | None = None,
) -> Links:
    """Link each allocation row to at most one (program, allocation index): through
    the run that covers it on its thread (``records``), else by size inside a
    known run window of the program (module docstring)."""
    n = len(allocations)
    links = Links([None] * n, [None] * n)
    records = records or {}
    # (host, size) -> [(program, index, function, module, program id)]
    candidates: dict[tuple[str, int], list[Candidate]] = {}
    parameters: dict[tuple[str, int], list[Candidate]] = {}
    links.programs = {(host, program.name): program for host, program in programs}
    for host, program in programs:
        # The skim read: linking never parses the instructions (decode/xla.py).
        module = program.skim.module
        function = function_of(module)
        pid = program_id(program.name, module)
        for alloc in program.skim.allocations:
            found = Candidate(program.name, alloc.index, function, module, pid)
            if made_per_run(alloc) and alloc.size > 0:
                candidates.setdefault((host, alloc.size), []).append(found)
            if alloc.is_entry_computation_parameter and alloc.size > 0:
                parameters.setdefault((host, alloc.size), []).append(found)
    links.no_runs = all(r is None or r.runs.empty for r in records.values())
    covering, arguments = covering_runs(allocations, records) if n else ({}, {})
    links.arguments = argument_links(allocations, arguments, parameters)
    if not candidates or not n:
        return links
    sizes = np.array(sorted({size for _, size in candidates}), dtype=np.int64)
    requested = allocations["requested_bytes"].to_numpy(dtype=np.int64, na_value=-1)
    rows = np.flatnonzero(np.isin(requested, sizes))
    hosts = allocations["host"].astype(object).to_numpy()
    ops = allocations["op"].astype(object).to_numpy()
    times = allocations["alloc_ps"].to_numpy(dtype=np.int64)
    windows = {host: runs_of(r) for host, r in records.items() if r is not None}
    for row in rows.tolist():
        host = hosts[row]
        time = int(times[row])
        fits = candidates.get((host, int(requested[row])), [])
        op = ops[row] if isinstance(ops[row], str) else None
        run = covering.get(row)
        how = "run"
        if run is not None:  # launched on this thread: only that program's allocations
            module, pid, end = run
            fits = [c for c in fits if c.module == module and (pid is None or c.pid in (pid, None))]
            if fits:
                links.ends[row] = end
        else:
            running = _running(function_runs.get(host), time)
            seen = [
                c
                for c in fits
                if c.function is not None and (c.function == op or c.function in running)
            ]
            if seen:
                fits = seen
            else:
                # Size alone: no TF op recorded (TF ops name their allocations), and
                # only while a run of that program is known to be under way.
                how = "size"
                active = windows.get(host, {})
                sized = [
                    c for c in fits if op is None and within(active.get(c.module), time, c.pid)
                ]
                # TensorFlow's programs only (a TF function's): TF ops name their
                # allocations, so one without an op of a per-run allocation's size is
                # the program's. JAX's allocations have no op: size alone is no evidence.
                one_tf_program = len({c.program for c in fits}) == 1 and all(
                    c.function is not None for c in fits
                )
                if not sized and links.no_runs and op is None and one_tf_program:
                    # No run of any program is recorded at all (TensorFlow 2.16 on the
                    # CPU writes none): size alone, where one program alone fits.
                    how = "no runs"
                    sized = fits
                fits = sized
        if not fits:
            # A candidate left unlinked: no op, a program allocation's size, no run.
            left = run is None and op is None and row not in links.arguments
            links.unlinked += left
            links.unlinked_bytes += int(requested[row]) if left else 0
            continue
        names = {c.program for c in fits}
        if len(names) == 1:
            links.program[row] = fits[0].program
            links.runs[(host, fits[0].program)] += 1
            links.size_only += how == "size"
            links.without_runs += how == "no runs"
            if len(fits) == 1:
                links.index[row] = fits[0].index
                links.single[row] = (host, fits[0].program, fits[0].index)
            else:
                links.shared[row] = (host, fits[0].program, tuple(sorted(c.index for c in fits)))
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
    by_index = program.cache.get("allocations")
    if by_index is None:  # built once: a program may have thousands of candidates
        by_index = {}
        for a in program.assignment.buffer_allocations:
            by_index.setdefault(a.index, a)
        program.cache["allocations"] = by_index
    alloc = by_index.get(index)
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


def output_value(program: XlaProgram, index: int) -> Held | None:
    """What a program leaves in a per-run allocation: for an output, the buffer at
    offset 0 filling it whose defining instruction is the entry root or, for a
    root tuple, the operand at that element (through ``bitcast`` and
    ``get-tuple-element``, which define no buffer of their own); else, and for a
    parameter's output twin, ``held_value``."""
    alloc = next((a for a in program.assignment.buffer_allocations if a.index == index), None)
    if alloc is None:
        return None
    if not alloc.is_entry_computation_parameter:
        left = _left_by_root(program)
        values: set[Held] = set()
        for assigned in alloc.assigned:
            if assigned.offset != 0 or assigned.size != alloc.size:
                continue
            name, tf_op, tf_op_type, dtype, shape, estimated = buffer_info(
                program, assigned.logical_buffer_id
            )
            if name not in left or dtype is None or shape is None or estimated is None:
                continue
            values.add(
                (str(dtype), str(shape), int(str(estimated)), _text(tf_op), _text(tf_op_type))
            )
        if len(values) == 1:
            return values.pop()
    return held_value(program, index)


def output_source(program: XlaProgram, index: int) -> str | None:
    """The source line of what the program leaves in output allocation ``index``."""
    alloc = next((a for a in program.assignment.buffer_allocations if a.index == index), None)
    if alloc is None or alloc.is_entry_computation_parameter:
        return None
    left = _left_by_root(program)
    logical = {b.id: b for b in program.assignment.logical_buffers}
    index_of = module_index(program)
    sources = set()
    for assigned in alloc.assigned:
        buffer = logical.get(assigned.logical_buffer_id)
        inst = index_of.instruction(buffer.defined_at) if buffer is not None else None
        if assigned.offset == 0 and inst is not None and inst.name in left:
            sources.add(index_of.origin(inst).source)
    return sources.pop() if len(sources) == 1 else None


def _left_by_root(program: XlaProgram) -> set[str]:
    """Names of the entry instructions whose values the program returns."""
    if "left" in program.cache:
        found: set[str] = program.cache["left"]
        return found
    index = module_index(program)
    entry = program.module.computation(program.module.entry_computation_id)
    found = set()
    root = index.by_id.get(entry.root_id) if entry is not None else None
    pending = [root] if root is not None else []
    seen: set[int] = set()
    while pending:
        inst = pending.pop()
        if inst.id in seen:
            continue
        seen.add(inst.id)
        found.add(inst.name)
        if inst.opcode in ("tuple", "bitcast", "get-tuple-element"):
            pending.extend(o for i in inst.operand_ids if (o := index.by_id.get(i)) is not None)
    program.cache["left"] = found
    return found


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
