"""Run records of compiled programs: which program a host thread was running when
it made an allocation, and where the Python frames say it came from.

Read only for captures with a ``/host:metadata`` plane (XLA programs), from the
host planes' lines, each parsed on its own by upb (``xplane.proto``):

- a *module marker* is an event with an ``hlo_module`` or ``module_name`` stat
  (an HLO op run on the CPU, a kernel launch, ``GpuExecutable::ExecuteThunks``),
  optionally with a ``program_id``;
- an *execute window* is an event whose name says the runtime is running a
  program (``_EXECUTE``: PJRT's ``Execute`` / ``ExecuteHelper``, XLA's
  ``CpuExecutable::ExecuteAsyncOnStream``, TensorFlow's ``_XlaRun`` /
  ``XlaLaunch``); it runs the module of the markers nested in it on its line,
  or of those nested in the events its flow (``_p``/``_c``) leads to. Its
  program id is its markers' one, else that of the markers of the same module
  on other lines of the plane during it (JAX's kernel launches), when one;
- a ``MemoryAllocation`` covered by a window with a module, on its own line,
  is tied to that run (``RunRecords.allocation_runs``); one made inside JAX's
  ``PjitFunction(<fn>)`` before its program runs (``DevicePut`` of a Python
  scalar or a host array) is an argument of the run that call makes.

The Python tracer's frames (``$file.py:LINE function`` events) enclosing an
allocation on its line are kept with it (``tables/sources.py`` picks the user's).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from traceparse._proto import xplane_pb2
from traceparse.decode import native, wire
from traceparse.decode.planes import RunEvents

_EXECUTE = re.compile(
    r"(?:LoadedExecutable::Execute(?:Helper)?|LoadedExecutable_Execute|"
    r"Executable::ExecuteAsyncOnStream|Executable::ExecuteOnStream|"
    r"^[^:]*:(?:_XlaRun|XlaLaunch)$|^(?:_XlaRun|XlaLaunch)$)"
)
_MODULE_STATS = ("hlo_module", "module_name")
_ALLOCATION = "MemoryAllocation"
# JAX's call of a jitted function: around the transfer of its arguments and its run.
_CALL = "PjitFunction("
_U64 = (1 << 64) - 1

# One row per execute window with a module: on which line, when, what ran.
RUN_COLUMNS: dict[str, str] = {
    "line": "int64",
    "start_ps": "int64",
    "end_ps": "int64",
    "module": "object",
    "program_id": "Int64",
}
# One row per MemoryAllocation on a host line inside a run or Python frames: its
# innermost run (-1: none) and the frames around it.
ALLOCATION_RUN_COLUMNS: dict[str, str] = {
    "time_ps": "int64",
    "address": "int64",
    "run": "int64",
    "argument_of": "int64",  # the run whose argument it is (-1: none)
    "frames": "object",  # the enclosing Python frames, outermost first, one a line
}


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    # Not decode.trace.empty_frame: trace.py names RunRecords, and two modules
    # never import each other (tests/test_layout.py).
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})


@dataclass
class RunRecords:
    """What the host lines say about program runs (see the module docstring)."""

    runs: pd.DataFrame = field(default_factory=lambda: _empty(RUN_COLUMNS))
    allocation_runs: pd.DataFrame = field(default_factory=lambda: _empty(ALLOCATION_RUN_COLUMNS))
    # Every module named by a marker, with the program ids seen for it.
    modules: dict[str, set[int]] = field(default_factory=dict)


@dataclass
class _Event:
    line: int
    start: int
    end: int
    name: str
    stats: dict[str, object]


# (event names, stat names, line byte ranges) of a host plane.
HostPlane = tuple[dict[int, str], dict[int, str], list[tuple[int, int]]]


def read_runs(
    data: wire.Buffer, planes: Sequence[HostPlane], relative_ns: Callable[[int], int]
) -> RunRecords:
    """Run records of the host ``planes``, each line parsed by upb: what the
    decoder does where the compiled pass did not find them (``from_events``)."""
    events: list[_Event] = []
    line_no = 0
    for names, stat_names, lines in planes:
        wanted = _wanted(stat_names)
        named = _named(names)
        for start, end in lines:
            line = xplane_pb2.XLine()
            try:
                line.ParseFromString(data[start:end])
            except DecodeError:
                continue  # the hot path reports a bad line; run records are a bonus
            base = relative_ns(line.timestamp_ns) * 1000
            for event in line.events:
                stats: dict[str, object] = {}
                for stat in event.stats:
                    key = wanted.get(stat.metadata_id)
                    kind = stat.WhichOneof("value")
                    if key is not None and kind is not None:
                        _add_stat(stats, key, kind, getattr(stat, kind), stat_names)
                if named.get(event.metadata_id, False) or stats.keys() & _KEEP_STATS:
                    t = base + event.offset_ps
                    name = names.get(event.metadata_id, "")
                    events.append(_Event(line_no, t, t + event.duration_ps, name, stats))
            line_no += 1
    return _resolve(events)


def run_ids(names: dict[int, str], stat_names: dict[int, str]) -> tuple[list[int], list[int]]:
    """(event metadata ids whose name keeps an event as a run record, stat ids
    whose stat keeps any event): what the compiled pass looks for."""
    wanted = _wanted(stat_names)
    named = [k for k, keep in _named(names).items() if keep]
    return named, [k for k, key in wanted.items() if key in _KEEP_STATS]


def from_events(data: wire.Buffer, planes: Sequence[tuple[HostPlane, RunEvents]]) -> RunRecords:
    """Run records from the events the compiled pass found on the host planes
    (``planes.RunEvents``, with their plane): the same records ``read_runs``
    makes, without parsing every line again."""
    events: list[_Event] = []
    line_no = 0
    for (names, stat_names, lines), found in planes:
        wanted = _wanted(stat_names)
        named = _named(names)
        offsets, durations, stat_columns = native.read_stats(data, found.starts, found.ends)
        owner, stat_id, kind, bits, start, length = (c.tolist() for c in stat_columns)
        per_event: list[dict[str, object]] = [{} for _ in range(len(found.starts))]
        for i, sid, k, value, at, size in zip(
            owner, stat_id, kind, bits, start, length, strict=True
        ):
            key = wanted.get(sid)
            if key is None or k not in _KIND_NAMES:
                continue
            # As upb hands them out: text decoded, uint64 and refs unsigned.
            if k == _STR:
                value = data[at : at + size].decode("utf-8", errors="replace")
            elif k != _INT64:
                value &= _U64
            _add_stat(per_event[i], key, _KIND_NAMES[k], value, stat_names)
        base = found.line_ts_ns[found.line] * 1000
        times = base + offsets.view(np.int64)
        ends = times + durations.view(np.int64)
        mids = found.metadata_ids.view(np.int64).tolist()  # map keys are int64
        rows = zip(found.line.tolist(), times.tolist(), ends.tolist(), mids, per_event, strict=True)
        for line, t, end, mid, stats in rows:
            if named.get(mid, False) or stats.keys() & _KEEP_STATS:
                events.append(_Event(line_no + line, t, end, names.get(mid, ""), stats))
        line_no += len(lines)
    return _resolve(events)


_INT64, _STR = 4, 5
# The XStat value fields run records read, by field number, as WhichOneof names them.
_KIND_NAMES = {3: "uint64_value", 4: "int64_value", 5: "str_value", 7: "ref_value"}


def _wanted(stat_names: dict[int, str]) -> dict[int, str]:
    """The stats run records read, by id."""
    keys = (*_MODULE_STATS, "program_id", "_p", "_c", "addr")
    return {k: n for k, n in stat_names.items() if n in keys}


def _named(names: dict[int, str]) -> dict[int, bool]:
    """Whether an event's name alone keeps it, worked out once per name."""
    return {
        k: n == _ALLOCATION or n.startswith(("$", _CALL)) or bool(_EXECUTE.search(n))
        for k, n in names.items()
    }


