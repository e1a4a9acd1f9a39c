"""Run records of compiled programs: which program a host thread was running when
it made an allocation, and where the Python frames say it came from.

Read only for captures with a ``/host:metadata`` plane (XLA programs), from the
host planes' lines, each parsed on its own by upb (``xplane.proto``):

- a *module marker* is an event that names a program the capture holds: by an
  ``hlo_module`` or ``module_name`` stat (an HLO op run on the CPU, a kernel
  launch, ``GpuExecutable::ExecuteThunks``), by its name (``<module>:XLA GPU
  module``, ``CommonPjRtLoadedExecutable::Execute (<module>)``), or by a
  ``program_id`` alone; optionally with a ``program_id``;
- an *execute window* is an event whose name says the runtime is running a
  program (``_EXECUTE``: PJRT's ``Execute`` / ``ExecuteHelper``, XLA's
  ``CpuExecutable::ExecuteAsyncOnStream``, TensorFlow's ``_XlaRun`` /
  ``XlaLaunch``); it runs the module it names or of the markers nested in it on
  its line, or of those nested in the events its flow (``_p``/``_c``) or its
  ``run_id`` leads to. Its
  program id is its markers' one, else that of the markers of the same module
  on other lines of the plane during it (JAX's kernel launches), when one;
- a ``MemoryAllocation`` covered by a window with a module, on its own line,
  is tied to that run (``RunRecords.allocation_runs``), and one that no window
  covers to the innermost marker around it; one made inside JAX's
  ``PjitFunction(<fn>)`` before its program runs (``DevicePut`` of a Python
  scalar or a host array) is an argument of the run that call makes.

The Python tracer's frames (``$file.py:LINE function`` events) enclosing an
allocation on its line are kept with it (``tables/sources.py`` picks the user's).
The rules are applied in one pass over time-sorted events (``run_windows.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from traceparse._proto import xplane_pb2
from traceparse.decode import native, wire
from traceparse.decode.planes import RunEvents
from traceparse.decode.run_windows import (
    _EXECUTE,
    ALLOCATION,
    CALL,
    MODULE_STATS,
    Event,
    Programs,
    resolve,
)

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


# (event names, stat names, line byte ranges) of a host plane.
HostPlane = tuple[dict[int, str], dict[int, str], list[tuple[int, int]]]


def read_runs(
    data: wire.Buffer,
    planes: Sequence[HostPlane],
    relative_ns: Callable[[int], int],
    programs: Mapping[str, set[int]] | None = None,
) -> RunRecords:
    """Run records of the host ``planes``, each line parsed by upb: what the
    decoder does where the compiled pass did not find them (``from_events``).
    ``programs``: the capture's modules and their program ids."""
    known = Programs(programs)
    events: list[Event] = []
    line_no = -1
    for names, stat_names, lines in planes:
        wanted = _wanted(stat_names)
        named = _named(names, known)
        # What keeps an event as a run record, as the compiled pass decides it.
        keep = _Keep(
            {k for k, is_named in named.items() if is_named},
            {k for k, key in wanted.items() if key in _KEEP_STATS},
        )
        for start, end in lines:
            line_no += 1
            timestamp_ns, line_events = _read_line(data, start, end, keep)
            base = relative_ns(timestamp_ns) * 1000
            for metadata_id, offset_ps, duration_ps, line_stats in line_events:
                stats: dict[str, object] = {}
                for stat_id, kind, value in line_stats:
                    key = wanted.get(stat_id)
                    if key is not None:
                        _add_stat(stats, key, kind, value, stat_names)
                if named.get(metadata_id, False) or stats.keys() & _KEEP_STATS:
                    t = base + offset_ps
                    name = names.get(metadata_id, "")
                    events.append(Event(line_no, t, t + duration_ps, name, stats))
    return _resolve(events, known)


# (metadata id, offset_ps, duration_ps, [(stat id, value kind, value)]) of an event.
_LineEvent = tuple[int, int, int, list[tuple[int, str, object]]]


@dataclass(frozen=True)
class _Keep:
    """What makes an event a run record (``run_ids``): its metadata id (int64),
    or a stat with one of these ids (int64)."""

    named: set[int]
    stats: set[int]


