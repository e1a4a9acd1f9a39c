"""Find the planes, the lines and the events worth decoding, without parsing
the rest.

Planes are walked field by field and their metadata parsed with upb; lines
stay where they are in the file. ``framing`` finds every event of a line and
reads its metadata id and duration with numpy. Only memory events and step
markers are kept for a full decode; TF op events give up just their duration,
summed per op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from traceparse._proto import xplane_skim_pb2
from traceparse.decode import native, wire
from traceparse.decode.lines import Events, LineReader, index_in

_PLANE_LINES = 3  # XPlane.lines
_LINE_TIMESTAMP = 3  # XLine.timestamp_ns
# The plane where the profiler keeps every XLA program (HloProto bytes, often
# megabytes): its metadata is left unparsed here and read only when asked for.
METADATA_PLANE = b"/host:metadata"


@dataclass
class Plane:
    """A plane's metadata, parsed, and where its lines lie in the file."""

    meta: xplane_skim_pb2.SkimPlane
    lines: list[tuple[int, int]]  # (start, end) of each XLine's bytes
    # (start, end) of the fields after the lines when they were not parsed
    # (the metadata plane: see METADATA_PLANE).
    deferred: tuple[int, int] | None = None

    def line_timestamps(self, data: wire.Buffer) -> Iterator[int]:
        """Each line's timestamp_ns, read off its first fields without reading its
        events (serializers write the timestamp before the events)."""
        for start, end in self.lines:
            for number, kind, _, _, value in wire.iter_fields(data, start, end):
                if number == _LINE_TIMESTAMP and kind == wire.VARINT:
                    yield wire.as_int64(value)
                if number >= _LINE_TIMESTAMP:
                    break


def split_planes(data: wire.Buffer) -> list[Plane]:
    """Find the planes and their lines without reading the lines.

    Serializers write a plane's id and name, then its lines, then the metadata
    maps. The walk over a plane's fields stops at the first field numbered past
    the lines, and upb parses from there to the end in one go. Lines found
    there (an unusual file) are looked up in the bytes afterwards.
    """
    view = memoryview(data)
    planes = []
    for number, _, _, end, start in wire.iter_fields(data, 0, len(data)):
        if number != 1:  # XSpace.planes; errors, warnings and hostnames are not needed
            continue
        meta = xplane_skim_pb2.SkimPlane()
        lines: list[tuple[int, int]] = []
        rest = start
        for field, _, field_start, field_end, value in wire.iter_fields(data, start, end):
            rest = field_end
            if field == _PLANE_LINES:
                lines.append((value, field_end))
            elif field > _PLANE_LINES:
                rest = field_start
                break
            else:
                _merge(meta, view[field_start:field_end])  # id, name
        if meta.name == METADATA_PLANE and not lines:
            planes.append(Plane(meta, lines, deferred=(rest, end)))
            continue
        _merge(meta, view[rest:end])
        if meta.lines:
            meta.ClearField("lines")
            for field, _, _, field_end, value in wire.iter_fields(data, rest, end):
                if field == _PLANE_LINES:
                    lines.append((value, field_end))
        planes.append(Plane(meta, lines))
    return planes


def _merge(message: xplane_skim_pb2.SkimPlane, data: memoryview) -> None:
    # upb reads any buffer; the stubs only admit bytes.
    message.MergeFromString(data)  # type: ignore[arg-type]


@dataclass
class Selected:
    """Events picked from one plane, with the facts known before decoding them."""

    data: wire.Buffer
    starts: np.ndarray  # where each event's XEvent bytes lie in ``data``
    ends: np.ndarray
    metadata_ids: np.ndarray
    line_ts_ns: np.ndarray
    order: np.ndarray  # (line index, event index) folded into one sortable key

    def __len__(self) -> int:
        return len(self.starts)

    def batches(self, size: int) -> Iterator[Selected]:
        for lo in range(0, len(self), size):
            rows = slice(lo, lo + size)
            yield Selected(
                self.data,
                self.starts[rows],
                self.ends[rows],
                self.metadata_ids[rows],
                self.line_ts_ns[rows],
                self.order[rows],
            )

    def joined(self) -> wire.Chunks:
        """The events' bytes in one buffer with ``wire.PAD`` bytes after the last:
        the file itself when that holds, else a copy."""
        data = self.data
        if not len(self) or int(self.ends.max()) <= len(data) - wire.PAD:
            buf = np.frombuffer(data, dtype=np.uint8)
            return wire.Chunks(data, buf, self.starts, self.ends)
        spans = zip(self.starts.tolist(), self.ends.tolist(), strict=True)
        return wire.join([data[s:e] for s, e in spans])


@dataclass
class OpTimes:
    """Per op event metadata id: how many events, and their total duration_ps."""

    metadata_ids: np.ndarray
    counts: np.ndarray
    total_ps: np.ndarray


