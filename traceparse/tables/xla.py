"""The XLA tables: programs, their buffers, and which allocations they made.

``xla_buffers`` has one row per logical buffer placed in a buffer allocation
(``BufferAllocationProto.assigned``). A buffer's TF op comes from its defining
instruction's metadata; where that is empty, the module still says where the
value comes from in two cases, and only those are followed:

- a fusion: the root of the fused computation, else the one TF op all fused
  instructions with metadata name (several different ones: NA);
- a copy or bitcast (``copy``, ``copy-start``, ``copy-done``, ``bitcast``):
  the operand it copies, followed through chains of copies and fusions;
- a fusion with one operand whose fused instructions only move that operand's
  elements (parameter, ``transpose``, ``copy``, ``bitcast``, ``reshape``; XLA's
  ``transpose_copy_fusion``, a layout change): like a copy, its operand's.

Followed that way, a copy of an entry argument would be named after the
argument, ``XLA_Args``: tf2xla writes it on every parameter, and it names no TF
op. Such a copy takes instead the TF op of its first reader in the computation
that has one (the layout copy of a Dense kernel is its MatMul's), with
``tf_op_type`` ``XLA_Args`` to say it holds an argument, not that op's output.
Parameters themselves keep ``XLA_Args``; ``xla_parameters.read_by`` lists
their readers.

Everything else without metadata keeps NA.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from traceparse._proto import hlo_pb2, hlo_skim_pb2
from traceparse.decode.xla import NAME_LIMIT, Computation, ModuleView, XlaProgram, short_name

# xla.PrimitiveType -> TensorFlow's Python dtype name and bytes per element
# (sub-byte types are stored one element per byte, as TensorFlow does).
_ELEMENT_TYPES: dict[int, tuple[str, int]] = {
    1: ("bool", 1),
    2: ("int8", 1),
    3: ("int16", 2),
    4: ("int32", 4),
    5: ("int64", 8),
    6: ("uint8", 1),
    7: ("uint16", 2),
    8: ("uint32", 4),
    9: ("uint64", 8),
    10: ("float16", 2),
    11: ("float32", 4),
    12: ("float64", 8),
    15: ("complex64", 8),
    16: ("bfloat16", 2),
    18: ("complex128", 16),
    19: ("float8_e5m2", 1),
    20: ("float8_e4m3fn", 1),
    21: ("int4", 1),
    22: ("uint4", 1),
    23: ("float8_e4m3b11fnuz", 1),
    24: ("float8_e5m2fnuz", 1),
    25: ("float8_e4m3fnuz", 1),
    26: ("int2", 1),
    27: ("uint2", 1),
    32: ("float4_e2m1fn", 1),
}

# A buffer allocation as the skim read (linking) or the full parse gives it.
Allocation = hlo_pb2.BufferAllocationProto | hlo_skim_pb2.SkimBufferAllocation

KINDS = ("temp", "output", "parameter", "constant", "thread_local")
COPY_OPCODES = {"copy", "copy-start", "copy-done", "bitcast"}
# tf2xla's op_name for every entry parameter; as a buffer's tf_op_type, an argument's copy.
XLA_ARGS = "XLA_Args"
# Fused instructions that only move elements: a fusion of these is a copy.
_MOVES = {"parameter", "transpose", "copy", "bitcast", "reshape"}
# "a_inference_one_step_on_data_1132__XlaMustCompile_...2" -> the TF function
# "__inference_one_step_on_data_1132" it was compiled from.
_FUNCTION = re.compile(r"(?:^|_)(inference_.*?_\d+)(?=__|\.\d+$|$)")

# How a buffer's TF op was found (``xla_buffers.named_by``; NA: not found).
BY_METADATA = "hlo metadata"  # its defining instruction's metadata
BY_FOLLOWED = "fused/copied instruction"  # a fusion's root, what a copy copies
BY_CONSUMER = "consumer"  # the first instruction reading it that has a TF op
NAMED_BY = (BY_METADATA, BY_FOLLOWED, BY_CONSUMER)
# Past this, a shape x dtype size is not a size (a crafted shape): NA.
_MAX_BYTES = 2**63 - 1

PROGRAM_COLUMNS: dict[str, str] = {
    "host": "category",
    "program": "object",
    "module": "object",
    "function": "object",
    "instructions": "int64",
    **{f"{kind}_bytes": "int64" for kind in KINDS},
    "runs": "int64",
}

BUFFER_COLUMNS: dict[str, str] = {
    "host": "category",
    "program": "category",
    "allocation_index": "int64",
    "allocation_kind": "category",
    "parameter_number": "Int64",
    "offset": "int64",
    "size_bytes": "int64",
    "instruction": "object",
    "opcode": "category",
    "dtype": "category",
    "shape": "object",
    "estimated_bytes": "Int64",
    "tf_op": "object",
    "tf_op_type": "object",
    "source": "object",
    "logical_buffer": "int64",
    "instruction_id": "Int64",
    "named_by": "category",
}


def allocation_kind(alloc: Allocation) -> str:
    """One kind per allocation; a parameter that is also an output stays a parameter."""
    if alloc.is_entry_computation_parameter:
        return "parameter"
    if alloc.is_constant:
        return "constant"
    if alloc.is_thread_local:
        return "thread_local"
    if alloc.maybe_live_out:
        return "output"
    return "temp"


def made_per_run(alloc: Allocation) -> bool:
    """Whether the runtime asks TF's allocator for this allocation on each run:
    the temp slab and outputs (also a parameter's output twin when not donated)."""
    kind = allocation_kind(alloc)
    return kind in ("temp", "output") or (kind == "parameter" and alloc.maybe_live_out)


def function_of(module: str) -> str | None:
    """The TF function a module was compiled from, or None (JAX, autoclustering)."""
    match = _FUNCTION.search(module)
    return f"__{match.group(1)}" if match else None


def dtype_of(element_type: int) -> str | None:
    found = _ELEMENT_TYPES.get(element_type)
    return found[0] if found else None


def _shape_at(shape: hlo_pb2.ShapeProto, index: Sequence[int]) -> hlo_pb2.ShapeProto | None:
    for i in index:
        if not 0 <= i < len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


@dataclass(frozen=True)
class _Origin:
    tf_op: str | None
    tf_op_type: str | None
    source: str | None
    # How the TF op was found (NAMED_BY), None when it was not.
    named_by: str | None = None


_NONE = _Origin(None, None, None)


def _followed(found: _Origin) -> _Origin:
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
        self._origins: dict[int, _Origin] = {}
        # Computation id -> instruction id -> the instructions reading it.
        self._users_in: dict[int, dict[int, list[hlo_pb2.HloInstructionProto]]] = {}
        self._consumers: dict[tuple[int, tuple[int, ...]], tuple[int, _Origin] | None] = {}
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

    def origin(self, inst: hlo_pb2.HloInstructionProto, depth: int = 0) -> _Origin:
        """The TF op an instruction comes from (see the module docstring)."""
        if inst.id in self._origins:
            return self._origins[inst.id]
        meta = inst.metadata
        found = _NONE
        if meta.op_name:
            source = f"{meta.source_file}:{meta.source_line}" if meta.source_file else None
            found = _Origin(
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
                found = _Origin(reader.tf_op, XLA_ARGS, reader.source, BY_CONSUMER)
        self._origins[inst.id] = found
        return found

    def _first_reader(self, inst: hlo_pb2.HloInstructionProto, depth: int) -> _Origin | None:
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

    def _fused_origin(self, computation_id: int) -> _Origin:
        comp = self.module.computation(computation_id)
        if comp is None:
            return _NONE
        self._index(comp)
        root = self.by_id.get(comp.root_id)
        if root is not None and root.metadata.op_name:
            return self.origin(root)
        named = {i.metadata.op_name: i for i in comp.instructions if i.metadata.op_name}
        if len(named) == 1:
            return self.origin(next(iter(named.values())))
        return _NONE

    def named(self, inst: hlo_pb2.HloInstructionProto, shape_index: Sequence[int]) -> _Origin:
        """The TF origin of the buffer ``inst`` defines at ``shape_index``: the
        instruction's own (``origin``), else its first consumer's."""
        found = self.origin(inst)
        if found.tf_op is not None or inst.opcode == "parameter":
            return found
        reader = self._consumer(inst, tuple(shape_index), 0)
        if reader is None:
            return found
        return _Origin(reader[1].tf_op, reader[1].tf_op_type, reader[1].source, BY_CONSUMER)

    def _consumer(
        self, inst: hlo_pb2.HloInstructionProto, at: tuple[int, ...] | None, depth: int
    ) -> tuple[int, _Origin] | None:
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
        best: tuple[int, _Origin] | None = None
        order = self._order(inst)
        deeper = depth < 64
        for user in self.users(inst):
            found: tuple[int, _Origin] | None = None
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


def shape_text(dimensions: Sequence[int]) -> str:
    """As the profiler writes shapes in allocations: "[32,32,32,16]", "[]" for a scalar."""
    return "[" + ",".join(str(int(d)) for d in dimensions) + "]"


def describe(
    index: ModuleIndex, buffer: hlo_pb2.LogicalBufferProto | None
) -> tuple[hlo_pb2.HloInstructionProto | None, str | None, str | None, int | None, _Origin]:
    """A logical buffer's defining instruction, dtype, shape text, shape x dtype
    bytes and TF origin (None where the module does not say)."""
    inst = index.instruction(buffer.defined_at) if buffer is not None else None
    shape = None
    if inst is not None and buffer is not None:
        shape = _shape_at(inst.shape, buffer.defined_at.shape_index)
    dtype = text = estimated = None
    if shape is not None and shape.element_type in _ELEMENT_TYPES:
        dtype, itemsize = _ELEMENT_TYPES[shape.element_type]
        dims = list(shape.dimensions)
        text = shape_text(dims)
        estimated = _nbytes(dims, itemsize)
    origin = _NONE
    if inst is not None and buffer is not None:
        origin = index.named(inst, buffer.defined_at.shape_index)
    return inst, dtype, text, estimated, origin


def _nbytes(dims: Sequence[int], itemsize: int) -> int | None:
    """Shape x dtype bytes in Python integers; None for a negative dimension or
    a size past int64 (only a crafted module has them)."""
    if any(d < 0 for d in dims):
        return None
    if 0 in dims:
        return 0
    total = itemsize
    for d in dims:
        total *= d
        if total > _MAX_BYTES:
            return None
    return total


def _described(
    program: XlaProgram, logical_buffer: int
) -> tuple[hlo_pb2.HloInstructionProto | None, str | None, str | None, int | None, _Origin]:
    """``describe`` of one buffer of ``program``, found by id (index built once)."""
    logical = program.cache.get("logical")
    if logical is None:
        logical = {b.id: b for b in program.assignment.logical_buffers}
        program.cache["logical"] = logical
    return describe(module_index(program), logical.get(logical_buffer))


def buffer_info(program: XlaProgram, logical_buffer: int) -> tuple[object, ...]:
    """(instruction, tf_op, tf_op_type, dtype, shape, estimated_bytes) of one buffer."""
    inst, dtype, shape, estimated, origin = _described(program, logical_buffer)
    name = module_index(program).name_of(inst) if inst is not None else None
    return name, origin.tf_op, origin.tf_op_type, dtype, shape, estimated


def buffer_naming(program: XlaProgram, logical_buffer: int) -> str | None:
    """How ``buffer_info``'s tf_op was found (one of NAMED_BY), None when it was not."""
    return _described(program, logical_buffer)[4].named_by


def buffers_of(host: str, program: XlaProgram) -> dict[str, list[object]]:
    """Columns of ``xla_buffers`` for one program (lists, in BUFFER_COLUMNS order)."""
    assignment = program.assignment
    index = module_index(program)
    logical = {b.id: b for b in assignment.logical_buffers}
    rows: dict[str, list[object]] = {name: [] for name in BUFFER_COLUMNS}
    for alloc in assignment.buffer_allocations:
        kind = allocation_kind(alloc)
        for assigned in alloc.assigned:
            inst, dtype, shape, estimated, origin = describe(
                index, logical.get(assigned.logical_buffer_id)
            )
            values = {
                "host": host,
                "program": program.name,
                "allocation_index": alloc.index,
                "allocation_kind": kind,
                "parameter_number": alloc.parameter_number if kind == "parameter" else None,
                "offset": assigned.offset,
                "size_bytes": assigned.size,
                "instruction": index.name_of(inst) if inst is not None else None,
                "opcode": inst.opcode if inst is not None else None,
                "dtype": dtype,
                "shape": shape,
                "estimated_bytes": estimated,
                "tf_op": origin.tf_op,
                "tf_op_type": origin.tf_op_type,
                "source": origin.source,
                "logical_buffer": assigned.logical_buffer_id,
                "instruction_id": inst.id if inst is not None else None,
                "named_by": origin.named_by,
            }
            for name, value in values.items():
                rows[name].append(value)
    return rows


def buffers_table(programs: Sequence[tuple[str, XlaProgram]]) -> pd.DataFrame:
    """``xla_buffers`` for (host, program) pairs."""
    columns: dict[str, list[object]] = {name: [] for name in BUFFER_COLUMNS}
    for host, program in programs:
        for name, values in buffers_of(host, program).items():
            columns[name].extend(values)
    frame = pd.DataFrame(
        {name: pd.Series(values, dtype=object) for name, values in columns.items()}
    )
    frame = frame.astype(BUFFER_COLUMNS)
    frame["allocation_kind"] = frame["allocation_kind"].cat.set_categories(list(KINDS))
    frame["named_by"] = frame["named_by"].cat.set_categories(list(NAMED_BY))
    return frame


def programs_table(
    programs: Sequence[tuple[str, XlaProgram]], runs: dict[tuple[str, str], int]
) -> pd.DataFrame:
    """``xla_programs``: one row per (host, program); ``runs`` counts linked events.
    Instructions are counted without parsing them (``ModuleView``)."""
    rows = []
    for host, program in programs:
        module = program.module
        sizes = dict.fromkeys(KINDS, 0)
        for alloc in program.skim.allocations:
            sizes[allocation_kind(alloc)] += alloc.size
        rows.append(
            {
                "host": host,
                "program": program.name,
                "module": module.name,
                "function": function_of(module.name),
                "instructions": module.instruction_count,
                **{f"{kind}_bytes": size for kind, size in sizes.items()},
                "runs": runs.get((host, program.name), 0),
            }
        )
    frame = pd.DataFrame(rows, columns=list(PROGRAM_COLUMNS))
    return frame.astype(PROGRAM_COLUMNS)
