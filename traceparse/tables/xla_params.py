"""The entry parameters of each XLA program: what a compiled step reads.

One row per entry-parameter buffer allocation (``BufferAllocationProto`` with
``is_entry_computation_parameter``) of each program and host. TF's tf2xla
names every entry parameter ``argN.1`` with ``metadata.op_name`` "XLA_Args"
and writes no frontend attributes, so a parameter carries no variable name:
only its number, shape, dtype and size. ``read_by`` lists the TF ops (the
``metadata.op_name``) of the entry instructions that read it, through copies
and bitcasts: a weight's names its layer (``model/dense/MatMul``), an
optimizer slot's only the optimizer (``adam/AssignAddVariableOp_3``).
``updated`` is the allocation's
``maybe_live_out``: the module may alias the parameter to an output
(``input_output_alias``), which tf2xla does for the resource variables a step
assigns (weights and optimizer slots in a training step); inputs (a batch)
and variables only read are not updated.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from traceparse._proto import hlo_pb2
from traceparse.decode.xla import XlaProgram
from traceparse.tables.contracts import XLA_PARAMETERS
from traceparse.tables.xla import (
    COPY_OPCODES,
    XLA_ARGS,
    buffer_info,
    function_of,
    module_index,
)

# The columns this builder makes: the declared table up to the ones the analysis
# adds (analysis/xla_params.py: allocator, ran, counted, reason).
_BUILT = XLA_PARAMETERS.columns[: XLA_PARAMETERS.columns.index("allocator")]
PARAMETER_COLUMNS: dict[str, str] = {name: XLA_PARAMETERS.dtypes[name] for name in _BUILT}


def _entry_instructions(program: XlaProgram) -> list[hlo_pb2.HloInstructionProto]:
    """The entry computation's instructions (only that computation is parsed)."""
    module = program.module
    entry = module.computation(module.entry_computation_id)
    return entry.instructions if entry is not None else []


def _readers(program: XlaProgram) -> dict[str, str | None]:
    """Entry parameter name -> the TF ops that read it (sorted, ", "-joined), or None."""
    found = program.cache.get("parameter_readers")
    if found is not None:
        return dict(found)
    index = module_index(program)
    found = {}
    for param in (i for i in _entry_instructions(program) if i.opcode == "parameter"):
        names: set[str] = set()
        todo, seen = [param], {param.id}
        while todo:
            for user in index.users(todo.pop()):
                name = user.metadata.op_name
                if name and name != XLA_ARGS:
                    names.add(name)
                elif user.opcode in COPY_OPCODES and user.id not in seen:
                    seen.add(user.id)
                    todo.append(user)
        found[param.name] = ", ".join(sorted(names)) or None
    program.cache["parameter_readers"] = found
    return dict(found)


def entry_parameters(program: XlaProgram) -> set[str]:
    """The names of the entry computation's parameter instructions."""
    found = program.cache.get("entry_parameters")
    if found is None:
        found = {i.name for i in _entry_instructions(program) if i.opcode == "parameter"}
        program.cache["entry_parameters"] = found
    return set(found)


def parameters_of(host: str, program: XlaProgram) -> list[dict[str, object]]:
    """The rows of one program (PARAMETER_COLUMNS), in allocation order."""
    module = program.module
    names = entry_parameters(program)
    readers = _readers(program)
    rows: list[dict[str, object]] = []
    for alloc in program.assignment.buffer_allocations:
        if not alloc.is_entry_computation_parameter:
            continue
        instruction = dtype = shape = None
        for assigned in alloc.assigned:
            if assigned.offset != 0 or assigned.size != alloc.size:
                continue
            name, _, _, found_dtype, found_shape, _ = buffer_info(
                program, assigned.logical_buffer_id
            )
            if name in names:  # the parameter itself, not a value written over it
                instruction, dtype, shape = name, found_dtype, found_shape
                break
        rows.append(
            {
                "host": host,
                "program": program.name,
                "module": module.name or None,
                "function": function_of(module.name),
                "parameter_number": alloc.parameter_number,
                "allocation_index": alloc.index,
                "instruction": instruction,
                "dtype": dtype,
                "shape": shape,
                "size_bytes": alloc.size,
                "updated": bool(alloc.maybe_live_out),
                "read_by": readers.get(instruction) if instruction else None,
            }
        )
    return rows


def parameters_table(programs: Sequence[tuple[str, XlaProgram]]) -> pd.DataFrame:
    """Every program's entry parameters, one row each."""
    rows = [row for host, program in programs for row in parameters_of(host, program)]
    frame = pd.DataFrame(rows, columns=list(PARAMETER_COLUMNS))
    return frame.astype(PARAMETER_COLUMNS)
