"""Naming the allocations that hold a variable's bytes (analysis/variable_match.py).

Real captures of one model (Dense ``big`` 4096 on 1024 inputs: a 16 MiB kernel,
Adam's two 16 MiB slots): ``vars_inside`` (built and trained inside
``traceparse.profile()``) and ``vars_run`` (the same script under ``traceparse
run``): every variable is created during the capture. ``keras_inventory`` and
``keras_memory_callback``: every variable was made before it. Hand-built
frames cover the replacement rules.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, MANIFEST
from helpers.variables import assert_big, roles_at_peak

from traceparse import load
from traceparse.analysis.naming.variables import (
    ASSIGNED,
    CREATED,
    NAMED_COLUMNS,
    covered_at,
    match_variables,
    named_at,
)
from traceparse.tables.variables import CPU_POOL_BYTES, traced

MiB = 1 << 20


@pytest.mark.parametrize("name", ["vars_inside", "vars_run"])
def test_variables_created_during_the_capture_are_named(name: str) -> None:
    prof = load(FIXTURES / name)
    variables = prof.variables
    # The inventory was taken at the stop too: every variable is alive then, none at the start.
    assert variables["at_stop"].all() and not variables["at_start"].any()
    assert variables["path"].isin(["big/kernel", "adam/big_kernel_momentum"]).sum() == 2
    match = match_variables(prof.allocations, variables, prof.frees_without_allocation)
    named = match.named
    assert list(named.columns) == list(NAMED_COLUMNS)
    assert named.index.isin(prof.allocations.index).all()
    # The kernel is the eager initializer's last buffer, alive at the end.
    (kernel,) = named.index[named["variable"] == "big/kernel"]
    assert prof.allocations.loc[kernel, "free_ps"] is pd.NA
    assert named.loc[kernel, "named_by"] == CREATED and named.loc[kernel, "role"] == "weight"
    # The Adam slots end in buffers that assign ops made; the momentum began as its
    # initializer's zeros, replaced (not freed) when the first step assigned it.
    assert set(named["named_by"]) == {CREATED, ASSIGNED}
    slots = named[named["role"] == "optimizer"]
    assert set(slots["variable"]) == {"adam/big_kernel_momentum", "adam/big_kernel_velocity"}
    assert (slots["layer"] == "big").all() and (slots["belongs_to"] == "big/kernel").all()
    current = named[named["holds_until_ps"].isna()]
    assert sorted(current["variable"]) == sorted(
        ["big/kernel", "adam/big_kernel_momentum", "adam/big_kernel_velocity"]
    )
    assert prof.allocations.loc[current.index, "free_ps"].isna().all()
    replaced = named[named["holds_until_ps"].notna()]
    assert (replaced["holds_until_ps"] > replaced["holds_from_ps"]).all()
    # Every variable the capture holds is covered from its first buffer on.
    assert set(match.covered["variable"]) == set(current["variable"])
    assert_big(roles_at_peak(prof))


@pytest.mark.parametrize("name", ["vars_inside", "vars_run"])
def test_one_buffer_per_variable_at_any_time(name: str) -> None:
    prof = load(FIXTURES / name)
    named = match_variables(prof.allocations, prof.variables, prof.frees_without_allocation).named
    times = prof.allocations.loc[named.index, "alloc_ps"].astype("int64")
    for time_ps in times:
        assert not named_at(named, int(time_ps))["variable"].duplicated().any()


@pytest.mark.parametrize("name", ["keras_inventory", "keras_memory_callback"])
def test_variables_from_before_the_capture_stay_there(name: str) -> None:
    prof = load(FIXTURES / name)
    frees = prof.frees_without_allocation
    match = match_variables(prof.allocations, prof.variables, frees)
    # An assign may still copy a variable (keras_inventory's last step does, for a
    # bottleneck variable): then a buffer from before the capture is freed after it.
    named = match.named
    assert (named["named_by"] == ASSIGNED).all()
    assert len(named) <= len(frees)
    for row, start in named["holds_from_ps"].items():
        size = prof.allocations.loc[row, "requested_bytes"]
        assert ((frees["free_ps"] >= start) & (frees["allocated_bytes"] >= size)).any()
    roles = roles_at_peak(prof)
    kernel = MANIFEST["fixtures"][name]["variables"]["weights"]["hidden/kernel"]
    assert roles[("hidden", "weight")] == kernel
    assert roles[("hidden", "optimizer_state")] == 2 * kernel


@pytest.mark.parametrize("name", ["vars_inside", "keras_inventory"])
def test_variables_say_whether_the_allocator_traced_them(name: str) -> None:
    variables = load(FIXTURES / name).variables
    small = variables["estimated_bytes"] < CPU_POOL_BYTES
    assert small.any() and (~small).any()
    assert (variables["traced"] == ~small).all()


def test_traced_rule() -> None:
    allocator = pd.Series(["mklcpu", "cpu", "GPU_0_bfc", None, "mklcpu"], dtype="category")
    size = pd.Series([CPU_POOL_BYTES - 4, CPU_POOL_BYTES, 40, 1 << 30, None], dtype="Int64")
    assert traced(allocator, size).tolist() == [False, True, True, False, False]


# -- hand-built frames -------------------------------------------------------------------

SHAPE, DTYPE, SIZE = "[1024,1024]", "float32", 1024 * 1024 * 4


def _allocations(rows: list[tuple[str, str | None, int, int | None]]) -> pd.DataFrame:
    """(op, op_type, alloc_ps, free_ps) per allocation of the variables' shape."""
    return pd.DataFrame(
        {
            "host": "h",
            "allocator": "mklcpu",
            "op": [r[0] for r in rows],
            "op_type": [r[1] for r in rows],
            "dtype": DTYPE,
            "shape": SHAPE,
            "requested_bytes": pd.array([SIZE] * len(rows), dtype="Int64"),
            "alloc_ps": pd.array([r[2] for r in rows], dtype="Int64"),
            "free_ps": pd.array([r[3] for r in rows], dtype="Int64"),
        },
        index=pd.RangeIndex(10, 10 + len(rows)),
    )


