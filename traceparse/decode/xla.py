"""XLA programs stored in a capture, read only when asked for.

The profiler keeps every program the process compiled in the ``/host:metadata``
plane: one event metadata entry per program (its name is the HLO module's name
and the program id in parentheses) whose stat ``Hlo Proto`` holds a serialized
``xla.HloProto``. Modules can be tens of megabytes, so ``decode_xspace`` keeps
only that plane's undecoded bytes (``XlaSource``); upb parses them the first
time a table needs the programs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from traceparse._proto import hlo_pb2, xplane_pb2

HLO_PROTO_STAT = "Hlo Proto"


@dataclass
class XlaProgram:
    """One compiled program: the event metadata name and the parsed HloProto."""

    name: str
    hlo: hlo_pb2.HloProto
    # Indexes built from the module by later stages, kept with it.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class XlaSource:
    """The metadata plane's fields after its lines, undecoded, from one capture."""

    path: str
    data: bytes = field(repr=False)
    _programs: list[XlaProgram] | None = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)

    def programs(self) -> list[XlaProgram]:
        """Every program with an ``Hlo Proto`` stat, in metadata id order (parsed once)."""
        if self._programs is None:
            self._programs = self._parse()
        return self._programs

    def _parse(self) -> list[XlaProgram]:
        plane = xplane_pb2.XPlane()
        try:
            plane.MergeFromString(self.data)
        except DecodeError as exc:
            self.notes.append(
                f"{self.path}: the /host:metadata plane is unreadable ({exc}); "
                "its XLA programs are left out."
            )
            return []
        stat_ids = {k for k, meta in plane.stat_metadata.items() if meta.name == HLO_PROTO_STAT}
        found: list[XlaProgram] = []
        for key in sorted(plane.event_metadata):
            meta = plane.event_metadata[key]
            for stat in meta.stats:
                if stat.metadata_id not in stat_ids or stat.WhichOneof("value") != "bytes_value":
                    continue
                try:
                    hlo = hlo_pb2.HloProto.FromString(stat.bytes_value)
                except DecodeError as exc:
                    self.notes.append(
                        f"{self.path}: XLA program {meta.name!r} has an unreadable HloProto "
                        f"({exc}); it is left out."
                    )
                    continue
                found.append(XlaProgram(meta.name or str(key), hlo))
        return found
