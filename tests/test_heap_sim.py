"""What fills a temp slab at its program's peak (analysis/xla.py), on small
hand-built HLO modules: heap-simulator traces replayed as xprof's Memory
Viewer reads them (ALLOC, FREE, SHARE_WITH), and the schedule-based path
where a module has no trace."""

from __future__ import annotations

from helpers.hlo import SLAB, Module

from traceparse.analysis.xla import slab_peak

ALLOC, FREE, SHARE_WITH = 0, 1, 2
F32 = 11


def _four() -> Module:
    m = Module()
    for name, size in [("a", 100), ("b", 60), ("c", 80), ("d", 40)]:
        m.add(name, size=size)
    return m


# -- heap-simulator traces -----------------------------------------------------------


def test_alloc_and_free_in_trace_order() -> None:
    m = _four()
    m.trace((ALLOC, "a"), (ALLOC, "b"), (FREE, "a"), (ALLOC, "c"), (FREE, "b"), (ALLOC, "d"))
    # a + b = 160 before b + c = 140 and c + d = 120.
    live, slack = m.peak()
    assert live == {"a": 100, "b": 60}
    assert slack == 280 - 160


def test_the_first_instant_at_the_maximum_is_the_peak() -> None:
    m = _four()
    # a + d = 140, then b + c = 140 again: the peak stays at the first.
    m.trace((ALLOC, "a"), (ALLOC, "d"), (FREE, "a"), (FREE, "d"), (ALLOC, "b"), (ALLOC, "c"))
    assert m.peak()[0] == {"a": 100, "d": 40}


def test_a_sharer_keeps_the_bytes_until_the_last_is_freed() -> None:
    m = _four()
    m.trace(
        (ALLOC, "a"),
        (SHARE_WITH, "b", "a"),  # b holds a's bytes: nothing more in use
        (FREE, "a"),  # b still holds them
        (ALLOC, "c"),  # a's 100 + c's 80 = 180: the peak
        (FREE, "b"),  # now a's bytes are free
        (ALLOC, "d"),  # c + d = 120
    )
    assert m.peak()[0] == {"a": 100, "c": 80}


def test_sharing_a_freed_buffer_takes_its_bytes_again() -> None:
    m = _four()
    m.trace(
        (ALLOC, "a"),
        (FREE, "a"),
        (ALLOC, "c"),
        (SHARE_WITH, "b", "a"),  # a's bytes in use again: 100 + 80
        (FREE, "c"),
        (ALLOC, "d"),
    )
    assert m.peak()[0] == {"a": 100, "c": 80}


def test_a_sharer_is_counted_once_with_its_canonical() -> None:
    m = _four()
    m.trace((ALLOC, "a"), (SHARE_WITH, "b", "a"), (SHARE_WITH, "c", "a"), (ALLOC, "d"))
    # The three share a's 100 bytes; with d that is 140, not 100 + 60 + 80 + 40.
    live, slack = m.peak()
    assert live == {"a": 100, "d": 40}
    assert slack == 280 - 140


def test_events_of_buffers_outside_the_allocation_are_skipped() -> None:
    m = _four()
    m.add("elsewhere")  # an instruction with no buffer in the slab
    m.trace((ALLOC, "elsewhere"), (ALLOC, "d"), (FREE, "elsewhere"), (FREE, "a"), (ALLOC, "c"))
    assert m.peak()[0] == {"c": 80, "d": 40}


def test_a_trace_of_only_allocs_keeps_every_buffer_at_the_peak() -> None:
    """The live set is found once, at the last new maximum (the old replay sorted it
    at every maximum). How the time grows is measured by
    benchmarks/bench_hlo_scaling.py, not timed here."""
    m = Module()
    names = [f"x{k}" for k in range(20_000)]
    for name in names:
        m.add(name, size=4)
    m.trace(*[(ALLOC, name) for name in names])
    covered, _ = slab_peak(m.program(), SLAB)
    assert len(covered) == len(names)
    assert sum(size for _, size in covered) == 4 * len(names)


# -- the schedule ------------------------------------------------------------------


def _chain() -> Module:
    """p -> a -> b -> c: each value is last read by the next."""
    m = Module()
    m.add("p", opcode="parameter")
    m.add("a", ("p",), size=100)
    m.add("b", ("a",), size=10)
    m.add("c", ("b",), size=200)
    return m


def test_without_a_trace_buffers_live_from_definition_to_last_use() -> None:
    m = _chain()
    # a lives at a and b, b at b and c, c at c: the most is b + c = 210.
    assert m.peak()[0] == {"b": 10, "c": 200}


def test_the_schedule_orders_the_instructions() -> None:
    m = Module()
    m.add("p", opcode="parameter")
    m.add("x", ("p",), size=100)
    m.add("y", ("p",), size=100)
    m.add("x2", ("x",), size=10)
    m.add("y2", ("y",), size=10)
    # In instruction order x and y are live together; the schedule runs one chain
    # after the other (the first instant at 110 is the peak).
    assert m.peak()[0] == {"x": 100, "y": 100, "x2": 10}
    m.schedule("p", "x", "x2", "y", "y2")
    assert m.peak()[0] == {"x": 100, "x2": 10}


def test_an_in_place_update_frees_its_operand_a_step_early() -> None:
    m = Module()
    m.add("p", opcode="parameter")
    m.add("a", ("p",), size=100)
    m.add("b", ("a",), size=10)
    # c overwrites b's bytes: b ends where c starts, so they are not live together.
    m.add("c", ("b",), size=200, offset=100)
    live, _ = m.peak()
    assert live == {"c": 200}


def test_aliases_extend_a_buffers_life_to_their_readers() -> None:
    m = Module()
    m.add("p", opcode="parameter")
    m.add("a", ("p",), size=100)
    m.add("view", ("a",), opcode="bitcast")
    m.add("b", ("p",), size=60)
    m.add("reader", ("view", "b"), size=10)
    # a is read through its bitcast by the last instruction: live with b.
    assert m.peak()[0] == {"a": 100, "b": 60, "reader": 10}


def test_a_bitcast_reading_itself_ends() -> None:
    m = _chain()
    m.add("loop", ("a", "a"), opcode="bitcast")
    loop = m.entry.instructions[-1]
    loop.operand_ids.extend([loop.id, loop.id])
    for k in range(200):  # each reads the one before twice and itself twice
        m.add(f"loop{k}", ("loop" if k == 0 else f"loop{k - 1}",) * 2, opcode="bitcast")
        inst = m.entry.instructions[-1]
        inst.operand_ids.extend([inst.id, inst.id])
    m.add("end", ("loop199",), size=4)
    # a is read (through the bitcasts) by the last instruction: live with b and c.
    assert m.peak()[0] == {"a": 100, "b": 10, "c": 200}
