"""XLA programs stored in a capture, read only when asked for.

The profiler keeps every program the process compiled in the ``/host:metadata``
plane: one event metadata entry per program (its name is the HLO module's name
and the program id in parentheses) whose stat ``Hlo Proto`` holds a serialized
``xla.HloProto``. Modules can be tens of megabytes, so ``decode_xspace`` keeps
only that plane's undecoded bytes (``XlaSource``). The first time a table needs
the programs, the plane's few top-level fields are walked to find each ``Hlo
Proto`` (views into the plane's bytes, not copies), and each is read at two
depths:

- ``XlaProgram.skim`` (``Skim``): the module's name and the buffer allocations
  (index, size, kind flags). The name is read off the module's first fields;
  the buffer assignment alone goes to upb, through the lean
  ``hlo_skim.proto`` view that leaves logical buffers, assignments and heap
  traces as unread bytes. The computations (most of a module's bytes) are
  never touched. Linking allocator events to programs needs nothing more.
- ``XlaProgram.hlo``: the whole HloProto, parsed on first access only (for
  ``xla_buffers``, ``xla_programs``, and the slabs live at a peak).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from traceparse._proto import hlo_pb2, hlo_skim_pb2
from traceparse.decode.wire import LEN, VARINT, WireError, as_int64, iter_fields

HLO_PROTO_STAT = "Hlo Proto"

# Field numbers (upstream xplane.proto and hlo.proto).
_PLANE_EVENT_METADATA, _PLANE_STAT_METADATA = 4, 5  # XPlane maps
_ENTRY_KEY, _ENTRY_VALUE = 1, 2  # map entries
_META_NAME, _META_STATS = 2, 5  # XEventMetadata
_STAT_METADATA_NAME = 2  # XStatMetadata
_STAT_METADATA_ID, _STAT_BYTES = 1, 6  # XStat (values are a oneof, fields 2 to 7)
_HLO_MODULE, _HLO_ASSIGNMENT = 1, 3  # HloProto
_MODULE_NAME = 1  # HloModuleProto


@dataclass(frozen=True)
class Skim:
    """What linking reads of a program: the module's name and its buffer
    allocations (``SkimBufferAllocation``: the same fields as the full
    ``BufferAllocationProto`` minus ``assigned``)."""

    module: str
    allocations: Sequence[Any]


@dataclass
class XlaProgram:
    """One compiled program: the event metadata name, the skim read of its
    HloProto, and the whole HloProto on demand (``hlo``)."""

    name: str
    skim: Skim
    data: memoryview = field(repr=False)
    path: str = ""
    # Where a later full parse says the bytes are unreadable (the source's notes).
    notes: list[str] = field(default_factory=list, repr=False, compare=False)
    # Indexes built from the module by later stages, kept with it.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _hlo: hlo_pb2.HloProto | None = field(default=None, repr=False, compare=False)

    @property
    def parsed(self) -> bool:
        """Whether the whole HloProto has been parsed."""
        return self._hlo is not None

    @property
    def hlo(self) -> hlo_pb2.HloProto:
        """The whole HloProto (instructions, schedule, assignments), parsed once.

        Bytes the skim read accepted can still fail here (they are nested in
        fields the skim read leaves unread): the program then reads as empty,
        with a note."""
        if self._hlo is None:
            try:
                # upb reads any buffer; the stubs only admit bytes.
                self._hlo = hlo_pb2.HloProto.FromString(self.data)  # type: ignore[arg-type]
            except DecodeError as exc:
                self.notes.append(
                    f"{self.path}: XLA program {self.name!r} has an unreadable HloProto "
                    f"({exc}); its buffers are left out."
                )
                self._hlo = hlo_pb2.HloProto()
        return self._hlo


def skim_hlo(data: memoryview) -> Skim:
    """The skim read of one serialized HloProto (raises WireError, DecodeError)."""
    module = ""
    assignment = hlo_skim_pb2.SkimBufferAssignment()
    for number, kind, _, end, value in iter_fields(data, 0, len(data)):
        if kind != LEN:
            continue
        if number == _HLO_MODULE:
            module = _first_text(data, value, end, _MODULE_NAME, module)
        elif number == _HLO_ASSIGNMENT:
            assignment.MergeFromString(data[value:end])  # type: ignore[arg-type]
    return Skim(module, assignment.buffer_allocations)


@dataclass
class XlaSource:
    """The metadata plane's fields after its lines, undecoded, from one capture."""

    path: str
    data: bytes = field(repr=False)
    _programs: list[XlaProgram] | None = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)

    def programs(self) -> list[XlaProgram]:
        """Every program with an ``Hlo Proto`` stat, in metadata id order (skim read once)."""
        if self._programs is None:
            self._programs = self._parse()
        return self._programs

    def _parse(self) -> list[XlaProgram]:
        view = memoryview(self.data)
        try:
            stats = _hlo_stats(view)
        except WireError as exc:
            self.notes.append(
                f"{self.path}: the /host:metadata plane is unreadable ({exc}); "
                "its XLA programs are left out."
            )
            return []
        found: list[XlaProgram] = []
        for name, data in stats:
            try:
                skim = skim_hlo(data)
            except (WireError, DecodeError) as exc:
                self.notes.append(
                    f"{self.path}: XLA program {name!r} has an unreadable HloProto "
                    f"({exc}); it is left out."
                )
                continue
            found.append(XlaProgram(name, skim, data, self.path, self.notes))
        return found