def _variables(rows: list[tuple[str, str, bool]], size: int = SIZE) -> pd.DataFrame:
    """(path, role, at_start) per variable of that shape, all alive at the stop."""
    return pd.DataFrame(
        {
            "host": "h",
            "path": [r[0] for r in rows],
            "role": [r[1] for r in rows],
            "layer": "dense",
            "belongs_to": None,
            "model": "m",
            "dtype": DTYPE,
            "shape": SHAPE,
            "estimated_bytes": pd.Series([size] * len(rows), dtype="Int64"),
            "allocator": "mklcpu",
            "traced": size >= CPU_POOL_BYTES,
            "at_start": [r[2] for r in rows],
            "at_stop": True,
        }
    )


def _frees(times: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {"host": "h", "allocator": "mklcpu", "allocated_bytes": SIZE, "free_ps": times}
    )


def test_a_replaced_variable_keeps_its_name_and_is_counted_once() -> None:
    variables = _variables([("dense/kernel", "weight", True)])
    allocations = _allocations([("AssignVariableOp", "AssignVariableOp", 100, None)])
    match = match_variables(allocations, variables, _frees([105]))
    assert match.named.loc[10, "variable"] == "dense/kernel"
    assert match.named.loc[10, "named_by"] == ASSIGNED
    # Before the assign its bytes were allocated before the capture, after it not.
    assert covered_at(variables, match.covered, 99).tolist() == [False]
    assert covered_at(variables, match.covered, 100).tolist() == [True]
    # Without a free of the old buffer after the assign, the copy is not the variable.
    assert match_variables(allocations, variables, _frees([50])).named.empty
    assert match_variables(allocations, variables, _frees([])).named.empty


def test_an_assign_replaces_a_buffer_that_is_freed_not_one_kept() -> None:
    variables = _variables(
        [("dense/kernel", "weight", False), ("adam/dense_kernel_momentum", "optimizer", False)]
    )
    allocations = _allocations(
        [
            ("AddV2", "AddV2", 10, None),  # the kernel: eager initializer, never freed
            ("adam/dense_kernel_momentum/Initializer/zeros", None, 20, 90),
            ("adam/AssignAddVariableOp", "AssignAddVariableOp", 50, None),
            ("adam/Mul", "Mul", 60, 70),  # a temporary of the same shape
        ]
    )
    named = match_variables(allocations, variables).named
    assert named["variable"].to_dict() == {
        10: "dense/kernel",
        11: "adam/dense_kernel_momentum",
        12: "adam/dense_kernel_momentum",
    }
    assert named.loc[11, "holds_until_ps"] == 50  # the zeros are not its after the assign
    assert named_at(named, 60)["variable"].tolist() == [
        "dense/kernel",
        "adam/dense_kernel_momentum",
    ]
    assert named_at(named, 60).index.tolist() == [10, 12]
    assert named_at(named, 5).empty


def test_a_weight_made_eagerly_then_copied_by_an_assign() -> None:
    variables = _variables([("dense/kernel", "weight", False)])
    allocations = _allocations(
        [
            ("StatelessRandomUniformV2", "StatelessRandomUniformV2", 1, 3),  # freed first
            ("AddV2", "AddV2", 2, 80),  # the kernel, until the assign copies it
            ("adam/Mul", "Mul", 40, 70),  # a scoped temporary alive across the assign
            ("adam/AssignSubVariableOp", "AssignSubVariableOp", 50, None),
        ]
    )
    named = match_variables(allocations, variables).named
    assert named["variable"].to_dict() == {11: "dense/kernel", 13: "dense/kernel"}
    assert named["named_by"].tolist() == [CREATED, ASSIGNED]
    assert named.loc[11, "holds_until_ps"] == 50
    # An optimizer slot is never made by an eager op that is freed later.
    slot = _variables([("adam/dense_kernel_momentum", "optimizer", False)])
    assert match_variables(allocations, slot).named.index.tolist() == [13]


def test_untraced_variables_match_nothing() -> None:
    variables = _variables([("dense/kernel", "weight", False)], size=SIZE)
    variables["traced"] = False
    allocations = _allocations([("AddV2", "AddV2", 10, None)])
    match = match_variables(allocations, variables)
    assert match.named.empty and match.covered.empty
    assert covered_at(variables, match.covered, 10).tolist() == [False]


def test_nothing_to_match() -> None:
    variables = _variables([("dense/kernel", "weight", False)])
    for allocations in (_allocations([]), _allocations([("Mul", "Mul", 1, 2)])):
        match = match_variables(allocations, variables)
        assert match.named.empty and list(match.named.columns) == list(NAMED_COLUMNS)
        assert match.named["holds_from_ps"].dtype == "Int64"
    assert np.array_equal(covered_at(variables, match.covered, 0), [False])
