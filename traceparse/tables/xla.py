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

import pandas as pd

from traceparse._proto import hlo_pb2, hlo_skim_pb2
from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla_index import (
    BY_CONSUMER,
    BY_FOLLOWED,
    BY_METADATA,
    COPY_OPCODES,
    NAMED_BY,
    NO_ORIGIN,
    XLA_ARGS,
    ModuleIndex,
    Origin,
    module_index,
    scheduled,
)

# Public names, with those of tables/xla_index.py that other modules import from here.
__all__ = [
    "BUFFER_COLUMNS",
    "BY_CONSUMER",
    "BY_FOLLOWED",
    "BY_METADATA",
    "COPY_OPCODES",
    "KINDS",
    "NAMED_BY",
    "PROGRAM_COLUMNS",
    "XLA_ARGS",
    "ModuleIndex",
    "allocation_kind",
    "buffer_info",
    "buffer_naming",
    "buffers_of",
    "buffers_table",
    "describe",
    "dtype_of",
    "function_of",
    "made_per_run",
    "module_index",
    "programs_table",
    "scheduled",
    "shape_text",
]

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
# "a_inference_one_step_on_data_1132__XlaMustCompile_...2" -> the TF function
# "__inference_one_step_on_data_1132" it was compiled from.
_FUNCTION = re.compile(r"(?:^|_)(inference_.*?_\d+)(?=__|\.\d+$|$)")

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


def shape_text(dimensions: Sequence[int]) -> str:
    """As the profiler writes shapes in allocations: "[32,32,32,16]", "[]" for a scalar."""
    return "[" + ",".join(str(int(d)) for d in dimensions) + "]"


def describe(
    index: ModuleIndex, buffer: hlo_pb2.LogicalBufferProto | None
) -> tuple[hlo_pb2.HloInstructionProto | None, str | None, str | None, int | None, Origin]:
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
    origin = NO_ORIGIN
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
) -> tuple[hlo_pb2.HloInstructionProto | None, str | None, str | None, int | None, Origin]:
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
