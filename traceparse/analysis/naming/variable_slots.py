"""The variables of one group during ``variable_match``'s walk, indexed.

The walk asks, for each allocation of a group (one host, allocator, dtype,
shape and size) in time order: which variable without a buffer its op
initializes, which variable's buffer an assign replaces (freed soonest), which
is the first variable without a buffer. Each is answered by an index, not a
scan of the group: by initializer name (the ``/``-parts of the op's name are
looked up), by slot order with a cursor (a variable never returns to having no
buffer, or a buffer from before the capture), and by free time in a heap. So
10,000 variables against 10,000 allocations of one shape cost a few look-ups
per allocation, where a regex per pair took 50 s.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable
from dataclasses import dataclass

CREATED = "inventory: created during capture"
ASSIGNED = "inventory: assigned during capture"
BEFORE = object()  # a current buffer allocated before the capture


@dataclass
class Slot:
    """One variable of a group and its current buffer during the walk."""

    row: object  # the variable's row label
    facts: dict[str, object]
    at_start: bool
    names: tuple[str, ...]  # its initializer's op name holds one as whole parts
    buffer: object = None  # an allocation's label, BEFORE, or None (none yet)
    buffer_free: int | None = None  # when the current buffer is freed (None: never)


class _Queue:
    """Slot positions in order, of which those still in a state (no buffer yet, a
    buffer from before the capture) are asked for first; a slot never returns to
    the state it leaves, so each is passed over once."""

    def __init__(self, positions: list[int], still: Callable[[int], bool]) -> None:
        self.positions = positions
        self.at = 0
        self.still = still

    def first(self) -> int | None:
        while self.at < len(self.positions) and not self.still(self.positions[self.at]):
            self.at += 1
        return self.positions[self.at] if self.at < len(self.positions) else None


class SlotIndex:
    """The walk's questions about a group's variables, each answered without a scan
    of the group: by initializer name, in slot order, and by when their current
    buffer is freed (a heap). 10,000 variables against 10,000 allocations of one
    shape cost a regex per pair before (50 s); now a few look-ups per allocation."""

    def __init__(self, slots: list[Slot]) -> None:
        self.slots = slots

        def fresh(k: int) -> bool:
            return slots[k].buffer is None and not slots[k].at_start

        self.by_name: dict[str, _Queue] = {}
        positions: dict[str, list[int]] = {}
        for k, slot in enumerate(slots):
            if not slot.at_start:
                for name in slot.names:
                    positions.setdefault(name, []).append(k)
        for name, found in positions.items():
            self.by_name[name] = _Queue(found, fresh)
        self.longest = max((len(name) for name in positions), default=-1)
        self.fresh = _Queue([k for k in range(len(slots)) if fresh(k)], fresh)
        weights = [k for k in range(len(slots)) if fresh(k) and slots[k].facts["role"] == "weight"]
        self.fresh_weights = _Queue(weights, fresh)
        self.before = _Queue(
            [k for k, s in enumerate(slots) if s.buffer is BEFORE],
            lambda k: slots[k].buffer is BEFORE,
        )
        # (free time, slot, claim number, buffer) of each slot's current buffer.
        self.freed: list[tuple[int, int, int, object]] = []
        self.claims = 0
        self._ops: dict[str, list[_Queue]] = {}

    def initialized_by(self, op: str) -> int | None:
        """The first variable without a buffer whose initializer ``op`` is: its path
        (or the path with ``_`` for ``/``) as whole ``/``-parts of the op's name."""
        queues = self._ops.get(op)
        if queues is None:
            queues = self._ops[op] = [
                self.by_name[n] for n in _parts(op, self.longest) if n in self.by_name
            ]
        found = [k for q in queues if (k := q.first()) is not None]
        return min(found) if found else None

    def replaced(self, when: int, spare: list[int] | None) -> int | None:
        """The variable an assign at ``when`` gave a new buffer: one whose current buffer
        is freed at or after it (soonest, then first), then one from before the
        capture with a matching free, then one with no buffer yet."""
        while self.freed:
            free, k, _, buffer = self.freed[0]
            if self.slots[k].buffer == buffer and free >= when:
                return k
            heapq.heappop(self.freed)  # replaced since, or freed before: never again
        before = self.before.first()
        if before is not None:
            if spare is None:
                return before
            later = bisect.bisect_left(spare, when)
            if later < len(spare):
                spare.pop(later)
                return before
        return self.fresh.first()

    def claim(
        self,
        k: int,
        label: object,
        when: int,
        free: int | None,
        how: str,
        named: dict[object, dict[str, object]],
        covered: dict[object, dict[str, object]],
    ) -> None:
        take(self.slots[k], label, when, free, how, named, covered)
        if free is not None:
            self.claims += 1
            heapq.heappush(self.freed, (free, k, self.claims, label))


def _parts(op: str, longest: int) -> list[str]:
    """Every run of whole ``/``-parts of ``op`` (from a start of the name or after a
    ``/`` to the end or before a ``/``) of at most ``longest`` characters: what the
    pattern ``(^|/)name(/|$)`` can match."""
    cuts = [i for i, c in enumerate(op) if c == "/"]
    starts = [0, *(i + 1 for i in cuts)]
    ends = [*cuts, len(op)]
    found = []
    for i in starts:
        for j in ends[bisect.bisect_left(ends, i) :]:
            if j - i > longest:
                break
            found.append(op[i:j])
    return found


def take(
    slot: Slot,
    label: object,
    when: int,
    free: int | None,
    how: str,
    named: dict[object, dict[str, object]],
    covered: dict[object, dict[str, object]],
) -> None:
    if slot.buffer is not None and slot.buffer is not BEFORE:
        named[slot.buffer]["holds_until_ps"] = when
    named[label] = {**slot.facts, "named_by": how, "holds_from_ps": when, "holds_until_ps": None}
    covered.setdefault(slot.row, {"variable": slot.facts["variable"], "covered_from_ps": when})
    slot.buffer = label
    slot.buffer_free = free
