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
- ``XlaProgram.assignment`` and ``XlaProgram.module``, on first access only
  (``xla_buffers``, ``xla_programs``, the slabs live at a peak): the buffer
  assignment whole, and the module with each computation's instructions
  parsed only when that computation is needed (``ModuleView``). A slab needs
  the entry computation and a few fused ones, not the whole module.

``XlaProgram.hlo`` parses the whole HloProto; no table needs it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from traceparse._proto import hlo_pb2, hlo_skim_pb2
from traceparse.decode.wire import LEN, VARINT, WireError, as_int64, iter_fields

HLO_PROTO_STAT = "Hlo Proto"
# Names past this many characters (only a crafted program has them: XLA's are
# short) are shortened where they are copied into table rows (``short_name``).
NAME_LIMIT = 1024
_KEEP = 200
# A program's metadata name: its module and program id, ``jit_sin(3)``.
_NAMED_ID = re.compile(r"(.+)\((\d+)\)")

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
    ``BufferAllocationProto`` minus ``assigned``), and where the module and the
    assignment lie in the program's bytes (each field once or more: a parse
    merges them in order)."""

    module: str
    allocations: Sequence[Any]
    module_at: tuple[tuple[int, int], ...] = ()
    assignment_at: tuple[tuple[int, int], ...] = ()


# Frames kept of one instruction's stack (JAX limits its tracebacks to far fewer).
_FRAME_LIMIT = 256


@dataclass(frozen=True)
class Frame:
    """One frame of an instruction's Python stack: file, function, line."""

    file: str
    function: str
    line: int


def _interned(names: Sequence[str], one_based: int) -> str:
    return short_name(names[one_based - 1]) if 0 < one_based <= len(names) else ""


class Computation:
    """A computation of a ModuleView: its header read, its instructions parsed
    on first use (``HloInstructionProto``, one at a time)."""

    def __init__(self, skim: Any, program: XlaProgram) -> None:
        self._skim = skim
        self._program = program
        self.id: int = skim.id
        self.root_id: int = skim.root_id
        self.name: str = skim.name
        self.is_fusion_computation: bool = skim.is_fusion_computation
        self._instructions: list[hlo_pb2.HloInstructionProto] | None = None

    @property
    def instructions(self) -> list[hlo_pb2.HloInstructionProto]:
        if self._instructions is None:
            parse = hlo_pb2.HloInstructionProto.FromString
            try:
                self._instructions = [parse(b) for b in self._skim.instructions]
            except DecodeError as exc:
                self._program.unreadable(f"computation {self.name!r}", exc)
                self._instructions = []
        return self._instructions