def _read_line(
    data: wire.Buffer, start: int, end: int, keep: _Keep
) -> tuple[int, list[_LineEvent]]:
    """A line's timestamp_ns and events: parsed by upb, or, where upb refuses it,
    read off the wire as the compiled pass reads it (``_wire_line``). upb refuses
    a line for a flaw anywhere in it (text that is not UTF-8, a damaged stat of an
    op event) that the compiled pass never reads or reads leniently; a damaged
    stat of a run record refuses the capture on both paths (``WireError``)."""
    line = xplane_pb2.XLine()
    try:
        line.ParseFromString(data[start:end])
    except (DecodeError, UnicodeDecodeError):  # protobuf 3.20 (pure Python): the latter
        return _wire_line(data, start, end, keep)
    # upb also accepts what the compiled pass refuses: a group (wire types 3 and
    # 4) among a stat's unknown fields. A line written the usual way, with no
    # unknown field, is exactly as long as upb writes it back without them;
    # any other line is read off the wire (real captures: none, in the fixtures).
    line.DiscardUnknownFields()
    if line.ByteSize() != end - start:
        return _wire_line(data, start, end, keep)
    found: list[_LineEvent] = []
    for event in line.events:
        stats = []
        for stat in event.stats:
            kind = stat.WhichOneof("value")
            if kind is not None:
                stats.append((stat.metadata_id, kind, getattr(stat, kind)))
        found.append((event.metadata_id, event.offset_ps, event.duration_ps, stats))
    return line.timestamp_ns, found


def _wire_line(
    data: wire.Buffer, start: int, end: int, keep: _Keep
) -> tuple[int, list[_LineEvent]]:
    """``_read_line`` off the wire, with protobuf's rules: the last value of a field
    wins, ``num_occurrences`` clears ``offset_ps`` (a oneof) and the last value
    field of a stat is its value; text is decoded with replacement characters.
    Only the run records' events come back, and only their stats are parsed in
    full (``scan_event`` and ``read_stats`` in ``_native.c``)."""
    timestamp_ns = 0
    found: list[_LineEvent] = []
    for number, kind, _, field_end, value in wire.iter_fields(data, start, end):
        if number == 3 and kind == wire.VARINT:
            timestamp_ns = wire.as_int64(value)
        elif number == 4 and kind == wire.LEN:
            event = _wire_event(data, value, field_end, keep)
            if event is not None:
                found.append(event)
    return timestamp_ns, found


def _wire_event(data: wire.Buffer, start: int, end: int, keep: _Keep) -> _LineEvent | None:
    """An event's own fields, and its stats when it is a run record (else None)."""
    metadata_id = offset = duration = 0
    spans: list[tuple[int, int]] = []
    for number, kind, _, field_end, value in wire.iter_fields(data, start, end):
        if kind == wire.VARINT and number == 1:
            metadata_id = wire.as_int64(value)
        elif kind == wire.VARINT and number == 2:
            offset = wire.as_int64(value)
        elif kind == wire.VARINT and number == 5:
            offset = 0  # num_occurrences: the other member of offset_ps's oneof
        elif kind == wire.VARINT and number == 3:
            duration = wire.as_int64(value)
        elif kind == wire.LEN and number == 4:
            spans.append((value, field_end))
    if metadata_id not in keep.named and not any(
        _stat_id(data, s, e) in keep.stats for s, e in spans
    ):
        return None  # not a run record: its stats are not read (nor on the compiled pass)
    stats = [_wire_stat(data, s, e) for s, e in spans]
    return metadata_id, offset, duration, [s for s in stats if s is not None]


def _stat_id(data: wire.Buffer, start: int, end: int) -> int | None:
    """A stat's metadata id (its last varint field 1; 0 when none), or None when the
    stat does not read cleanly: then it keeps nothing (``stat_id`` in ``_native.c``)."""
    stat_id = 0
    try:
        for number, kind, _, _, value in wire.iter_fields(data, start, end):
            if number == 1 and kind == wire.VARINT:
                stat_id = value
    except wire.WireError:
        return None
    return wire.as_int64(stat_id)


