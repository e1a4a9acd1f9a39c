"""Issue 36 item 9: ``diff`` matches ops across captures by what they are (scope,
type, shape, order), not by TensorFlow's ``_N`` numbering."""

from __future__ import annotations

from conftest import FIXTURES

import traceparse
from traceparse.gate.baseline import baseline_of
from traceparse.gate.diff import diff_figures
from traceparse.gate.figures import OpFigures
from traceparse.gate.matching import match_ops


def _op(shape: str, requested: int = 4096) -> OpFigures:
    return OpFigures(requested_bytes=requested, count=1, shapes=(shape,))


def test_a_renumbered_op_is_the_same_op() -> None:
    before = {
        "adam/AssignAddVariableOp_1": _op("float32[512,2048]"),
        "adam/AssignAddVariableOp_5": _op("float32[2048,512]"),
        "model/dense/Relu": _op("float32[128,2048]"),
        "adam/Sub_2": _op("float32[512,2048]"),
    }
    after = {
        "adam/AssignAddVariableOp": _op("float32[512,2048]"),
        "adam/AssignAddVariableOp_5": _op("float32[2048,512]"),
        "model/dense/Relu": _op("float32[256,2048]"),  # a batch size: the same op
        "adam/Sub_10": _op("float32[2048,512]"),  # another weight's: another op
    }
    pairs = set(match_ops(before, after))
    assert pairs == {
        ("adam/AssignAddVariableOp_1", "adam/AssignAddVariableOp"),
        ("adam/AssignAddVariableOp_5", "adam/AssignAddVariableOp_5"),
        ("model/dense/Relu", "model/dense/Relu"),
        ("adam/Sub_2", None),
        (None, "adam/Sub_10"),
    }


def test_ops_of_one_shape_pair_in_the_order_of_their_numbers() -> None:
    shape = "float32[64,64]"
    before = {"s/Mul_3": _op(shape, 1), "s/Mul_7": _op(shape, 2)}
    after = {"s/Mul_4": _op(shape, 3), "s/Mul_12": _op(shape, 4), "s/Mul": _op("int32[2]")}
    assert sorted(match_ops(before, after), key=str) == sorted(
        [("s/Mul_3", "s/Mul_4"), ("s/Mul_7", "s/Mul_12"), (None, "s/Mul")], key=str
    )


def test_batch_128_against_batch_256_finds_no_renamed_op_new() -> None:
    sides = [
        baseline_of(traceparse.load(FIXTURES / f)).allocators for f in ("batch_128", "batch_256")
    ]
    (diff,) = diff_figures(*sides)
    rows = {row.key: row for row in diff.rows}
    assert "adam/AssignAddVariableOp_1" not in rows
    moved = rows["adam/AssignAddVariableOp"]
    assert moved.status != "new" and moved.key_before == "adam/AssignAddVariableOp_1"
    assert moved.to_dict()["key_before"] == "adam/AssignAddVariableOp_1"
    # No op is new on one side while one of its scope, type and shape vanished.
    for row in diff.rows:
        if row.status == "new":
            twins = [
                r
                for r in diff.rows
                if r.status == "vanished"
                and r.key.rstrip("0123456789_") == row.key.rstrip("0123456789_")
                and r.shapes_before[:1] == row.shapes_after[:1]
            ]
            assert not twins, (row.key, [r.key for r in twins])
    # The rows still add up to the peak's change.
    assert sum(r.peak_delta for r in diff.rows) + diff.outside_rows_delta == diff.peak_delta
