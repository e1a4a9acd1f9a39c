"""Decode an ``XSpace`` (``*.xplane.pb``) into a ``MemoryTrace``: the hot path.

Planes' metadata is parsed by upb with the lean ``xplane_skim`` schema; lines
are never parsed as messages. ``event_scan`` (with ``framing``) finds the
events worth decoding in the file's bytes without a Python object per event;
``event_columns`` decodes those column-wise; ``sanity`` keeps absurd values out
of the tables.
"""

from __future__ import annotations

import mmap
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from traceparse._proto import xplane_skim_pb2
from traceparse.decode import wire
from traceparse.decode.collect import MemoryEvents, StepMarkers, op_time_table
from traceparse.decode.fields import CLOCK_STAT, EXPECTED, DecodedEvents, StatLayout, text
from traceparse.decode.limits import (
    MAX_TIME_PS,
    check_allocators,
    checked_bytes,
    problem_notes,
)
from traceparse.decode.lines import index_in
from traceparse.decode.planes import OpTimes, Plane, RunEvents, Selected, select, split_planes
from traceparse.decode.runs import RunRecords, read_runs
from traceparse.decode.runs import from_events as runs_from_events
from traceparse.decode.runs import run_ids as run_ids_of
from traceparse.decode.trace import FUNCTION_RUN_COLUMNS, MemoryTrace, empty_frame
from traceparse.decode.xla import XlaSource
from traceparse.errors import CaptureTooLargeError, CorruptCaptureError
from traceparse.files.discover import MAX_PROTOBUF_BYTES

# protobuf cannot parse a message of 2 GiB or more.
MAX_XSPACE_BYTES = MAX_PROTOBUF_BYTES
# A line timestamp is clamped to this before it becomes picoseconds, so the
# product fits in int64 (and a clamped line is out of range).
_MAX_LINE_NS = MAX_TIME_PS // 1000 + 1
# A line timestamp past this (2001-09-09) counts from the epoch, not the capture.
_EPOCH_NS = 10**18
# traceparse marks the clock once or twice a capture (capture/session.py).
_MAX_CLOCK_MARKS = 64
# How far apart two marks' starts may lie and still be one clock: each mark is
# its wall clock read beside the profiler's event, microseconds apart; a clock
# step (NTP) between two marks is the rest.
_CLOCK_SLACK_NS = 2 * 10**9
# A mark later than this past the reading machine's own clock was not written
# by a clock that was right.
_FUTURE_NS = 86_400 * 10**9