def _wire_stat(data: wire.Buffer, start: int, end: int) -> tuple[int, str, object] | None:
    stat_id = 0
    found: tuple[int, object] | None = None
    for number, kind, _, field_end, value in wire.iter_fields(data, start, end):
        if number == 1 and kind == wire.VARINT:
            stat_id = value
        elif number in _KIND_NAMES and kind == (wire.LEN if number == _STR else wire.VARINT):
            if number == _STR:
                found = (number, bytes(data[value:field_end]).decode("utf-8", errors="replace"))
            else:
                found = (number, value if number != _INT64 else wire.as_int64(value))
        elif (number == 2 and kind == _FIXED64) or (number == 6 and kind == wire.LEN):
            found = None  # a double or bytes value: one run records do not read
    if found is None:
        return None
    return wire.as_int64(stat_id), _KIND_NAMES[found[0]], found[1]


def run_ids(
    names: dict[int, str],
    stat_names: dict[int, str],
    programs: Mapping[str, set[int]] | None = None,
) -> tuple[list[int], list[int]]:
    """(event metadata ids whose name keeps an event as a run record, stat ids
    whose stat keeps any event): what the compiled pass looks for."""
    wanted = _wanted(stat_names)
    named = [k for k, keep in _named(names, Programs(programs)).items() if keep]
    return named, [k for k, key in wanted.items() if key in _KEEP_STATS]


def from_events(
    data: wire.Buffer,
    planes: Sequence[tuple[HostPlane, RunEvents]],
    programs: Mapping[str, set[int]] | None = None,
) -> RunRecords:
    """Run records from the events the compiled pass found on the host planes
    (``planes.RunEvents``, with their plane): the same records ``read_runs``
    makes, without parsing every line again."""
    known = Programs(programs)
    events: list[Event] = []
    line_no = 0
    for (names, stat_names, lines), found in planes:
        wanted = _wanted(stat_names)
        named = _named(names, known)
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
                events.append(Event(line_no + line, t, end, names.get(mid, ""), stats))
        line_no += len(lines)
    return _resolve(events, known)


_INT64, _STR = 4, 5
_FIXED64 = 1  # wire type of a double
# The XStat value fields run records read, by field number, as WhichOneof names them.
_KIND_NAMES = {3: "uint64_value", 4: "int64_value", 5: "str_value", 7: "ref_value"}


def _wanted(stat_names: dict[int, str]) -> dict[int, str]:
    """The stats run records read, by id."""
    keys = (*MODULE_STATS, "program_id", "run_id", "_p", "_c", "addr")
    return {k: n for k, n in stat_names.items() if n in keys}


def _named(names: dict[int, str], programs: Programs) -> dict[int, bool]:
    """Whether an event's name alone keeps it, worked out once per name: the
    allocator's, a frame's, a call's, an execute window's, or one naming a
    program of the capture (``<module>:XLA GPU module``)."""
    return {
        k: n == ALLOCATION
        or n.startswith(("$", CALL))
        or bool(_EXECUTE.search(n))
        or programs.named(n) is not None
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


# Stats that make any event a run record: a module or program it names, a flow,
# a run id other events of the run share.
_KEEP_STATS = frozenset({*MODULE_STATS, "program_id", "run_id", "_p", "_c"})


def _resolve(events: list[Event], programs: Programs) -> RunRecords:
    records = RunRecords()
    found = resolve(events, programs)
    records.modules = found.modules
    rows = found.rows
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
    tied = found.allocations
    if tied:
        records.allocation_runs = pd.DataFrame(
            {
                "time_ps": np.array([f[0] for f in tied], dtype=np.int64),
                # Addresses past 2**63 wrap, as the events table reads them.
                "address": np.array([f[1] & _U64 for f in tied], dtype=np.uint64).view(np.int64),
                "run": np.array([f[2] for f in tied], dtype=np.int64),
                "argument_of": np.array([f[3] for f in tied], dtype=np.int64),
                "frames": pd.Series([f[4] for f in tied], dtype=object),
            }
        )
    return records
