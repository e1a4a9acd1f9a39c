"""XLA programs built in the tests, and profiles around them."""

from __future__ import annotations

import numpy as np

from helpers.trace import alloc, trace_of
from traceparse import Profile
from traceparse._proto import hlo_pb2
from traceparse.decode.xla import XlaProgram, XlaSource, skim_hlo

KiB = 1 << 10
CPU = "mklcpu"


def _program(module: str, params: list[tuple[list[int], bool]], temp: int = 0) -> XlaProgram:
    """An XLA program whose entry computation reads float32 ``params`` (dims, updated)."""
    hlo = hlo_pb2.HloProto()
    mod = hlo.hlo_module
    mod.name = module
    mod.entry_computation_id = 1
    entry = mod.computations.add(name="main", id=1)
    assignment = hlo.buffer_assignment
    for number, (dims, updated) in enumerate(params):
        inst = entry.instructions.add(
            name=f"arg{number}.1", opcode="parameter", parameter_number=number, id=10 + number
        )
        inst.shape.element_type = 11  # F32
        inst.shape.dimensions.extend(dims)
        size = int(np.prod(dims)) * 4
        assignment.logical_buffers.add(id=number, size=size).defined_at.instruction_id = 10 + number
        alloc = assignment.buffer_allocations.add(
            index=number,
            size=size,
            is_entry_computation_parameter=True,
            parameter_number=number,
            maybe_live_out=updated,
        )
        alloc.assigned.add(logical_buffer_id=number, offset=0, size=size)
    if temp:
        assignment.buffer_allocations.add(index=len(params), size=temp)
    data = memoryview(hlo.SerializeToString())
    return XlaProgram(f"{module}(0)", skim_hlo(data), data)


def _profile(
    programs: list[XlaProgram],
    ran: list[str],
    before: dict[str, int],
    events: list[dict[str, object]] | None = None,
) -> Profile:
    trace = trace_of(events or [alloc(10, 1, 256 * KiB, allocator=CPU)], before=before)
    source = XlaSource("host0.xplane.pb", b"")
    source._programs = programs
    trace.xla = source
    trace.stat_names = frozenset(ran)
    return Profile([trace])


def xla_programs(prof: Profile) -> list[tuple[str, XlaProgram]]:
    """The (host, program) pairs a profile read: the one place the tests reach into
    ``Profile``'s XLA part, until the facade has a public accessor for it."""
    return prof._xla.programs  # type: ignore[no-any-return]
