"""Which program each host event ran, in one pass over time-sorted events.

The rules are ``decode/runs.py``'s (its docstring); this module applies them to
the run-record events of a capture in n log n: each line is sorted once and
swept once, every event learns its parent (the innermost event around it on
its line), and what an event holds (the modules and program ids of the markers
nested in it) is summed up from its children, keeping at most two of each: a
window names one program or none, so a third never changes the answer. The
markers of a module with a program id are sorted by time once, so "the
program ids of this module's markers during a window" is a binary search and
one look-up, not a scan of every marker per window (which made long captures,
where the same step runs thousands of times, quadratic).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass

_EXECUTE = re.compile(
    r"(?:LoadedExecutable::Execute(?:Helper)?|LoadedExecutable_Execute|"
    r"Executable::ExecuteAsyncOnStream|Executable::ExecuteOnStream|"
    r"^[^:]*:(?:_XlaRun|XlaLaunch)$|^(?:_XlaRun|XlaLaunch)$)"
)
MODULE_STATS = ("hlo_module", "module_name")
ALLOCATION = "MemoryAllocation"
# JAX's call of a jitted function: around the transfer of its arguments and its run.
CALL = "PjitFunction("
# Where a module's name stands in an event's name: ``<module>:XLA GPU module``,
# ``CommonPjRtLoadedExecutable::Execute (<module>)``.
_TOKENS = re.compile(r"[\s:()\[\],;]+")

# (module, program id or None) per run row; (line, start, end) of its window.
RunRow = tuple[int, int, int, str, int | None]
# (time, address, run, argument_of, frames text) per allocation.
AllocationRow = tuple[int, int, int, int, str | None]


@dataclass
class Event:
    line: int
    start: int
    end: int
    name: str
    stats: dict[str, object]


class Programs:
    """The programs the capture holds (``/host:metadata``): which module an
    event's name or ``program_id`` stat names."""

    def __init__(self, modules: Mapping[str, set[int]] | None = None) -> None:
        self.modules = dict(modules or {})
        by_id: dict[int, set[str]] = {}
        for module, ids in self.modules.items():
            for pid in ids:
                by_id.setdefault(pid, set()).add(module)
        self.by_id = {pid: next(iter(m)) for pid, m in by_id.items() if len(m) == 1}
        self._names: dict[str, str | None] = {}

    def named(self, name: str) -> str | None:
        """The one module of the capture that ``name`` names, else None (worked
        out once per name). Python frames and allocator events name none."""
        if not self.modules or name.startswith(("$", ALLOCATION)):
            return None
        found = self._names.get(name, "")
        if found == "":
            hits = {t for t in (name, *_TOKENS.split(name)) if t in self.modules}
            found = self._names[name] = hits.pop() if len(hits) == 1 else None
        return found


def module_of(event: Event, programs: Programs) -> str | None:
    """The module an event names: a module stat, else its name, else its program id."""
    for key in MODULE_STATS:
        value = event.stats.get(key)
        if isinstance(value, str) and value:
            return value
    named = programs.named(event.name)
    if named is not None:
        return named
    pid = program_id(event)
    return programs.by_id.get(pid) if pid is not None else None


def program_id(event: Event) -> int | None:
    value = event.stats.get("program_id")
    return value if isinstance(value, int) and value >= 0 else None


