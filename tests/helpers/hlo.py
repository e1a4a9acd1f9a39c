"""Hand-built HLO modules for the heap simulator's tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from traceparse._proto import hlo_pb2
from traceparse.analysis.xla import slab_peak
from traceparse.decode.xla import XlaProgram, skim_hlo

SLAB = 0

F32 = 11  # HLO's F32 element type


@dataclass
class Module:
    """An entry computation of named instructions, each defining one f32 buffer
    (id = instruction id) placed in one temp allocation at an offset."""

    hlo: hlo_pb2.HloProto = field(default_factory=hlo_pb2.HloProto)
    ids: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        module = self.hlo.hlo_module
        module.name = "crafted"
        module.entry_computation_id = 1
        module.computations.add(name="main", id=1)
        self.hlo.buffer_assignment.buffer_allocations.add(index=SLAB, size=0)

    @property
    def entry(self) -> hlo_pb2.HloComputationProto:
        return self.hlo.hlo_module.computations[0]

    def add(
        self,
        name: str,
        operands: tuple[str, ...] = (),
        size: int | None = None,
        offset: int | None = None,
        opcode: str = "add",
        op: str = "",
    ) -> int:
        """An instruction; with ``size``, its buffer in the slab at ``offset``
        (default: after every buffer so far)."""
        inst_id = 100 + len(self.ids)
        self.ids[name] = inst_id
        inst = self.entry.instructions.add(
            name=name, opcode=opcode, id=inst_id, operand_ids=[self.ids[o] for o in operands]
        )
        inst.shape.element_type = F32
        if op:
            inst.metadata.op_name = op
        if size is not None:
            inst.shape.dimensions.append(size // 4)
            slab = self.hlo.buffer_assignment.buffer_allocations[SLAB]
            at = slab.size if offset is None else offset
            buffer = self.hlo.buffer_assignment.logical_buffers.add(id=inst_id, size=size)
            buffer.defined_at.instruction_id = inst_id
            slab.assigned.add(logical_buffer_id=inst_id, offset=at, size=size)
            slab.size = max(slab.size, at + size)
        return inst_id

    def schedule(self, *names: str) -> None:
        ids = self.hlo.hlo_module.schedule.sequences[1].instruction_ids
        ids.extend(self.ids[n] for n in names)

    def trace(self, *events: tuple[int, str] | tuple[int, str, str]) -> None:
        """A heap-simulator trace of the slab: (kind, buffer[, canonical])."""
        trace = self.hlo.buffer_assignment.heap_simulator_traces.add(buffer_allocation_index=SLAB)
        for kind, name, *shared in events:
            event = trace.events.add(kind=kind, buffer_id=self.ids[name])
            if shared:
                event.share_with_canonical_id = self.ids[shared[0]]

    def program(self) -> XlaProgram:
        data = memoryview(self.hlo.SerializeToString())
        return XlaProgram("crafted(1)", skim_hlo(data), data)

    def peak(self) -> tuple[dict[str, int], int]:
        """{instruction: bytes it covers} live at the peak, and the slack."""
        names = {v: k for k, v in self.ids.items()}
        covered, slack = slab_peak(self.program(), SLAB)
        return {names[b]: n for b, n in covered}, slack