class ModuleView:
    """The parts of an HloModuleProto that the XLA tables read, with each
    computation's instructions parsed only when that computation is needed:
    a slab at a peak needs the entry computation and a few fused ones, not the
    whole module (``SkimModule`` in hlo_skim.proto)."""

    def __init__(self, skim: Any, program: XlaProgram) -> None:
        self.name: str = skim.name
        self.entry_computation_id: int = skim.entry_computation_id
        self._skim = skim
        self._schedule: hlo_pb2.HloScheduleProto | None = None
        self._program = program
        self._positions: dict[int, int] | None = None  # computation id -> position
        self._wrapped: dict[int, Computation] = {}
        self._frame_index: hlo_pb2.StackFrameIndexProto | None = None
        self._stacks: dict[int, tuple[Frame, ...]] = {}

    def computation(self, computation_id: int) -> Computation | None:
        """The computation with this id (the last, should ids repeat), or None."""
        if self._positions is None:
            computations = self._skim.computations
            self._positions = {comp.id: at for at, comp in enumerate(computations)}
        position = self._positions.get(computation_id)
        return None if position is None else self._at(position)

    @property
    def computations(self) -> list[Computation]:
        return [self._at(position) for position in range(len(self._skim.computations))]

    @property
    def instruction_count(self) -> int:
        """Instructions in all computations, counted without parsing them."""
        return sum(len(comp.instructions) for comp in self._skim.computations)

    def _at(self, position: int) -> Computation:
        if position not in self._wrapped:
            self._wrapped[position] = Computation(self._skim.computations[position], self._program)
        return self._wrapped[position]

    def frames(self, frame_id: int) -> tuple[Frame, ...]:
        """The Python stack an instruction was traced from (``OpMetadata.stack_frame_id``),
        innermost frame first; () when the module records none. JAX writes each
        primitive's traceback into the module (``stack_frame_index``, interned
        file names, functions and locations, frames chained to their parent);
        TF's bridge does not. A chain is cut at ``_FRAME_LIMIT`` frames and at a
        cycle, so a crafted index costs time linear in its frames."""
        found = self._stacks.get(frame_id)
        if found is not None:
            return found
        index = self._frame_index
        if index is None:
            index = hlo_pb2.StackFrameIndexProto()
            try:
                index.MergeFromString(self._skim.stack_frame_index)
            except DecodeError as exc:
                self._program.unreadable("stack frame index", exc)
                index = hlo_pb2.StackFrameIndexProto()
            self._frame_index = index
        chain: list[Frame] = []
        seen: set[int] = set()
        at = frame_id
        while 0 < at <= len(index.stack_frames) and at not in seen and len(chain) < _FRAME_LIMIT:
            seen.add(at)
            frame = index.stack_frames[at - 1]
            where = frame.file_location_id
            if 0 < where <= len(index.file_locations):
                loc = index.file_locations[where - 1]
                chain.append(
                    Frame(
                        _interned(index.file_names, loc.file_name_id),
                        _interned(index.function_names, loc.function_name_id),
                        loc.line,
                    )
                )
            at = frame.parent_frame_id
        found = self._stacks[frame_id] = tuple(chain)
        return found

    @property
    def schedule(self) -> hlo_pb2.HloScheduleProto:
        if self._schedule is None:
            try:
                self._schedule = hlo_pb2.HloScheduleProto.FromString(self._skim.schedule)
            except DecodeError as exc:
                self._program.unreadable("schedule", exc)
                self._schedule = hlo_pb2.HloScheduleProto()
        return self._schedule


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

    _module: ModuleView | None = field(default=None, repr=False, compare=False)
    _assignment: hlo_pb2.BufferAssignmentProto | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def parsed(self) -> bool:
        """Whether the whole HloProto has been parsed (``hlo``)."""
        return self._hlo is not None

    @property
    def module(self) -> ModuleView:
        """The module, its computations' instructions parsed one computation at a time."""
        if self._module is None:
            skim = hlo_skim_pb2.SkimModule()
            try:
                for start, end in self.skim.module_at:
                    skim.MergeFromString(self.data[start:end])  # type: ignore[arg-type]
            except DecodeError as exc:
                self.unreadable("module", exc)
                skim = hlo_skim_pb2.SkimModule()
            self._module = ModuleView(skim, self)
        return self._module

    @property
    def assignment(self) -> hlo_pb2.BufferAssignmentProto:
        """The buffer assignment, whole (logical buffers, what each allocation holds)."""
        if self._assignment is None:
            assignment = hlo_pb2.BufferAssignmentProto()
            try:
                for start, end in self.skim.assignment_at:
                    assignment.MergeFromString(self.data[start:end])  # type: ignore[arg-type]
            except DecodeError as exc:
                self.unreadable("buffer assignment", exc)
                assignment = hlo_pb2.BufferAssignmentProto()
            self._assignment = assignment
        return self._assignment

    @property
    def hlo(self) -> hlo_pb2.HloProto:
        """The whole HloProto, parsed once. The tables read ``module`` and
        ``assignment`` instead, which parse only what they need."""
        if self._hlo is None:
            try:
                # upb reads any buffer; the stubs only admit bytes.
                self._hlo = hlo_pb2.HloProto.FromString(self.data)  # type: ignore[arg-type]
            except DecodeError as exc:
                self.unreadable("HloProto", exc)
                self._hlo = hlo_pb2.HloProto()
        return self._hlo

    def unreadable(self, what: str, exc: Exception) -> None:
        """Note bytes the skim read accepted that fail a deeper parse (they are
        nested in fields it leaves unread): that part reads as empty."""
        self.notes.append(
            f"{self.path}: XLA program {self.name!r} has an unreadable {what} "
            f"({exc}); it is read as empty, so what it defines shows as NA."
        )


def short_name(name: str) -> str:
    """``name``, or past NAME_LIMIT characters its head and a digest of the whole
    (distinct names stay distinct): a table row never holds a megabyte name."""
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.blake2b(name.encode("utf-8", "replace"), digest_size=8).hexdigest()
    return f"{name[:_KEEP]}...({len(name)} characters, {digest})"


def skim_hlo(data: memoryview) -> Skim:
    """The skim read of one serialized HloProto (raises WireError, DecodeError)."""
    module = ""
    assignment = hlo_skim_pb2.SkimBufferAssignment()
    module_at: list[tuple[int, int]] = []
    assignment_at: list[tuple[int, int]] = []
    for number, kind, _, end, value in iter_fields(data, 0, len(data)):
        if kind != LEN:
            continue
        if number == _HLO_MODULE:
            module = _first_text(data, value, end, _MODULE_NAME, module)
            module_at.append((value, end))
        elif number == _HLO_ASSIGNMENT:
            assignment.MergeFromString(data[value:end])  # type: ignore[arg-type]
            assignment_at.append((value, end))
    return Skim(module, assignment.buffer_allocations, tuple(module_at), tuple(assignment_at))


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

    def modules(self) -> dict[str, set[int]]:
        """Each program's module, as its metadata name gives it (``<module>(<id>)``),
        with the program ids: no HloProto is read."""
        found: dict[str, set[int]] = {}
        try:
            stats = _hlo_stats(memoryview(self.data))
        except WireError:
            return found  # programs() says so
        for name, _ in stats:
            match = _NAMED_ID.fullmatch(name)
            if match:
                found.setdefault(match.group(1), set()).add(int(match.group(2)))
            else:
                found.setdefault(name, set())
        return found

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
                    f"{self.path}: XLA program {short_name(name)!r} has an unreadable HloProto "
                    f"({exc}); it is left out."
                )
                continue
            found.append(XlaProgram(short_name(name), skim, data, self.path, self.notes))
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