@dataclass
class RunEvents:
    """The events of a plane that may be run records (``runs.py``): where they
    are, their metadata ids, their lines' indexes in the plane, and each line's
    timestamp on the capture's clock (ns)."""

    starts: np.ndarray
    ends: np.ndarray
    metadata_ids: np.ndarray
    line: np.ndarray
    line_ts_ns: np.ndarray


def select(
    data: wire.Buffer,
    lines: list[tuple[int, int]],
    memory: np.ndarray,
    ops: np.ndarray,
    markers: np.ndarray,
    relative_ns: Callable[[int], int],
    runs: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[Selected, OpTimes, RunEvents | None]:
    """One pass over every line: picks memory events and step markers (decoded
    later with their stats) and sums the duration of TF op events per metadata
    id, without building a Python object per skipped event.

    ``memory`` and ``ops`` are event metadata ids, ``markers`` the stat ids of
    "step_num" (``wire.metadata_ids``). A step marker carries an integer stat
    with one of those: the reader marks events that may; decoding confirms.

    ``runs`` (event ids, stat ids) asks the compiled pass to find the events
    with one of those ids or a stat of one of those (the run records' events)
    on the way; the numpy path does not, and returns None for them."""
    memory, ops, markers = np.unique(memory), np.unique(ops), np.unique(markers)
    if native.available():
        return _select_native(data, lines, memory, ops, markers, relative_ns, runs)
    buf = np.frombuffer(data, dtype=np.uint8)
    picked = _Picker(data)
    op_counts = np.zeros(ops.size, dtype=np.int64)
    op_totals = np.zeros(ops.size, dtype=np.int64)
    for line_index, (lo, hi) in enumerate(lines):
        reader = LineReader(data, buf, lo, hi, ops, markers)
        order = line_index * (1 << 32)
        for events in reader.events():
            keep = (index_in(events.metadata_ids, memory) >= 0) | events.marked
            picked.add(events, np.flatnonzero(keep), order)
            order += len(events)
            if ops.size:
                code = events.timed_index  # ops are the reader's timed ids
                rows = np.flatnonzero((code >= 0) & ~keep)
                op_counts += np.bincount(code[rows], minlength=ops.size)
                np.add.at(op_totals, code[rows], events.durations[rows])
        picked.stamp(relative_ns(reader.timestamp_ns))
    used = op_counts > 0
    return picked.done(), OpTimes(ops[used], op_counts[used], op_totals[used]), None


def _select_native(
    data: wire.Buffer,
    lines: list[tuple[int, int]],
    memory: np.ndarray,
    ops: np.ndarray,
    markers: np.ndarray,
    relative_ns: Callable[[int], int],
    runs: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[Selected, OpTimes, RunEvents | None]:
    """``select`` in one compiled loop: every event read whole, so a marker is
    found exactly (not guessed from a byte pattern)."""
    run_ids = [np.unique(ids) for ids in runs] if runs else []
    scanned = native.scan_lines(data, lines, memory, ops, markers, *run_ids)
    starts, ends, ids, line, index = scanned.picked
    line_ts = np.array([relative_ns(t) for t in scanned.stamps.tolist()], dtype=np.int64)
    order = line << 32
    order += index
    selected = Selected(data, starts, ends, ids.view(np.uint64), line_ts[line], order)
    used = scanned.counts > 0
    times = OpTimes(ops[used], scanned.counts[used], scanned.totals[used])
    if runs is None:
        return selected, times, None
    run_starts, run_ends, run_ids_found, run_line = scanned.runs
    found = RunEvents(run_starts, run_ends, run_ids_found.view(np.uint64), run_line, line_ts)
    return selected, times, found


class _Picker:
    """Collects the chosen events of each line."""

    def __init__(self, data: wire.Buffer) -> None:
        self.data = data
        self.starts: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []
        self.ids: list[np.ndarray] = []
        self.stamps: list[np.ndarray] = []
        self.orders: list[np.ndarray] = []
        self.unstamped = 0

    def add(self, events: Events, rows: np.ndarray, order_base: int) -> None:
        if not rows.size:
            return
        self.starts.append(events.starts[rows])
        self.ends.append(events.ends[rows])
        self.ids.append(events.metadata_ids[rows])
        self.orders.append(order_base + rows)
        self.unstamped += rows.size

    def stamp(self, timestamp_ns: int) -> None:
        """The line's timestamp, for the events picked since the last line."""
        if self.unstamped:
            self.stamps.append(np.full(self.unstamped, timestamp_ns, dtype=np.int64))
            self.unstamped = 0

    def done(self) -> Selected:
        if not self.starts:
            empty = np.zeros(0, dtype=np.int64)
            return Selected(self.data, empty, empty, empty.astype(np.uint64), empty, empty)
        return Selected(
            self.data,
            np.concatenate(self.starts),
            np.concatenate(self.ends),
            np.concatenate(self.ids),
            np.concatenate(self.stamps),
            np.concatenate(self.orders),
        )