def _hlo_stats(view: memoryview) -> list[tuple[str, memoryview]]:
    """(event metadata name, Hlo Proto bytes) of each stat holding a program, in
    metadata id order; read off the wire so that no module is copied."""
    hlo_ids: set[int] = set()
    events: list[tuple[int, int]] = []
    for number, kind, _, end, value in iter_fields(view, 0, len(view)):
        if kind != LEN:
            continue
        if number == _PLANE_STAT_METADATA:
            key, meta = _entry(view, value, end)
            if meta and _first_text(view, *meta, _STAT_METADATA_NAME, "") == HLO_PROTO_STAT:
                hlo_ids.add(key)
        elif number == _PLANE_EVENT_METADATA:
            events.append((value, end))
    found: list[tuple[int, str, memoryview]] = []
    for start, end in events:
        key, meta = _entry(view, start, end)
        if meta is None:
            continue
        name, blobs = "", []
        for number, kind, _, field_end, value in iter_fields(view, *meta):
            if number == _META_NAME and kind == LEN:
                name = _text(view, value, field_end)
            elif number == _META_STATS and kind == LEN:
                blob = _stat_bytes(view, value, field_end, hlo_ids)
                if blob is not None:
                    blobs.append(blob)
        found.extend((as_int64(key), name or str(as_int64(key)), blob) for blob in blobs)
    found.sort(key=lambda item: item[0])  # stable: a program's stats keep their order
    return [(name, blob) for _, name, blob in found]


def _entry(view: memoryview, start: int, end: int) -> tuple[int, tuple[int, int] | None]:
    """A map entry's key (the varint, unsigned) and its value's (start, end)."""
    key, value_at = 0, None
    for number, kind, _, field_end, value in iter_fields(view, start, end):
        if number == _ENTRY_KEY and kind == VARINT:
            key = value
        elif number == _ENTRY_VALUE and kind == LEN:
            value_at = (value, field_end)
    return key, value_at


def _stat_bytes(view: memoryview, start: int, end: int, ids: set[int]) -> memoryview | None:
    """The stat's bytes_value when its metadata is ``Hlo Proto`` and the oneof
    holds bytes (the last value field wins, as in a parse)."""
    metadata_id, last, blob = 0, 0, None
    for number, kind, _, field_end, value in iter_fields(view, start, end):
        if number == _STAT_METADATA_ID and kind == VARINT:
            metadata_id = value
        elif 2 <= number <= 7:
            last = number
            if number == _STAT_BYTES and kind == LEN:
                blob = view[value:field_end]
    return blob if metadata_id in ids and last == _STAT_BYTES else None


def _first_text(view: memoryview, start: int, end: int, number: int, default: str) -> str:
    """The message's string field ``number``, read up to its first occurrence
    (serializers write fields in number order, so a name comes first)."""
    for field_number, kind, _, field_end, value in iter_fields(view, start, end):
        if field_number == number and kind == LEN:
            return _text(view, value, field_end)
    return default


def _text(view: memoryview, start: int, end: int) -> str:
    return bytes(view[start:end]).decode("utf-8", errors="replace")
