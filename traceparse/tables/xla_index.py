"""The instructions of a program's module, indexed, and the TF op each value
comes from (the rules are in tables/xla.py's docstring and docs/xla.md).

Every lookup is memoized per instruction (per tuple element for the consumer
rule), and every chain of copies, fusions or readers is cut at depth 64, so a
crafted module costs time linear in its instructions and operands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from traceparse._proto import hlo_pb2
from traceparse.decode.xla import (
    NAME_LIMIT,
    Computation,
    Frame,
    ModuleView,
    XlaProgram,
    short_name,
)
from traceparse.tables.sources import is_library_path

COPY_OPCODES = {"copy", "copy-start", "copy-done", "bitcast"}
# tf2xla's op_name for every entry parameter; as a buffer's tf_op_type, an argument's copy.
XLA_ARGS = "XLA_Args"
# Fused instructions that only move elements: a fusion of these is a copy.
_MOVES = {"parameter", "transpose", "copy", "bitcast", "reshape"}
# How a buffer's TF op was found (``xla_buffers.named_by``; NA: not found).
BY_METADATA = "hlo metadata"  # its defining instruction's metadata
BY_FOLLOWED = "fused/copied instruction"  # a fusion's root, what a copy copies
BY_CONSUMER = "consumer"  # the first instruction reading it that has a TF op
NAMED_BY = (BY_METADATA, BY_FOLLOWED, BY_CONSUMER)


@dataclass(frozen=True)
class Origin:
    tf_op: str | None
    tf_op_type: str | None
    source: str | None
    # How the TF op was found (NAMED_BY), None when it was not.
    named_by: str | None = None


NO_ORIGIN = Origin(None, None, None)


def _followed(found: Origin) -> Origin:
    """``found``, reached through a fusion or a copy."""
    return replace(found, named_by=BY_FOLLOWED) if found.named_by == BY_METADATA else found


class ModuleIndex:
    """Instructions of one module by id and name, with their recovered TF origin.

    Only the computations reachable from the entry without entering a fusion
    are indexed up front (buffers are defined there); a fused computation is
    indexed when a fusion's origin is asked for, and the whole module only if
    a buffer names an instruction found nowhere else.
    """

    def __init__(self, module: ModuleView) -> None:
        self.module = module
        self.by_id: dict[int, hlo_pb2.HloInstructionProto] = {}
        self.by_name: dict[str, hlo_pb2.HloInstructionProto] = {}
        self.computation_of: dict[int, int] = {}
        # Called computation -> the first instruction that calls it.
        self.caller: dict[int, int] = {}
        self._indexed: set[int] = set()
        self._everything = False
        pending = [module.entry_computation_id]
        while pending:
            comp = self.module.computation(pending.pop())
            if comp is None or comp.id in self._indexed:
                continue
            for inst in self._index(comp):
                if inst.opcode != "fusion":
                    pending.extend(inst.called_computation_ids)
        self._origins: dict[int, Origin] = {}
        # Computation id -> instruction id -> the instructions reading it.
        self._users_in: dict[int, dict[int, list[hlo_pb2.HloInstructionProto]]] = {}
        self._consumers: dict[tuple[int, tuple[int, ...] | None], tuple[int, Origin] | None] = {}
        self._orders: dict[int, dict[int, int]] = {}
        self._names: dict[int, str] = {}

    def _index(self, comp: Computation) -> list[hlo_pb2.HloInstructionProto]:
        insts = comp.instructions
        if comp.id in self._indexed:
            return insts
        self._indexed.add(comp.id)
        for inst in insts:
            self.by_id[inst.id] = inst
            self.by_name[inst.name] = inst
            if len(inst.name) > NAME_LIMIT:  # as ``describe`` gives it
                self.by_name.setdefault(short_name(inst.name), inst)
            self.computation_of[inst.id] = comp.id
            for called in inst.called_computation_ids:
                self.caller.setdefault(called, inst.id)
        return insts

    def _index_all(self) -> None:
        if not self._everything:
            self._everything = True
            for comp in self.module.computations:
                self._index(comp)

    def name_of(self, inst: hlo_pb2.HloInstructionProto) -> str:
        """The instruction's name as tables show it (``short_name``), once per id."""
        found = self._names.get(inst.id)
        if found is None:
            found = self._names[inst.id] = short_name(inst.name)
        return found

    def instruction(
        self, at: hlo_pb2.LogicalBufferProto.Location
    ) -> hlo_pb2.HloInstructionProto | None:
        found = self._find(at)
        if found is None and not self._everything:
            self._index_all()
            found = self._find(at)
        return found

    def _find(self, at: hlo_pb2.LogicalBufferProto.Location) -> hlo_pb2.HloInstructionProto | None:
        if at.instruction_id in self.by_id and (
            not at.instruction_name or self.by_id[at.instruction_id].name == at.instruction_name
        ):
            return self.by_id[at.instruction_id]
        return self.by_name.get(at.instruction_name)

    def origin(self, inst: hlo_pb2.HloInstructionProto, depth: int = 0) -> Origin:
        """The TF op an instruction comes from (see the module docstring)."""
        if inst.id in self._origins:
            return self._origins[inst.id]
        meta = inst.metadata
        found = NO_ORIGIN
        if meta.op_name:
            source = (
                f"{meta.source_file}:{meta.source_line}"
                if meta.source_file
                else self._stack_source(meta.stack_frame_id)
            )
            found = Origin(
                short_name(meta.op_name),
                short_name(meta.op_type) or None,
                short_name(source) if source else None,
                BY_METADATA,
            )
        elif depth < 64 and inst.opcode == "fusion" and inst.called_computation_ids:
            found = self._fused_origin(inst.called_computation_ids[0])
            if found.tf_op is None and self._moves_only(inst):
                operand = self.by_id.get(inst.operand_ids[0])
                if operand is not None:
                    found = self.origin(operand, depth + 1)
            found = _followed(found)
        elif depth < 64 and inst.opcode in COPY_OPCODES and inst.operand_ids:
            operand = self.by_id.get(inst.operand_ids[0])
            if operand is not None:
                found = _followed(self.origin(operand, depth + 1))
        if found.tf_op == XLA_ARGS and inst.opcode != "parameter" and depth < 64:
            reader = self._first_reader(inst, depth)
            if reader is not None:
                found = Origin(reader.tf_op, XLA_ARGS, reader.source, BY_CONSUMER)
        self._origins[inst.id] = found
        return found

    def stack(self, inst: hlo_pb2.HloInstructionProto) -> tuple[Frame, ...]:
        """The Python stack recorded for ``inst`` (JAX writes one per instruction),
        or for its fusion's root where the fusion itself carries none; () without."""
        frame_id = inst.metadata.stack_frame_id
        if not frame_id and inst.opcode == "fusion" and inst.called_computation_ids:
            comp = self.module.computation(inst.called_computation_ids[0])
            if comp is not None:
                self._index(comp)
                root = self.by_id.get(comp.root_id)
                frame_id = root.metadata.stack_frame_id if root is not None else 0
        return self.module.frames(frame_id) if frame_id else ()

    def _stack_source(self, frame_id: int) -> str | None:
        """``file:line`` of the innermost frame of the instruction's recorded stack
        that is the program's own (not an installed package's: JAX records flax's
        and optax's frames too), else of its innermost frame; None without a stack."""
        if not frame_id:
            return None
        frames = self.module.frames(frame_id)
        if not frames:
            return None
        own = next((f for f in frames if f.file and not is_library_path(f.file)), frames[0])
        return f"{own.file}:{own.line}"

    def _first_reader(self, inst: hlo_pb2.HloInstructionProto, depth: int) -> Origin | None:
        """The origin of the first instruction reading ``inst`` whose TF op is not
        ``XLA_Args`` (a reader that copies it again passes on its own reader's)."""
        for user in self.users(inst):
            found = self.origin(user, depth + 1)
            if found.tf_op is not None and found.tf_op != XLA_ARGS:
                return found
        return None

    def users(self, inst: hlo_pb2.HloInstructionProto) -> list[hlo_pb2.HloInstructionProto]:
        """The instructions of ``inst``'s computation that read it, in order."""
        comp_id = self.computation_of.get(inst.id)
        comp = self.module.computation(comp_id) if comp_id is not None else None
        if comp_id is None or comp is None:
            return []
        if comp_id not in self._users_in:
            users: dict[int, list[hlo_pb2.HloInstructionProto]] = {}
            for other in comp.instructions:
                for operand in dict.fromkeys(other.operand_ids):
                    users.setdefault(operand, []).append(other)
            self._users_in[comp_id] = users
        return self._users_in[comp_id].get(inst.id, [])

    def _moves_only(self, fusion: hlo_pb2.HloInstructionProto) -> bool:
        """Whether a fusion of one operand only moves its elements (a layout copy)."""
        comp = self.module.computation(fusion.called_computation_ids[0])
        if comp is None or len(fusion.operand_ids) != 1:
            return False
        return all(i.opcode in _MOVES for i in comp.instructions)

    def _fused_origin(self, computation_id: int) -> Origin:
        comp = self.module.computation(computation_id)
        if comp is None:
            return NO_ORIGIN
        self._index(comp)
        root = self.by_id.get(comp.root_id)
        if root is not None and root.metadata.op_name:
            return self.origin(root)
        named = {i.metadata.op_name: i for i in comp.instructions if i.metadata.op_name}
        if len(named) == 1:
            return self.origin(next(iter(named.values())))
        return NO_ORIGIN

    def named(self, inst: hlo_pb2.HloInstructionProto, shape_index: Sequence[int]) -> Origin:
        """The TF origin of the buffer ``inst`` defines at ``shape_index``: the
        instruction's own (``origin``), else its first consumer's."""
        found = self.origin(inst)
        if found.tf_op is not None or inst.opcode == "parameter":
            return found
        reader = self._consumer(inst, tuple(shape_index), 0)
        if reader is None:
            return found
        return Origin(reader[1].tf_op, reader[1].tf_op_type, reader[1].source, BY_CONSUMER)

    def _consumer(
        self, inst: hlo_pb2.HloInstructionProto, at: tuple[int, ...] | None, depth: int
    ) -> tuple[int, Origin] | None:
        """(schedule position, origin) of the first instruction in schedule order
        that reads the value of ``inst`` at shape index ``at`` (None: any element)
        and has a TF op (not XLA_Args), looking through get-tuple-element (of that
        element) and bitcast. A reader with no TF op of its own passes on its
        first reader's (XLA's helper instructions, like the reduce-window of a
        max pooling, read each other before an op with metadata reads them).
        Memoized per (instruction, index): each is resolved once."""
        key = (inst.id, at)
        if key in self._consumers:
            return self._consumers[key]
        self._consumers[key] = None  # a cycle (crafted) finds nothing through itself
        best: tuple[int, Origin] | None = None
        order = self._order(inst)
        deeper = depth < 64
        for user in self.users(inst):
            found: tuple[int, Origin] | None = None
            if user.opcode == "get-tuple-element":
                if deeper and at is None:
                    found = self._consumer(user, None, depth + 1)
                elif deeper and at and at[0] == user.tuple_index:
                    found = self._consumer(user, at[1:], depth + 1)
            elif user.opcode == "bitcast":
                if deeper:
                    found = self._consumer(user, at, depth + 1)
            elif user.opcode != "tuple":
                position = order.get(user.id, len(order))
                origin = self.origin(user)
                if origin.tf_op is not None and origin.tf_op != XLA_ARGS:
                    found = (position, origin)
                elif origin.tf_op is None and deeper:
                    passed = self._consumer(user, None, depth + 1)
                    found = (position, passed[1]) if passed is not None else None
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        self._consumers[key] = best
        return best

    def _order(self, inst: hlo_pb2.HloInstructionProto) -> dict[int, int]:
        """Instruction id -> position in the schedule of ``inst``'s computation
        (instruction order where the module has no schedule for it)."""
        comp_id = self.computation_of.get(inst.id)
        if comp_id is None:
            return {}
        if comp_id not in self._orders:
            sequence = self.module.schedule.sequences.get(comp_id)
            comp = self.module.computation(comp_id)
            known = [i.id for i in comp.instructions] if comp is not None else []
            ids = scheduled(sequence.instruction_ids if sequence else [], known) or known
            order: dict[int, int] = {}
            for p, inst_id in enumerate(ids):
                order.setdefault(inst_id, p)
            self._orders[comp_id] = order
        return self._orders[comp_id]


def scheduled(sequence: Sequence[int], known: Sequence[int]) -> list[int]:
    """The ids of ``sequence`` that are in ``known`` (a computation's instructions),
    in order: a schedule listing millions of ids no instruction has costs one
    vectorized pass, not a dict of them."""
    if not len(sequence):
        return []
    ids = np.asarray(sequence, dtype=np.int64)
    keep = np.isin(ids, np.asarray(known, dtype=np.int64))
    found: list[int] = ids[keep].tolist()
    return found


def module_index(program: XlaProgram) -> ModuleIndex:
    """The program's ModuleIndex, built once per program."""
    if "index" not in program.cache:
        program.cache["index"] = ModuleIndex(program.module)
    index: ModuleIndex = program.cache["index"]
    return index
