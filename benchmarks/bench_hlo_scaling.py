"""HLO analyses scale linearly (or n log n): each crafted input of issue 29 grown 10x.

Builds small XLA programs in memory (no capture, no subprocess), each in two
sizes, n and 10 n, and times the analysis the input used to blow up:

- ``bitcasts``: a chain of n bitcasts, each reading the one before twice and
  itself twice, the last read at the end of the schedule (``slab_peak``'s
  last uses);
- ``alloc-trace``: a heap-simulator trace of n ALLOC events (``slab_peak``);
- ``equal-spans``: n slab buffers with the same start and end (``_in_place``);
- ``outputs``: n output allocations of one size (``held_value`` over all);
- ``consumers``: n buffers with no TF op, each read by an op (``xla_buffers``);
- ``schedule``: a schedule of n ids (``slab_peak``, ``xla_buffers``).

The minimum of ``--repeat`` runs is kept (garbage collector off while timing);
the ratio large/small must stay at most ``--bound`` (14: 10x the input; n log n
from 16k to 160k is 12.4x; the rest is room for noise on shared CPUs). Exits 1
when one does not. ``--cases`` picks some inputs (to time an older checkout on
the ones it survives, with a small ``--n``).

    python benchmarks/bench_hlo_scaling.py [--n 4000] [--repeat 3] [--bound 14]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable

from traceparse._proto import hlo_pb2
from traceparse.analysis.xla import slab_peak
from traceparse.decode.xla import XlaProgram, skim_hlo
from traceparse.tables.xla import buffers_of
from traceparse.tables.xla_link import held_value

F32, SLAB = 11, 0


class Builder:
    """An entry computation with one temp slab (allocation 0)."""

    def __init__(self) -> None:
        self.hlo = hlo_pb2.HloProto()
        module = self.hlo.hlo_module
        module.name = "bench"
        module.entry_computation_id = 1
        self.entry = module.computations.add(name="main", id=1)
        self.slab = self.hlo.buffer_assignment.buffer_allocations.add(index=SLAB)
        self.next_id = 100

    def add(self, opcode: str, operands: list[int], size: int = 0, op: str = "") -> int:
        inst_id = self.next_id
        self.next_id += 1
        inst = self.entry.instructions.add(
            name=f"i{inst_id}", opcode=opcode, id=inst_id, operand_ids=operands
        )
        inst.shape.element_type = F32
        inst.metadata.op_name = op
        if size:
            inst.shape.dimensions.append(size // 4)
            self.buffer(inst_id, size)
        return inst_id

    def buffer(self, inst_id: int, size: int, buffer_id: int | None = None) -> int:
        buffer_id = inst_id if buffer_id is None else buffer_id
        logical = self.hlo.buffer_assignment.logical_buffers.add(id=buffer_id, size=size)
        logical.defined_at.instruction_id = inst_id
        self.slab.assigned.add(logical_buffer_id=buffer_id, offset=self.slab.size, size=size)
        self.slab.size += size
        return buffer_id

    def program(self) -> XlaProgram:
        data = memoryview(self.hlo.SerializeToString())
        return XlaProgram("bench(1)", skim_hlo(data), data)


def bitcasts(n: int) -> Callable[[], object]:
    b = Builder()
    p = b.add("parameter", [])
    first = b.add("add", [p], size=64)
    previous = first
    for _ in range(n):
        inst_id = b.next_id
        previous = b.add("bitcast", [previous, previous, inst_id, inst_id])
    b.add("add", [previous], size=64)
    program = b.program()
    return lambda: slab_peak(program, SLAB)


def alloc_trace(n: int) -> Callable[[], object]:
    b = Builder()
    p = b.add("parameter", [])
    owner = b.add("add", [p])
    trace = b.hlo.buffer_assignment.heap_simulator_traces.add(buffer_allocation_index=SLAB)
    for k in range(n):
        trace.events.add(kind=0, buffer_id=b.buffer(owner, 4, 10**6 + k))
    program = b.program()
    return lambda: slab_peak(program, SLAB)


def equal_spans(n: int) -> Callable[[], object]:
    b = Builder()
    p = b.add("parameter", [])
    owner = b.add("add", [p])
    for k in range(n):
        b.buffer(owner, 4, 10**6 + k)
    program = b.program()
    return lambda: slab_peak(program, SLAB)


def outputs(n: int) -> Callable[[], object]:
    b = Builder()
    p = b.add("parameter", [])
    value = b.add("add", [p], size=64, op="scope/value")
    for k in range(n):
        alloc = b.hlo.buffer_assignment.buffer_allocations.add(
            index=1 + k, size=64, maybe_live_out=True
        )
        alloc.assigned.add(logical_buffer_id=value, offset=0, size=64)
    program = b.program()
    return lambda: [held_value(program, 1 + k) for k in range(n)]


def consumers(n: int) -> Callable[[], object]:
    b = Builder()
    p = b.add("parameter", [])
    for k in range(n):
        anonymous = b.add("add", [p], size=4)
        b.add("add", [anonymous], size=4, op=f"scope/op{k}")
    hlo = b.hlo.SerializeToString()

    def run() -> object:
        data = memoryview(hlo)
        return buffers_of("h", XlaProgram("bench(1)", skim_hlo(data), data))

    return run


def schedule(n: int) -> Callable[[], object]:
    b = Builder()
    p = b.add("parameter", [])
    a = b.add("add", [p], size=64)
    b.add("add", [a], size=64)
    ids = b.hlo.hlo_module.schedule.sequences[1].instruction_ids
    ids.extend([p, a, a + 1, *range(10**9, 10**9 + n)])
    hlo = b.hlo.SerializeToString()

    def run() -> object:
        data = memoryview(hlo)
        program = XlaProgram("bench(1)", skim_hlo(data), data)
        return slab_peak(program, SLAB), buffers_of("h", program)

    return run


CASES: dict[str, tuple[Callable[[int], Callable[[], object]], int]] = {
    # name: (builder, how many times --n the small input is)
    "bitcasts": (bitcasts, 4),
    "alloc-trace": (alloc_trace, 4),
    "equal-spans": (equal_spans, 4),
    "outputs": (outputs, 1),
    "consumers": (consumers, 1),
    "schedule": (schedule, 100),
}


def best_of(run: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs, with the cyclic garbage collector off: its
    full collections cost in proportion to every object alive, which would
    measure the heap, not the analysis."""
    times = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
    finally:
        gc.enable()
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4000, help="base size of the small inputs")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bound", type=float, default=14.0)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated inputs")
    args = parser.parse_args()
    print(f"{'input':<12} {'n':>9} {'10 n':>9} {'small s':>9} {'large s':>9} {'ratio':>6}")
    worst = 0.0
    for name in args.cases.split(","):
        build, scale = CASES[name]
        n = args.n * scale
        small = best_of(build(n), args.repeat)
        large = best_of(build(10 * n), args.repeat)
        ratio = large / small if small > 0 else float("inf")
        worst = max(worst, ratio)
        print(f"{name:<12} {n:>9} {10 * n:>9} {small:>9.4f} {large:>9.4f} {ratio:>6.1f}")
    print(f"largest ratio {worst:.1f} (bound {args.bound:g})")
    return 0 if worst <= args.bound else 1


if __name__ == "__main__":
    sys.exit(main())
