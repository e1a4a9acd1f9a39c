"""Crafted XLA programs (issue 29, items 1 to 4): a few bytes of HLO that made
the HLO analyses hang, grow quadratically, fill memory or fail with an internal
error. Each is built here from a fixture and must go through the commands
within the time and memory bounds (tests/hlo_craft.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import FIXTURES
from hlo_craft import check_commands, craft, defining, entry, temp_slab

import traceparse
from traceparse._proto import hlo_pb2, xplane_pb2

KEEP = "XLA_Args"


def _buffers(path: Path) -> object:
    return traceparse.load(path).xla_buffers


# -- 1. aliases read through without memo ------------------------------------------


def _bitcast_chain(links: int) -> object:
    def edit(hlo: hlo_pb2.HloProto, _: xplane_pb2.XEventMetadata) -> None:
        comp = entry(hlo)
        target = defining(hlo, temp_slab(hlo))
        schedule = hlo.hlo_module.schedule.sequences[comp.id].instruction_ids
        previous = target
        for k in range(links):
            new_id = 9_000_000 + k
            # Reads the value before it twice and itself twice: without a memo each
            # level doubles the walk.
            comp.instructions.add(
                name=f"bitcast.crafted.{k}",
                opcode="bitcast",
                id=new_id,
                operand_ids=[previous, previous, new_id, new_id],
            ).shape.element_type = 11
            schedule.append(new_id)
            previous = new_id

    return edit


@pytest.mark.parametrize("links", [1, 40])
def test_a_bitcast_reading_itself_ends_quickly(tmp_path: Path, links: int) -> None:
    path = craft(tmp_path, _bitcast_chain(links))
    started = time.process_time()
    prof = traceparse.load(path)
    assert not prof.peak.empty and len(prof.xla_buffers)
    assert not prof.layers().empty  # reads the slabs at the peak (schedule path)
    assert time.process_time() - started < 30
    if links == 40:
        check_commands(path)


# -- 2. quadratic paths ------------------------------------------------------------


def _many_buffers(count: int, trace: bool, name: str = "crafted") -> object:
    """``count`` more 4-byte buffers in the slab, defined by one new instruction
    (called ``name``) that nothing reads (equal start and end); with ``trace``, a
    heap-simulator trace of only ALLOC events for them (all live at its peak)."""

    def edit(hlo: hlo_pb2.HloProto, _: xplane_pb2.XEventMetadata) -> None:
        comp = entry(hlo)
        slab = temp_slab(hlo)
        inst = comp.instructions.add(name=name, opcode="constant", id=8_000_000)
        inst.shape.element_type = 11
        hlo.hlo_module.schedule.sequences[comp.id].instruction_ids.append(inst.id)
        assignment = hlo.buffer_assignment
        events = assignment.heap_simulator_traces.add(buffer_allocation_index=slab.index)
        for k in range(count):
            buffer = 7_000_000 + k
            assignment.logical_buffers.add(id=buffer, size=4).defined_at.instruction_id = inst.id
            slab.assigned.add(logical_buffer_id=buffer, offset=4 * (k % 1000), size=4)
            if trace:
                events.events.add(kind=0, buffer_id=buffer)

    return edit


@pytest.mark.parametrize("trace", [True, False], ids=["alloc-only-trace", "equal-spans"])
def test_many_slab_buffers_are_linear(tmp_path: Path, trace: bool) -> None:
    path = craft(tmp_path, _many_buffers(60_000, trace))
    check_commands(path)


def _many_outputs(count: int) -> object:
    """``count`` more output allocations of the size of the program's first
    output allocation: allocator events of that size now fit them all."""

    def edit(hlo: hlo_pb2.HloProto, _: xplane_pb2.XEventMetadata) -> None:
        assignment = hlo.buffer_assignment
        first = next(
            a
            for a in assignment.buffer_allocations
            if a.maybe_live_out and a.size >= 2**20 and len(a.assigned)
        )
        top = max(a.index for a in assignment.buffer_allocations)
        for k in range(count):
            alloc = assignment.buffer_allocations.add(
                index=top + 1 + k, size=first.size, maybe_live_out=True
            )
            alloc.assigned.extend(first.assigned)

    return edit


def test_many_outputs_of_one_size_are_linear(tmp_path: Path) -> None:
    path = craft(tmp_path, _many_outputs(30_000))
    check_commands(path)


# -- 3. long names -----------------------------------------------------------------


def test_a_long_instruction_name_takes_bounded_memory(tmp_path: Path) -> None:
    """4000 buffers live at the slab's peak, all defined by one instruction with
    a 1 MB name: a 1.2 MB capture that took 4.1 GB when each row copied the name."""
    path = craft(tmp_path, _many_buffers(4000, True, "i" * 2**20))
    assert path.stat().st_size < 2 * 2**20
    outputs = check_commands(path)
    assert all(len(out) < 2**20 for out in outputs)


def test_a_long_program_name_takes_bounded_memory(tmp_path: Path) -> None:
    def edit(hlo: hlo_pb2.HloProto, meta: xplane_pb2.XEventMetadata) -> None:
        meta.name = "p" * 2**20 + meta.name
        hlo.hlo_module.name = "m" * 2**20 + hlo.hlo_module.name
        _many_buffers(4000, True)(hlo, meta)

    path = craft(tmp_path, edit)
    outputs = check_commands(path)
    assert all(len(out) < 2**20 for out in outputs)


def test_a_long_schedule_takes_bounded_memory(tmp_path: Path) -> None:
    def edit(hlo: hlo_pb2.HloProto, _: xplane_pb2.XEventMetadata) -> None:
        comp = entry(hlo)
        ids = hlo.hlo_module.schedule.sequences[comp.id].instruction_ids
        ids.extend([10**12 + k for k in range(5_000_000)])

    check_commands(craft(tmp_path, edit))


# -- 4. crafted shape values -------------------------------------------------------


def _shapes(kind: str) -> object:
    def edit(hlo: hlo_pb2.HloProto, _: xplane_pb2.XEventMetadata) -> None:
        logical = {b.id: b for b in hlo.buffer_assignment.logical_buffers}
        insts = {i.id: i for c in hlo.hlo_module.computations for i in c.instructions}
        for alloc in hlo.buffer_assignment.buffer_allocations:
            for assigned in alloc.assigned:
                at = logical[assigned.logical_buffer_id].defined_at
                inst = insts.get(at.instruction_id)
                if kind == "negative-index":
                    at.shape_index.extend([-1])
                elif inst is not None:
                    dims = [-5, 7] if kind == "negative-dims" else [2**40, 2**40, 3]
                    for shape in [inst.shape, *inst.shape.tuple_shapes]:
                        del shape.dimensions[:]
                        shape.dimensions.extend(dims)

    return edit


@pytest.mark.parametrize("kind", ["negative-index", "negative-dims", "overflow"])
def test_crafted_shapes_give_na(tmp_path: Path, kind: str) -> None:
    path = craft(tmp_path, _shapes(kind))
    buffers = traceparse.load(path).xla_buffers
    assert buffers["estimated_bytes"].isna().all()
    if kind == "negative-index":
        assert buffers["shape"].isna().all()
    check_commands(path)


def test_the_fixture_itself_passes_the_bounds() -> None:
    # The bounds are not what makes the crafted captures pass.
    check_commands(next((FIXTURES / "xla_keras").rglob("*.xplane.pb")))
