"""What fills an XLA program's temp slab at the program's own peak.

A temp allocation holds many HLO buffers at offsets; buffers whose lifetimes
do not overlap share bytes. When the module has a heap-simulator trace for the
allocation, its ALLOC/FREE order is replayed. Otherwise liveness comes from
the schedule of the entry computation: a buffer lives from its defining
instruction to its last use (uses through get-tuple-element, bitcast and
tuple are followed); a buffer of a called computation (a while body, a call)
lives while the entry instruction that calls it runs. The program's peak is
the schedule position where the buffers of the allocation add up to the most
bytes; the buffers live there fill the slab, and the bytes of the slab none
of them covers are its slack.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla import allocation_kind, module_index

_ALIASES = {"get-tuple-element", "bitcast", "tuple"}


def _intervals(program: XlaProgram, wanted: set[int]) -> dict[int, tuple[int, int]]:
    """Logical buffer id (of ``wanted``) -> (first, last) schedule position of the
    entry computation."""
    module = program.module
    index = module_index(program)
    entry_id = module.entry_computation_id
    entry = module.computation(entry_id)
    if entry is None:
        return {}
    sequence = module.schedule.sequences.get(entry_id)
    order = list(sequence.instruction_ids) if sequence else [i.id for i in entry.instructions]
    position = {inst_id: p for p, inst_id in enumerate(order)}
    # Instructions of called computations take the position of their entry caller.
    caller = index.caller

    def top_position(inst_id: int, depth: int = 0) -> int | None:
        if inst_id in position:
            return position[inst_id]
        comp = index.computation_of.get(inst_id)
        up = caller.get(comp) if comp is not None else None
        return None if up is None or depth > 64 else top_position(up, depth + 1)

    users: dict[int, list[int]] = {}
    for inst in entry.instructions:
        for operand in inst.operand_ids:
            users.setdefault(operand, []).append(inst.id)

    def last_use(inst_id: int, depth: int = 0) -> int:
        last = position.get(inst_id, -1)
        for user in users.get(inst_id, []):
            last = max(last, position.get(user, -1))
            if depth < 64 and index.by_id[user].opcode in _ALIASES:
                last = max(last, last_use(user, depth + 1))
        return last

    spans: dict[int, tuple[int, int]] = {}
    for buffer in program.assignment.logical_buffers:
        if buffer.id not in wanted:
            continue
        defining = index.instruction(buffer.defined_at)
        if defining is None:
            continue
        inst = defining
        start = top_position(inst.id)
        if start is None:
            continue
        end = last_use(inst.id) if inst.id in position else start
        spans[buffer.id] = (start, max(start, end))
    return spans


def _simulated(
    program: XlaProgram, allocation_index: int, members: dict[int, int]
) -> list[int] | None:
    """Buffers live at the heap simulator's peak for the allocation, if it has a trace."""
    for trace in program.assignment.heap_simulator_traces:
        if trace.buffer_allocation_index != allocation_index or not trace.events:
            continue
        live: set[int] = set()
        best: list[int] = []
        total = best_total = 0
        for event in trace.events:
            if event.kind == 0 and event.buffer_id in members:  # ALLOC
                live.add(event.buffer_id)
                total += members[event.buffer_id]
                if total > best_total:
                    best_total, best = total, sorted(live)
            elif event.kind == 1 and event.buffer_id in live:  # FREE
                live.discard(event.buffer_id)
                total -= members[event.buffer_id]
        return best
    return None


def _in_place(
    timed: list[tuple[int, tuple[int, int]]], placed: dict[int, tuple[int, int]]
) -> list[tuple[int, tuple[int, int]]]:
    """A buffer whose bytes the instruction of its last use overwrites (an in-place
    update: its output starts there and overlaps it) ends one step earlier."""
    starting: dict[int, list[int]] = {}
    for b, (start, _) in timed:
        starting.setdefault(start, []).append(b)
    out = []
    for b, (start, end) in timed:
        lo, hi = placed[b][0], placed[b][0] + placed[b][1]
        for c in starting.get(end, []):
            c_lo = placed[c][0]
            if c != b and end > start and c_lo < hi and lo < c_lo + placed[c][1]:
                end -= 1
                break
        out.append((b, (start, end)))
    return out


def slab_peak(program: XlaProgram, allocation_index: int) -> tuple[list[tuple[int, int]], int]:
    """For one allocation: [(logical buffer, bytes it alone covers)] live at the
    program's peak, and the slack (bytes no live buffer covers)."""
    allocs = {a.index: a for a in program.assignment.buffer_allocations}
    alloc = allocs[allocation_index]
    placed = {a.logical_buffer_id: (a.offset, a.size) for a in alloc.assigned}
    members = {b: size for b, (_, size) in placed.items()}
    live = _simulated(program, allocation_index, members)
    if live is None:
        spans = _intervals(program, set(placed))
        timed = _in_place([(b, spans[b]) for b in placed if b in spans], placed)
        if timed:
            top = max(end for _, (_, end) in timed) + 2
            delta = np.zeros(top, dtype=np.int64)
            for b, (start, end) in timed:
                delta[start] += members[b]
                delta[end + 1] -= members[b]
            at = int(np.argmax(np.cumsum(delta)))
            live = [b for b, (start, end) in timed if start <= at <= end]
        else:
            live = []
    # Bytes each live buffer covers that no buffer before it (by offset) does.
    covered, cursor = [], 0
    for b in sorted(live, key=lambda b: (placed[b][0], b)):
        offset, size = placed[b]
        lo, hi = max(offset, cursor), min(offset + size, alloc.size)
        covered.append((b, max(0, hi - lo)))
        cursor = max(cursor, offset + size)
    slack = alloc.size - sum(n for _, n in covered)
    return covered, slack


def peak_fill(
    programs: Sequence[tuple[str, XlaProgram]], slabs: set[tuple[str, str, int]]
) -> dict[tuple[str, str, int], tuple[list[tuple[int, int]], int]]:
    """For each (host, program, temp allocation) in ``slabs``: its live buffers at
    the program's peak with the bytes each covers, and the slack."""
    found: dict[tuple[str, str, int], tuple[list[tuple[int, int]], int]] = {}
    for host, program in programs:
        for alloc in program.assignment.buffer_allocations:
            key = (host, program.name, alloc.index)
            if key in slabs and allocation_kind(alloc) == "temp":
                found[key] = slab_peak(program, alloc.index)
    return found