def _add_stat(
    stats: dict[str, object], key: str, kind: str, value: object, stat_names: dict[int, str]
) -> None:
    """A stat's value under ``key`` (the last one wins): a ref is the stat name it
    points to; text and whole numbers are kept as they are, other kinds not."""
    if kind == "ref_value":
        stats[key] = stat_names.get(value)  # type: ignore[call-overload]
    elif kind in ("str_value", "int64_value", "uint64_value"):
        stats[key] = value


# Stats that make any event a run record: a module or program it names, a flow.
_KEEP_STATS = frozenset({*_MODULE_STATS, "_p", "_c"})


def _module_of(event: _Event) -> str | None:
    for key in _MODULE_STATS:
        value = event.stats.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _program_id(event: _Event) -> int | None:
    value = event.stats.get("program_id")
    return value if isinstance(value, int) and value >= 0 else None


def _resolve(events: list[_Event]) -> RunRecords:
    records = RunRecords()
    markers = [e for e in events if _module_of(e) is not None]
    for m in markers:
        ids = records.modules.setdefault(str(_module_of(m)), set())
        if (pid := _program_id(m)) is not None:
            ids.add(pid)
    # Per event: the markers nested in it on its line (a sweep per line: events
    # on one thread nest like a call stack).
    inside: dict[int, list[_Event]] = {}
    enclosing: dict[int, list[_Event]] = {}  # allocation -> windows and frames around it
    lines: dict[int, list[_Event]] = {}
    for e in events:
        lines.setdefault(e.line, []).append(e)
    for line_events in lines.values():
        line_events.sort(key=lambda e: (e.start, -e.end))
        stack: list[_Event] = []
        for e in line_events:
            while stack and stack[-1].end < e.start:
                stack.pop()
            if _module_of(e) is not None:
                for outer in stack:
                    inside.setdefault(id(outer), []).append(e)
            if e.name == _ALLOCATION:
                enclosing[id(e)] = list(stack)
            stack.append(e)
    consumers: dict[object, list[_Event]] = {}
    for e in events:
        if "_c" in e.stats:
            consumers.setdefault(e.stats["_c"], []).append(e)
    by_module: dict[str, list[_Event]] = {}
    for m in markers:
        if _program_id(m) is not None:
            by_module.setdefault(str(_module_of(m)), []).append(m)

    rows: list[tuple[int, int, int, str, int | None]] = []
    run_of: dict[int, int] = {}
    for window in (e for e in events if _EXECUTE.search(e.name)):
        found = list(inside.get(id(window), []))
        if not found and "_p" in window.stats:  # the flow leads to where it ran
            for consumer in consumers.get(window.stats["_p"], []):
                found += inside.get(id(consumer), [])
                found += [consumer] if _module_of(consumer) else []
        modules = {str(_module_of(m)) for m in found}
        if len(modules) != 1:
            continue  # no module, or several: this window names no one program
        module = modules.pop()
        ids = {p for m in found if (p := _program_id(m)) is not None}
        if not ids:  # kernel launches of the module on other threads during the window
            ids = {
                p
                for m in by_module.get(module, [])
                if m.line != window.line
                and window.start <= m.start <= window.end
                and (p := _program_id(m)) is not None
            }
        run_of[id(window)] = len(rows)
        rows.append(
            (window.line, window.start, window.end, module, ids.pop() if len(ids) == 1 else None)
        )
    if rows:
        records.runs = pd.DataFrame(
            {
                "line": np.array([r[0] for r in rows], dtype=np.int64),
                "start_ps": np.array([r[1] for r in rows], dtype=np.int64),
                "end_ps": np.array([r[2] for r in rows], dtype=np.int64),
                "module": pd.Series([r[3] for r in rows], dtype=object),
                "program_id": pd.array([r[4] for r in rows], dtype="Int64"),
            }
        )
    # A call's run: the first run window that starts inside it on its line.
    starts: dict[int, list[tuple[int, int]]] = {}
    for i, (line, start, *_) in enumerate(rows):
        starts.setdefault(line, []).append((start, i))
    for line_starts in starts.values():
        line_starts.sort()

    def call_run(call: _Event) -> int:
        line_starts = starts.get(call.line, [])
        at = bisect.bisect_left(line_starts, (call.start, -1))
        if at < len(line_starts) and line_starts[at][0] <= call.end:
            return line_starts[at][1]
        return -1

    found_rows: list[tuple[int, int, int, int, str | None]] = []
    for e in events:
        address = e.stats.get("addr")
        if e.name != _ALLOCATION or not isinstance(address, int):
            continue
        stack = enclosing.get(id(e), [])
        runs = [run_of[id(w)] for w in stack if id(w) in run_of]
        calls = [w for w in stack if w.name.startswith(_CALL)]
        # Made in a call but before its program runs: one of its arguments.
        argument = call_run(calls[-1]) if calls and not runs else -1
        frames = [w.name[1:] for w in stack if w.name.startswith("$")]
        if runs or frames or argument >= 0:
            text = "\n".join(frames) if frames else None
            run = runs[-1] if runs else -1
            found_rows.append((e.start, address & _U64, run, argument, text))
    if found_rows:
        records.allocation_runs = pd.DataFrame(
            {
                "time_ps": np.array([f[0] for f in found_rows], dtype=np.int64),
                # Addresses past 2**63 wrap, as the events table reads them.
                "address": np.array([f[1] for f in found_rows], dtype=np.uint64).view(np.int64),
                "run": np.array([f[2] for f in found_rows], dtype=np.int64),
                "argument_of": np.array([f[3] for f in found_rows], dtype=np.int64),
                "frames": pd.Series([f[4] for f in found_rows], dtype=object),
            }
        )
    return records