class _Few:
    """At most two distinct values of a set (enough to tell one from several)."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: list[object] = []

    def add(self, value: object) -> None:
        if len(self.values) < 2 and value not in self.values:
            self.values.append(value)

    def update(self, other: _Few) -> None:
        for value in other.values:
            self.add(value)


_EMPTY = _Few()


@dataclass
class Resolved:
    rows: list[RunRow]
    allocations: list[AllocationRow]
    modules: dict[str, set[int]]


def resolve(events: list[Event], programs: Programs) -> Resolved:
    n = len(events)
    own = [module_of(e, programs) for e in events]
    pids = [program_id(e) for e in events]
    modules: dict[str, set[int]] = {}
    for module, pid in zip(own, pids, strict=True):
        if module is not None:
            seen = modules.setdefault(module, set())
            if pid is not None:
                seen.add(pid)
    # Each line sorted once; an event's parent is the stack's top when it is pushed
    # (events on one thread nest like a call stack).
    parent = [-1] * n
    by_line: dict[int, list[int]] = {}
    for i, e in enumerate(events):
        by_line.setdefault(e.line, []).append(i)
    order: list[int] = []  # every event, parents before children
    for members in by_line.values():
        members.sort(key=lambda i: (events[i].start, -events[i].end))
        stack: list[int] = []
        for i in members:
            while stack and events[stack[-1]].end < events[i].start:
                stack.pop()
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
            order.append(i)
    # What each event holds: the modules and program ids of the markers inside it.
    # (One shared empty _Few for the many events that hold nothing; never added to.)
    held_modules = [_EMPTY] * n
    held_ids = [_EMPTY] * n
    for i in reversed(order):
        p = parent[i]
        if p < 0 or (own[i] is None and held_modules[i] is _EMPTY):
            continue
        if held_modules[p] is _EMPTY:
            held_modules[p], held_ids[p] = _Few(), _Few()
        held_modules[p].update(held_modules[i])
        held_ids[p].update(held_ids[i])
        if own[i] is not None:
            held_modules[p].add(own[i])
            if pids[i] is not None:
                held_ids[p].add(pids[i])
    linked = {"_c": _linked(events, "_c", own, pids, held_modules, held_ids)}
    linked["run_id"] = _linked(events, "run_id", own, pids, held_modules, held_ids)
    launches = _Launches(events, own, pids)

    rows: list[RunRow] = []
    run_of: dict[int, int] = {}
    for i, e in enumerate(events):
        if not _EXECUTE.search(e.name):
            continue
        found_modules, found_ids = _Few(), _Few()
        found_modules.update(held_modules[i])
        found_ids.update(held_ids[i])
        if own[i] is not None:  # its own name says it (``Execute (<module>)``)
            found_modules.add(own[i])
            if pids[i] is not None:
                found_ids.add(pids[i])
        if not found_modules.values:  # a flow, or a run id, leads to where it ran
            for key, via in (("_p", "_c"), ("run_id", "run_id")):
                if key in e.stats and not found_modules.values:
                    found_modules, found_ids = linked[via].get(e.stats[key], (_Few(), _Few()))
        if len(found_modules.values) != 1:
            continue  # no module, or several: this window names no one program
        module = str(found_modules.values[0])
        ids = found_ids.values or launches.during(module, e.start, e.end)
        run_of[i] = len(rows)
        rows.append((e.line, e.start, e.end, module, _one(ids)))
    # Top down: the innermost run window, marker, call and frames around each event.
    inner_run = [-1] * n
    inner_marker = [-1] * n
    inner_call = [-1] * n
    frames: list[str | None] = [None] * n
    for i in order:
        p = parent[i]
        if p >= 0:
            inner_run[i] = p if p in run_of else inner_run[p]
            inner_marker[i] = p if own[p] is not None else inner_marker[p]
            inner_call[i] = p if events[p].name.startswith(CALL) else inner_call[p]
            name = events[p].name
            frames[i] = frames[p] if not name.startswith("$") else _joined(frames[p], name[1:])
    starts = _run_starts(rows)
    found: list[AllocationRow] = []
    for i, e in enumerate(events):
        address = e.stats.get("addr")
        if e.name != ALLOCATION or not isinstance(address, int):
            continue
        run = run_of[inner_run[i]] if inner_run[i] >= 0 else -1
        if run < 0 and inner_marker[i] >= 0:
            # No execute window around it: the innermost event naming a program is
            # the run (``<module>:XLA GPU module`` of an older runtime).
            marker = inner_marker[i]
            if marker not in run_of:
                m = events[marker]
                module = str(own[marker])
                own_ids: list[object] = [pids[marker]] if pids[marker] is not None else []
                run_of[marker] = len(rows)
                own_ids = own_ids or launches.during(module, m.start, m.end)
                rows.append((m.line, m.start, m.end, module, _one(own_ids)))
            run = run_of[marker]
        # Made in a call but before its program runs: one of its arguments.
        argument = -1
        if run < 0 and inner_call[i] >= 0:
            argument = _call_run(starts, events[inner_call[i]])
        if run >= 0 or frames[i] is not None or argument >= 0:
            found.append((e.start, address, run, argument, frames[i]))
    return Resolved(rows, found, modules)


def _joined(outer: str | None, frame: str) -> str:
    return frame if outer is None else f"{outer}\n{frame}"


def _one(ids: list[object]) -> int | None:
    return ids[0] if len(ids) == 1 and isinstance(ids[0], int) else None


def _linked(
    events: list[Event],
    key: str,
    own: list[str | None],
    pids: list[int | None],
    held_modules: list[_Few],
    held_ids: list[_Few],
) -> dict[object, tuple[_Few, _Few]]:
    """Per value of stat ``key`` (a flow's ``_c``, a ``run_id``): the modules and
    program ids that its events name or hold, each summed once."""
    found: dict[object, tuple[_Few, _Few]] = {}
    for i, e in enumerate(events):
        value = e.stats.get(key)
        if value is None:
            continue
        mods, ids = found.setdefault(value, (_Few(), _Few()))
        mods.update(held_modules[i])
        ids.update(held_ids[i])
        if own[i] is not None:
            mods.add(own[i])
            if pids[i] is not None:
                ids.add(pids[i])
    return found


class _Launches:
    """Per module, its markers with a program id, by start (JAX's kernel launches on
    other threads): the ids that start during a window, by binary search."""

    def __init__(self, events: list[Event], own: list[str | None], pids: list[int | None]) -> None:
        grouped: dict[str, list[tuple[int, int]]] = {}
        for e, module, pid in zip(events, own, pids, strict=True):
            if module is not None and pid is not None:
                grouped.setdefault(module, []).append((e.start, pid))
        self.starts: dict[str, list[int]] = {}
        self.pids: dict[str, list[int]] = {}
        self.change: dict[str, list[int]] = {}  # the next position with another id
        for module, found in grouped.items():
            found.sort()
            ids = [pid for _, pid in found]
            change = [len(ids)] * len(ids)
            for k in range(len(ids) - 2, -1, -1):
                change[k] = k + 1 if ids[k + 1] != ids[k] else change[k + 1]
            self.starts[module] = [start for start, _ in found]
            self.pids[module] = ids
            self.change[module] = change

    def during(self, module: str, start: int, end: int) -> list[object]:
        """The program ids of the module's markers starting in [start, end]: none,
        one, or two of several."""
        starts = self.starts.get(module)
        if not starts:
            return []
        lo = bisect.bisect_left(starts, start)
        hi = bisect.bisect_right(starts, end)
        if lo >= hi:
            return []
        first = self.pids[module][lo]
        other = self.change[module][lo]
        return [first] if other >= hi else [first, self.pids[module][other]]


def _run_starts(rows: list[RunRow]) -> dict[int, list[tuple[int, int]]]:
    starts: dict[int, list[tuple[int, int]]] = {}
    for i, (line, start, *_) in enumerate(rows):
        starts.setdefault(line, []).append((start, i))
    for line_starts in starts.values():
        line_starts.sort()
    return starts


def _call_run(starts: dict[int, list[tuple[int, int]]], call: Event) -> int:
    """A call's run: the first run window that starts inside it on its line."""
    line_starts = starts.get(call.line, [])
    at = bisect.bisect_left(line_starts, (call.start, -1))
    if at < len(line_starts) and line_starts[at][0] <= call.end:
        return line_starts[at][1]
    return -1
