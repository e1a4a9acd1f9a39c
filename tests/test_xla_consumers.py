"""Buffers whose instruction carries no TF op take their first consumer's
(tables/xla.py, issue 24 item 3): the max pooling of a jit-compiled Keras CNN,
and hand-built modules for the order, tuple elements and cycles."""

from __future__ import annotations

import pandas as pd
from conftest import FIXTURES
from helpers.hlo import SLAB, Module

import traceparse
from traceparse.tables.xla import NAMED_BY, buffer_info, buffer_naming

POOL_GRAD = "gradient_tape/cnn_1/pool_1/MaxPool2d/MaxPoolGrad"


def test_max_pooling_index_buffers_take_the_pooling_gradient() -> None:
    """XLA lowers MaxPoolGrad to iotas (the window indices) and a variadic
    reduce-window; none carries metadata, the fusion that finally reads them
    for MaxPoolGrad does not either, but its reader has the op."""
    prof = traceparse.load(FIXTURES / "xla_keras")
    buffers = prof.xla_buffers
    assert set(buffers["named_by"].dropna().unique()) <= set(NAMED_BY)
    iotas = buffers[buffers["instruction"].astype(str).str.startswith("wrapped_iota")]
    assert len(iotas) == 4
    assert (iotas["dtype"].astype(str) == "int32").all()
    assert (iotas["tf_op"] == POOL_GRAD).all()
    assert (iotas["named_by"] == "consumer").all()
    window = buffers[buffers["instruction"] == "wrapped_reduce-window.1"]
    indices = window[window["dtype"].astype(str) == "int32"]
    assert len(indices) == 4 and (indices["tf_op"] == POOL_GRAD).all()
    # Buffers with metadata keep it.
    own = buffers[buffers["named_by"] == "hlo metadata"]
    assert len(own) > 50
    # The layer follows the op: pool holds them in the layers table.
    layers = prof.layers().set_index("layer")
    assert int(layers.loc["pool", "live_at_peak_bytes"]) >= int(iotas["size_bytes"].sum())


def test_buffer_naming_matches_the_table() -> None:
    prof = traceparse.load(FIXTURES / "xla_keras")
    buffers = prof.xla_buffers
    program = prof._xla.programs[0][1]
    for row in buffers.itertuples():
        assert buffer_naming(program, row.logical_buffer) == (
            None if pd.isna(row.named_by) else row.named_by
        )
        assert buffer_info(program, row.logical_buffer)[1] == (
            None if pd.isna(row.tf_op) else row.tf_op
        )


def _named(m: Module, name: str) -> tuple[object, str | None]:
    program = m.program()
    return buffer_info(program, m.ids[name])[1], buffer_naming(program, m.ids[name])


def test_the_first_consumer_in_schedule_order_names_it() -> None:
    m = Module()
    m.add("p", opcode="parameter")
    m.add("anon", ("p",), size=16)
    m.add("late", ("anon",), size=16, op="scope/late")
    m.add("early", ("anon",), size=16, op="scope/early")
    assert _named(m, "anon") == ("scope/late", "consumer")  # instruction order
    m.schedule("p", "anon", "early", "late")
    assert _named(m, "anon") == ("scope/early", "consumer")
    assert _named(m, "late") == ("scope/late", "hlo metadata")


def test_readers_without_an_op_pass_on_their_readers() -> None:
    m = Module()
    m.add("p", opcode="parameter")
    m.add("anon", ("p",), size=16)
    m.add("view", ("anon",), opcode="bitcast")
    m.add("helper", ("view",), size=16)
    m.add("user", ("helper",), size=16, op="scope/user")
    assert _named(m, "anon") == ("scope/user", "consumer")
    assert _named(m, "helper") == ("scope/user", "consumer")


def test_a_tuple_element_is_named_by_the_reader_of_that_element() -> None:
    m = Module()
    m.add("p", opcode="parameter")
    pair = m.add("pair", ("p",), opcode="fusion")
    m.add("first", ("pair",), opcode="get-tuple-element")
    m.add("second", ("pair",), opcode="get-tuple-element")
    m.add("reads_first", ("first",), size=16, op="scope/first")
    m.add("reads_second", ("second",), size=16, op="scope/second")
    insts = {i.name: i for i in m.entry.instructions}
    insts["second"].tuple_index = 1
    insts["pair"].shape.tuple_shapes.add(element_type=11, dimensions=[4])
    insts["pair"].shape.tuple_shapes.add(element_type=4, dimensions=[4])
    slab = m.hlo.buffer_assignment.buffer_allocations[SLAB]
    for k in (0, 1):
        buffer = m.hlo.buffer_assignment.logical_buffers.add(id=900 + k, size=16)
        buffer.defined_at.instruction_id = pair
        buffer.defined_at.shape_index.append(k)
        slab.assigned.add(logical_buffer_id=900 + k, offset=slab.size, size=16)
        slab.size += 16
    program = m.program()
    assert buffer_info(program, 900)[1] == "scope/first"
    assert buffer_info(program, 901)[1] == "scope/second"
    assert buffer_info(program, 901)[3] == "int32"


def test_parameters_and_unread_buffers_stay_unnamed() -> None:
    m = Module()
    m.add("p", opcode="parameter", size=16)
    m.add("unread", ("p",), size=16)
    m.add("user", ("p",), size=16, op="scope/user")
    assert _named(m, "p") == (None, None)
    assert _named(m, "unread") == (None, None)


def test_a_cycle_of_readers_ends() -> None:
    m = Module()
    m.add("p", opcode="parameter")
    m.add("a", ("p",), size=16)
    m.add("b", ("a",), size=16)
    insts = {i.name: i for i in m.entry.instructions}
    insts["a"].operand_ids.append(insts["b"].id)  # a reads b and b reads a
    assert _named(m, "a") == (None, None)