def clock_start(marks: list[tuple[int, int]], now_ns: int) -> tuple[int | None, str | None]:
    """The capture's start (ns since the epoch) read off its ``traceparse.clock``
    marks, in capture time order (``capture.sources.mark_clock``: a profiler
    event stamped with ``time.time_ns()``, so the stamp minus the event's own
    time from the capture's start is the start), and a sentence when they
    cannot be trusted. A mark more than a day past ``now_ns`` is refused (no
    clock that was right wrote it); marks that put the start more than 2 s
    apart contradict each other, and none is used rather than the earliest: a
    wrong start would call the source record another capture's and place
    every eager op wrongly."""
    starts = [wall - time_ps // 1000 for time_ps, wall in marks]
    future = sum(wall > now_ns + _FUTURE_NS for _, wall in marks)
    if future:
        return None, (
            f"{future} of its {len(marks)} traceparse.clock marks lie in the future "
            "(a wrong clock, or a made-up file), so none is used and the capture's start "
            "is not known"
        )
    if max(starts) - min(starts) > _CLOCK_SLACK_NS:
        return None, (
            f"its {len(marks)} traceparse.clock marks disagree on when it started (by "
            f"{(max(starts) - min(starts)) / 1e9:,.0f} s), so none is used and the capture's "
            "start is not known"
        )
    return starts[0], None


_ALLOCATION, _DEALLOCATION = "MemoryAllocation", "MemoryDeallocation"
# Host events of TF ops are named "<op name>:<op type>"; eager ops have their
# own event, named after the op type.
_OP_EVENT = re.compile(r"^([A-Za-z0-9._][\w.\-/>]*):([A-Za-z_]\w*)$")
_EAGER_PREFIX = "EagerLocalExecute: "
# A TF function's run on the op line; kept with its time so that allocations
# can be linked to the XLA program running then.
_FUNCTION_PREFIX = "__inference_"
# Memory events decoded with their stats at once: bounds the temporaries
# (about 7 MB for 4,096 events of 13 stats; twice that made small captures
# miss the memory goal in benchmarks/RESULTS.md). Large files take larger
# batches, up to 16,384 (about 28 MB): numpy's cost per call is then spread
# over more events (about 20% less time on a 1M-event capture), while the
# temporaries stay under a fourth of the file. Larger batches were slower.
_EVENTS_PER_BATCH = 1 << 12
_MAX_EVENTS_PER_BATCH = 1 << 14
_FILE_BYTES_PER_BATCH_EVENT = 1 << 13


def events_per_batch(file_bytes: int) -> int:
    """How many selected events to decode at once in a file of ``file_bytes``."""
    wanted = file_bytes // _FILE_BYTES_PER_BATCH_EVENT
    return max(_EVENTS_PER_BATCH, min(_MAX_EVENTS_PER_BATCH, wanted))


def decode_xspace(data: wire.Buffer, *, path: str, host: str) -> MemoryTrace:
    """Decode one host's XSpace bytes. Raises ``CorruptCaptureError`` for bad bytes."""
    if len(data) > MAX_XSPACE_BYTES:
        raise CaptureTooLargeError(
            f"{path}: {len(data) / 2**30:.1f} GiB is past protobuf's 2 GiB message limit; "
            "capture fewer steps (shorter profiling window) and analyse those",
            path,
        )
    if not data:
        raise CorruptCaptureError(f"{path}: the file is empty; capture the profile again", path)
    try:
        planes = split_planes(data)
        if not planes:
            raise CorruptCaptureError(
                f"{path}: no profiler planes in this file, so it is not a profiler capture; "
                "point traceparse at the .xplane.pb files that tf.profiler writes",
                path,
            )
        return _Decoder(data, planes, path, host).run()
    except (DecodeError, wire.WireError) as exc:
        raise CorruptCaptureError(
            f"{path}: not a readable XSpace (truncated or corrupt: {exc}); "
            "copy the file again or capture the profile again",
            path,
        ) from exc


class _Decoder:
    def __init__(self, data: wire.Buffer, planes: list[Plane], path: str, host: str) -> None:
        self.data = data
        self.planes = planes
        self.path = path
        self.host = host
        self.start_ns, self.stop_ns = _capture_window([p.meta for p in planes])
        self.has_programs = any(p.deferred is not None for p in planes)
        self.modules: dict[str, set[int]] = {}  # of the programs, by name (run())
        self.given_back = 0  # bytes of a mapped buffer handed back (see _give_back)
        self.diagnostics: list[str] = []
        self.clock: list[tuple[int, int]] = []  # (time_ps, wall ns) per mark: _read_clock
        if self.start_ns is None:
            # No 'Task Environment' plane (older TensorFlow): lines stamped with
            # the epoch count from the earliest of them instead.
            stamps = [t for p in planes for t in p.line_timestamps(data) if t >= _EPOCH_NS]
            if stamps:
                self.start_ns = min(stamps)
                self.diagnostics.append(
                    f"{path}: the capture does not record when it started; times count "
                    "from its earliest line."
                )
        # (stat, problem) -> memory events with it; said once per kind at the end.
        self.problems: Counter[tuple[str, str]] = Counter()

    def run(self) -> MemoryTrace:
        step_markers = StepMarkers()
        op_time: list[tuple[list[str], np.ndarray, np.ndarray]] = []
        op_types: dict[str, str] = {}
        runs: list[tuple[list[str], np.ndarray, np.ndarray]] = []
        xla: XlaSource | None = None
        referenced: set[str] = set()
        # First every plane's events are found, so the memory events' columns can be
        # made once at their final size (at most the events picked for decoding).
        picked: list[_PlaneEvents] = []
        for parts in self.planes:
            if parts.deferred is not None:
                start, end = parts.deferred
                xla = XlaSource(self.path, self.data[start:end])
        # Run records keep the events whose name names one of these programs.
        self.modules = xla.modules() if xla is not None else {}
        for plane_index, parts in enumerate(self.planes):
            if parts.deferred is not None:
                continue
            found = self._select(plane_index, parts, op_types)
            referenced.update(found.stat_names.values())
            picked.append(found)
            if found.timing.metadata_ids.size:
                op_ids = found.op_ids
                ids = found.timing.metadata_ids.view(np.int64).tolist()
                op_time.append(
                    ([op_ids[i] for i in ids], found.timing.counts, found.timing.total_ps)
                )
        # Columns of exactly the memory events (unless some are out of range): a
        # full column is handed to pandas as it is, a longer one is cut by a copy.
        memory_count = sum(
            int(np.count_nonzero(index_in(p.detailed.metadata_ids, p.memory) >= 0)) for p in picked
        )
        memory_events = MemoryEvents(self.problems, memory_count)
        runs_read = self._run_records(picked) if xla is not None else RunRecords()
        # From here on only the picked events are read, in file order: what lies
        # before the next one to decode is given back as the batches go.
        end = len(self.data)
        firsts = [int(p.detailed.starts.min()) if len(p.detailed) else end for p in picked]
        later_planes = [*np.minimum.accumulate(firsts[::-1])[::-1][1:].tolist(), end]
        while picked:
            found = picked.pop(0)  # each plane's selection is let go once decoded
            self._decode(found, later_planes.pop(0), memory_events, step_markers, runs)
            del found
        function_runs = _runs_table(runs)
        if runs:  # picked for their times, so select() did not time them: add them back
            op_time.extend(
                (names, np.ones(len(names), np.int64), spent) for names, _, spent in runs
            )
        events = memory_events.frame()
        check_allocators(events, self.path)
        self.diagnostics.extend(checked_bytes(events, self.path))
        self.diagnostics.extend(problem_notes(self.problems, self.path, EXPECTED))
        return MemoryTrace(
            path=self.path,
            host=self.host,
            format="xplane",
            events=events,
            step_markers=step_markers.frame(),
            op_types=op_types,
            op_time=op_time_table(op_time),
            start_ns=self._started_ns(),
            duration_ps=None
            if self.start_ns is None or self.stop_ns is None or self.stop_ns < self.start_ns
            else min((self.stop_ns - self.start_ns) * 1000, MAX_TIME_PS),
            diagnostics=self.diagnostics,
            xla=xla,
            function_runs=function_runs,
            stat_names=frozenset(referenced),
            runs=runs_read,
        )

    def _select(self, plane_index: int, parts: Plane, op_types: dict[str, str]) -> _PlaneEvents:
        """One plane's events worth decoding, with the ids that say what each is;
        its TF ops' types go into ``op_types``."""
        plane = parts.meta
        names = _names(plane.event_metadata)
        stat_names = _names(plane.stat_metadata)
        memory_ids = {k for k, n in names.items() if n in (_ALLOCATION, _DEALLOCATION)}
        is_host = text(plane.name).startswith("/host:")
        op_ids: dict[int, str] = {}
        if is_host:
            for key, name in names.items():
                match = _OP_EVENT.match(name)
                if match:
                    op_name, op_type = match.groups()
                    op_ids[key] = op_name
                    op_types.setdefault(op_name, op_type)
                elif name.startswith(_EAGER_PREFIX):
                    # An eager op is named after its type ("Fill").
                    op_type = name[len(_EAGER_PREFIX) :]
                    op_types.setdefault(op_type, op_type)
        # Step markers and the clock mark: the few host events read for their stats.
        step_stat_ids = (
            [k for k, n in stat_names.items() if n in ("step_num", CLOCK_STAT)] if is_host else []
        )
        # Sorted and unique: index_in looks ids up in them.
        memory = np.unique(wire.metadata_ids(memory_ids))
        markers = wire.metadata_ids(step_stat_ids)
        functions = np.unique(
            wire.metadata_ids(k for k, name in op_ids.items() if name.startswith(_FUNCTION_PREFIX))
        )
        # Where the capture holds programs, the host lines' run records are found on
        # the same pass (where the compiled loops run; else read_runs reads them).
        run_ids = None
        if is_host and self.has_programs:
            named, stats = run_ids_of(names, stat_names, self.modules)
            run_ids = (wire.metadata_ids(named), wire.metadata_ids(stats))
        detailed, timing, run_events = select(
            self.data,
            parts.lines,
            np.concatenate([memory, functions]) if functions.size else memory,
            wire.metadata_ids(op_ids),
            markers,
            self._relative_ns,
            run_ids,
        )
        return _PlaneEvents(
            index=plane_index,
            plane=plane,
            names=names,
            stat_names=stat_names,
            op_ids=op_ids,
            memory=memory,
            alloc_ids=np.unique(
                wire.metadata_ids(k for k in memory_ids if names[k] == _ALLOCATION)
            ),
            markers=markers,
            functions=functions,
            detailed=detailed,
            timing=timing,
            host=is_host,
            run_events=run_events,
        )

    def _decode(
        self,
        found: _PlaneEvents,
        later_planes: int,
        memory_events: MemoryEvents,
        step_markers: StepMarkers,
        runs: list[tuple[list[str], np.ndarray, np.ndarray]],
    ) -> None:
        """Decode a plane's picked events in batches (the column-wise decode makes
        temporaries per field) into the memory events, the step markers and the
        function ``runs``; ``later_planes`` is where the next planes' picked
        events start."""
        batch_size = events_per_batch(len(self.data))
        # Where the plane's batches still read: from each row's start on.
        still = np.minimum.accumulate(found.detailed.starts[::-1])[::-1]
        layout = StatLayout(found.stat_names)
        plane_name = text(found.plane.name)
        for number, batch in enumerate(found.detailed.batches(batch_size)):
            decoded = DecodedEvents(batch, layout)
            mids = batch.metadata_ids
            is_memory = index_in(mids, found.memory) >= 0
            if is_memory.any():
                is_allocation = index_in(mids, found.alloc_ids) >= 0
                memory_events.add(decoded, is_memory, is_allocation, plane_name, found.index)
            if found.markers.size:
                step_markers.add(decoded, found.names, mids)
                self._read_clock(decoded)
            if found.functions.size:
                runs.append(_function_runs(decoded, mids, found.functions, found.op_ids))
            next_row = (number + 1) * batch_size
            rest = int(still[next_row]) if next_row < len(still) else later_planes
            self._give_back(min(rest, later_planes))

    def _read_clock(self, decoded: DecodedEvents) -> None:
        """The clock marks' (capture time, wall clock): where the capture does not
        say when it started (TensorFlow before 2.20 or so), they are what puts its
        times on the wall clock, which source records are stamped with."""
        if len(self.clock) >= _MAX_CLOCK_MARKS:
            return
        wall, valid = decoded.int_stat(CLOCK_STAT)
        rows = np.flatnonzero(valid & decoded.in_range & (wall > _EPOCH_NS))
        rows = rows[np.argsort(decoded.time_ps[rows], kind="stable")][:_MAX_CLOCK_MARKS]
        self.clock.extend(zip(decoded.time_ps[rows].tolist(), wall[rows].tolist(), strict=True))

    def _started_ns(self) -> int | None:
        """When the capture started (ns since the epoch): as it says, else from
        its clock marks when they agree, else not known."""
        if self.start_ns is not None or not self.clock:
            return self.start_ns
        start, note = clock_start(sorted(self.clock), time.time_ns())
        if note is not None:
            self.diagnostics.append(f"{self.path}: {note}")
        return start

    def _run_records(self, picked: list[_PlaneEvents]) -> RunRecords:
        """What ran when on the host lines, for linking allocations to programs:
        from the events the compiled pass found, or by parsing the lines."""
        hosts = [p for p in picked if p.host]
        planes = [(p.names, p.stat_names, self.planes[p.index].lines) for p in hosts]
        found = [
            (plane, p.run_events)
            for plane, p in zip(planes, hosts, strict=True)
            if p.run_events is not None
        ]
        if len(found) == len(hosts):
            return runs_from_events(self.data, found, self.modules)
        return read_runs(self.data, planes, self._relative_ns, self.modules)

    def _give_back(self, before: int) -> None:
        """Give the pages of the buffer that lie wholly before ``before`` back to the
        system: nothing reads them again. Only a mapped buffer can be (a large
        file, ``files.discover.read_buffer``); its pages then read as zeros."""
        if not isinstance(self.data, mmap.mmap):
            return
        before -= before % mmap.PAGESIZE
        if before > self.given_back:
            self.data.madvise(mmap.MADV_DONTNEED, self.given_back, before - self.given_back)
            self.given_back = before

    def _relative_ns(self, timestamp_ns: int) -> int:
        # Host lines count from the capture start; device lines may carry
        # nanoseconds since the epoch. Put both on the capture's clock.
        if self.start_ns and timestamp_ns >= self.start_ns // 2:
            timestamp_ns -= self.start_ns
        return max(-_MAX_LINE_NS, min(timestamp_ns, _MAX_LINE_NS))


@dataclass
class _PlaneEvents:
    """A plane's events picked for decoding (``detailed``), its op times, and the
    metadata ids that say which events are what."""

    index: int
    plane: xplane_skim_pb2.SkimPlane
    names: dict[int, str]
    stat_names: dict[int, str]
    op_ids: dict[int, str]  # event metadata id -> TF op name
    memory: np.ndarray  # sorted, as the two below
    alloc_ids: np.ndarray
    markers: np.ndarray
    functions: np.ndarray
    detailed: Selected
    timing: OpTimes
    host: bool
    run_events: RunEvents | None  # found on the way, where asked and compiled


def _function_runs(
    decoded: DecodedEvents, mids: np.ndarray, functions: np.ndarray, op_ids: dict[int, str]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The function-run events of a batch: (names, start_ps, duration_ps), every one
    (also those out of range, so the op-time sums stay what they were)."""
    rows = np.flatnonzero(index_in(mids, functions) >= 0)
    names = [op_ids[i] for i in mids[rows].view(np.int64).tolist()]
    start = np.where(decoded.in_range[rows], decoded.time_ps[rows], -1)
    return names, start, decoded.duration_ps[rows]


def _runs_table(runs: list[tuple[list[str], np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """Function runs with a usable start and duration, in time order."""
    if not runs:
        return empty_frame(FUNCTION_RUN_COLUMNS)
    names = np.array([n for part in runs for n in part[0]], dtype=object)
    start = np.concatenate([part[1] for part in runs])
    duration = np.concatenate([part[2] for part in runs])
    ok = (start >= 0) & (duration >= 0) & (duration <= MAX_TIME_PS - start)
    order = np.argsort(start[ok], kind="stable")
    return pd.DataFrame(
        {
            "function": pd.Series(names[ok][order], dtype=object),
            "start_ps": start[ok][order],
            "end_ps": (start + np.where(ok, duration, 0))[ok][order],
        }
    )


class _Named(Protocol):
    @property
    def name(self) -> bytes: ...


def _names(metadata: Mapping[int, _Named]) -> dict[int, str]:
    """Each metadata entry's name, by its id."""
    return {key: meta.name.decode("utf-8", errors="replace") for key, meta in metadata.items()}


def _capture_window(planes: list[xplane_skim_pb2.SkimPlane]) -> tuple[int | None, int | None]:
    """profile_start_time / profile_stop_time (ns since epoch) from 'Task Environment'."""
    for plane in planes:
        if text(plane.name) != "Task Environment":
            continue
        names = {key: text(meta.name) for key, meta in plane.stat_metadata.items()}
        found: dict[str, int] = {}
        for stat in plane.stats:
            name = names.get(stat.metadata_id)
            if name in ("profile_start_time", "profile_stop_time"):
                kind = stat.WhichOneof("value")
                if kind in ("uint64_value", "int64_value"):
                    found[name] = int(getattr(stat, kind))
        return found.get("profile_start_time"), found.get("profile_stop_time")
    return None, None
