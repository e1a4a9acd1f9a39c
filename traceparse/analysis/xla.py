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

from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

import numpy as np

from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla import allocation_kind
from traceparse.tables.xla_index import ModuleIndex, module_index, scheduled

_ALIASES = {"get-tuple-element", "bitcast", "tuple"}
# HeapSimulatorTrace.Event.Kind
_ALLOC, _FREE, _SHARE_WITH = 0, 1, 2


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
    known = [i.id for i in entry.instructions]
    order = scheduled(sequence.instruction_ids, known) if sequence else known
    position = {inst_id: p for p, inst_id in enumerate(order)}
    # Instructions of called computations take the position of their entry caller.
    caller = index.caller
    tops: dict[int, int | None] = {}

    def top_position(inst_id: int) -> int | None:
        chain: list[int] = []
        found: int | None = None
        at: int | None = inst_id
        while at is not None and len(chain) <= 64:
            if at in tops:
                found = tops[at]
                break
            if at in position:
                found = position[at]
                break
            chain.append(at)
            comp = index.computation_of.get(at)
            at = caller.get(comp) if comp is not None else None
        for visited in chain:
            tops[visited] = found
        return found

    users: dict[int, list[int]] = {}
    for inst in entry.instructions:
        for operand in dict.fromkeys(inst.operand_ids):
            users.setdefault(operand, []).append(inst.id)
    last_use = _last_use(users, position, index)

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


def _last_use(
    users: dict[int, list[int]], position: dict[int, int], index: ModuleIndex
) -> Callable[[int], int]:
    """The last schedule position reading an instruction's value, following its
    aliases (get-tuple-element, bitcast, tuple) to their own readers. Each
    instruction is resolved once (memo, an explicit stack: a crafted module can
    repeat operands or read itself), so all of them together cost one walk of
    the computation's operand lists."""
    memo: dict[int, int] = {}

    def resolve(root: int) -> int:
        if root in memo:
            return memo[root]
        best = {root: position.get(root, -1)}
        stack = [(root, iter(users.get(root, ())))]
        open_ = {root}
        while stack:
            node, pending = stack[-1]
            for user in pending:
                best[node] = max(best[node], position.get(user, -1))
                inst = index.by_id.get(user)
                if inst is None or inst.opcode not in _ALIASES or user in open_:
                    continue  # a cycle (crafted) adds nothing new
                if user in memo:
                    best[node] = max(best[node], memo[user])
                    continue
                open_.add(user)
                best[user] = position.get(user, -1)
                stack.append((user, iter(users.get(user, ()))))
                break
            else:
                stack.pop()
                open_.discard(node)
                memo[node] = best[node]
                if stack:
                    parent = stack[-1][0]
                    best[parent] = max(best[parent], memo[node])
        return memo[root]

    return resolve


def _simulated(
    program: XlaProgram, allocation_index: int, members: dict[int, int]
) -> list[int] | None:
    """Buffers live at the heap simulator's peak for the allocation, if it has a trace."""
    for trace in program.assignment.heap_simulator_traces:
        if trace.buffer_allocation_index != allocation_index or not trace.events:
            continue
        events = trace.events
        peak_at = _replay(events, members, len(events))[0]
        return sorted(_replay(events, members, peak_at + 1)[1])
    return None


def _replay(events: Sequence[Any], members: dict[int, int], stop: int) -> tuple[int, set[int]]:
    """Replays the first ``stop`` events as xprof's Memory Viewer does: an ALLOC
    takes a buffer's bytes, a SHARE_WITH makes a buffer hold its canonical
    buffer's bytes (taking them again if the canonical was freed), and the bytes
    are given back when the last of the canonical and its sharers is freed.
    Returns the event after which the bytes in use first reach their maximum
    (-1 when nothing is allocated) and the canonical buffers holding bytes
    after event ``stop - 1``. One pass, constant work per event."""
    holders: dict[int, int] = {}  # canonical buffer -> buffers holding its bytes
    canonical: dict[int, int] = {}  # buffer -> the canonical buffer whose bytes it holds
    total = best = 0
    best_at = -1
    for at in range(min(stop, len(events))):
        event = events[at]
        buffer = event.buffer_id
        if event.kind == _ALLOC or event.kind == _SHARE_WITH:
            owner = buffer
            if event.kind == _SHARE_WITH:
                owner = canonical.get(event.share_with_canonical_id, event.share_with_canonical_id)
            if owner not in members or buffer in canonical:
                continue  # not this allocation's, or already holding bytes (crafted)
            canonical[buffer] = owner
            holders[owner] = holders.get(owner, 0) + 1
            if holders[owner] == 1:
                total += members[owner]
                if total > best:
                    best, best_at = total, at
        elif event.kind == _FREE and buffer in canonical:
            owner = canonical.pop(buffer)
            holders[owner] -= 1
            if holders[owner] == 0:
                del holders[owner]
                total -= members[owner]
    return best_at, set(holders)


def _in_place(
    timed: list[tuple[int, tuple[int, int]]], placed: dict[int, tuple[int, int]]
) -> list[tuple[int, tuple[int, int]]]:
    """A buffer whose bytes the instruction of its last use overwrites (an in-place
    update: its output starts there and overlaps it) ends one step earlier.
    The buffers starting at each position are sorted by offset with a running
    maximum of their ends, so each overlap test is one binary search."""
    starting: dict[int, list[tuple[int, int]]] = {}
    for b, (start, _) in timed:
        offset, size = placed[b]
        starting.setdefault(start, []).append((offset, offset + size))
    lows: dict[int, list[int]] = {}
    reach: dict[int, list[int]] = {}
    for start, ranges in starting.items():
        ranges.sort()
        lows[start] = [lo for lo, _ in ranges]
        reach[start] = list(accumulate((hi for _, hi in ranges), max))
    out = []
    for b, (start, end) in timed:
        lo, hi = placed[b][0], placed[b][0] + placed[b][1]
        # Buffers starting at ``end`` (> start) are other buffers; one overlaps when
        # its offset is below ``hi`` and its end above ``lo``.
        if end > start and end in lows:
            below = bisect_left(lows[end], hi)
            if below and reach[end][below - 1] > lo:
                end -= 1
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
