"""Issue 48's JAX check: the roles of a jitted optax training step's bytes, read
from the program the capture stores (its HLO and buffer assignment).

JAX on CPU records no allocator events at all (its CPU client allocates with
plain aligned malloc, no BFC allocator; a JAX 0.10.2 capture of 3 steps holds 0
``MemoryAllocation``/``MemoryDeallocation`` events: ``--events`` counts them), so
there is no measured peak. What the record allows: the step's memory at the
program's own peak, as XLA assigned it: every entry parameter (params, optimizer
state, batch: live for the whole step) plus the temp slab's buffers live at its
peak (``analysis/xla.slab_peak``), each placed by ``layer_names.place_op`` on its
HLO ``op_name``. Parameters are named by JAX after the argument's pytree path
(``params['params']['big']['kernel']``, ``opt_state[0].mu[...]``), which this
script reads as weight / optimizer state only to report them.

    python benchmarks/jax_optax_roles.py CAPTURE_DIR [--events]

The capture: ``benchmarks/make_jax_optax.py`` (run it with a Python that has JAX).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from traceparse._proto import hlo_pb2, xplane_pb2
from traceparse.analysis.naming.layers import KnownNames, place_op
from traceparse.analysis.xla import slab_peak
from traceparse.decode.xla import XlaProgram, skim_hlo
from traceparse.tables.xla import allocation_kind


def _space(root: Path) -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    space.ParseFromString(next(root.rglob("*.xplane.pb")).read_bytes())
    return space


def memory_events(space: xplane_pb2.XSpace) -> Counter[str]:
    """Allocator events per name over every plane."""
    found: Counter[str] = Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name in ("MemoryAllocation", "MemoryDeallocation"):
                    found[name] += 1
    return found


def step_program(space: xplane_pb2.XSpace, name: str = "jit_train_step") -> XlaProgram:
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        hlo = {k for k, m in plane.stat_metadata.items() if m.name == "Hlo Proto"}
        for meta in plane.event_metadata.values():
            if meta.name.startswith(name):
                for stat in meta.stats:
                    if stat.metadata_id in hlo:
                        data = memoryview(stat.bytes_value)
                        return XlaProgram(meta.name, skim_hlo(data), data)
    raise SystemExit(f"no program {name} in the capture")


def _param_role(op: str) -> str:
    if op.startswith("params"):
        return "weight"
    if op.startswith("opt_state"):
        return "optimizer_state"
    return "other (input)"


def roles(program: XlaProgram) -> Counter[str]:
    hlo = hlo_pb2.HloProto()
    hlo.ParseFromString(bytes(program.data))
    names = {i.id: i.metadata.op_name for c in hlo.hlo_module.computations for i in c.instructions}
    defined = {b.id: b.defined_at.instruction_id for b in hlo.buffer_assignment.logical_buffers}
    known = KnownNames()
    by_role: Counter[str] = Counter()
    for alloc in hlo.buffer_assignment.buffer_allocations:
        kind = allocation_kind(alloc)
        if alloc.is_entry_computation_parameter:
            op = names.get(defined[alloc.assigned[0].logical_buffer_id], "")
            by_role[_param_role(op)] += alloc.size
        elif kind == "temp":
            covered, slack = slab_peak(program, alloc.index)
            for buffer, size in covered:
                by_role[place_op(names.get(defined[buffer]) or None, known).kind] += size
            by_role["other (slack)"] += slack
    return by_role


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    space = _space(root)
    if "--events" in argv:
        print("allocator events:", dict(memory_events(space)) or "none")
    by_role = roles(step_program(space))
    total = sum(by_role.values())
    for role, size in by_role.most_common():
        print(f"{role:18} {size / 2**20:8.2f} MiB")
    unplaced = sum(v for k, v in by_role.items() if k.startswith(("other", "unknown")))
    print(f"other or unknown: {100 * unplaced / total:.1f}% of {total / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
