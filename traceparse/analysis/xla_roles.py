"""What one XLA program holds at its own peak, by role and layer.

Where the allocator records nothing (JAX on CPU allocates with aligned malloc,
no BFC allocator, so its captures hold no ``MemoryAllocation`` events), the
compiled program is the record of a step's memory: XLA's buffer assignment
says every byte it needs. At the program's peak those are its entry
parameters (live for the whole run: weights, optimizer state, the batch) and
the buffers of its temp slab live at that instant (``xla.slab_peak``), plus the
slab's bytes none of them covers. Each row gets the role and layer:

- a temp buffer by its op name (``naming.layers.place_op``, which reads JAX's
  ``jvp``/``transpose`` name stack), and, where the name says neither, by the
  instruction's recorded Python stack (``naming.jax.stack_role``: optax's
  update);
- a parameter by its key path (``naming.jax.parameter_roles``: weights, and
  the optimizer state that mirrors them).

Output buffers are not counted: XLA writes them at the end and, where the
caller donates its arguments, into the parameters' own buffers.
"""

from __future__ import annotations

import pandas as pd

from traceparse.analysis.naming.jax import parameter_roles, stack_role
from traceparse.analysis.naming.layers import NO_LAYER, OTHER, XLA_SLAB, KnownNames, place_op
from traceparse.analysis.xla import slab_peak
from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla import allocation_kind, describe
from traceparse.tables.xla_index import module_index

PROGRAM_ROLE_COLUMNS = (
    "allocation_kind",
    "instruction",
    "tf_op",
    "source",
    "size_bytes",
    "role",
    "layer",
)


def program_peak_roles(program: XlaProgram) -> pd.DataFrame:
    """One row per buffer the program holds at its own peak (the module docstring),
    largest first: ``PROGRAM_ROLE_COLUMNS``."""
    index = module_index(program)
    logical = {b.id: b for b in program.assignment.logical_buffers}
    known = KnownNames()
    rows: list[tuple[object, ...]] = []
    parameters: list[tuple[str, str | None, str | None, int]] = []
    for alloc in program.assignment.buffer_allocations:
        kind = allocation_kind(alloc)
        if kind == "parameter" and alloc.assigned:
            inst, _, _, _, origin = describe(
                index, logical.get(alloc.assigned[0].logical_buffer_id)
            )
            name = index.name_of(inst) if inst is not None else None
            parameters.append((origin.tf_op or "", name, origin.source, alloc.size))
        elif kind == "temp":
            covered, slack = slab_peak(program, alloc.index)
            for buffer, size in covered:
                inst, _, _, _, origin = describe(index, logical.get(buffer))
                placed = place_op(origin.tf_op, known)
                role, layer = placed.kind, placed.layer
                if role == OTHER and layer == NO_LAYER and inst is not None:
                    role = stack_role(index.stack(inst)) or role
                name = index.name_of(inst) if inst is not None else None
                rows.append((kind, name, origin.tf_op, origin.source, size, role, layer))
            if slack:
                rows.append((kind, None, None, None, slack, OTHER, XLA_SLAB))
    said = parameter_roles([op for op, _, _, _ in parameters])
    for op, name, source, size in parameters:
        said_role, said_layer = said.get(op, (OTHER, None))
        rows.append(
            ("parameter", name, op or None, source, size, said_role, said_layer or NO_LAYER)
        )
    frame = pd.DataFrame(rows, columns=list(PROGRAM_ROLE_COLUMNS))
    frame["size_bytes"] = frame["size_bytes"].astype("int64")
    return frame.sort_values("size_bytes", ascending=False, kind="stable").reset_index(drop=True)
