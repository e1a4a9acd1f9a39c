"""Is memory growing step over step, and which ops hold the bytes that stay?

The first step is warm-up (variables, optimizer slots, caches are built
there), so it is never judged. An allocator is *growing* when its bytes in use
at the end of the judged steps rose overall and rose in most of those steps;
judging needs at least ``MIN_STEPS`` steps. The suspects are the allocations
made after the first step that are still live when the capture stops, grouped
by op.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE, end_events, held_bytes
from traceparse.analysis.steps import STEP_ID
from traceparse.output.units import format_bytes

MIN_STEPS = 3

GROWING, STABLE, TOO_FEW, NO_EVENTS = "growing", "stable", "too few steps", "no memory events"

GROWTH_COLUMNS: dict[str, str] = {
    "host": "category",
    "allocator": "category",
    "step": "int64",
    "start_ps": "int64",
    "end_ps": "int64",
    "in_use_start_bytes": "int64",
    "in_use_end_bytes": "int64",
    "growth_bytes": "int64",
    "retained_bytes": "int64",
    "judged": "bool",
}

BY_OP_COLUMNS: dict[str, str] = {
    "host": "category",
    "allocator": "category",
    "op": "category",
    "op_type": "category",
    "count": "int64",
    "bytes": "int64",
    "requested_bytes": "int64",
    "steps": "int64",
    "dtype": "category",
    "shape": "category",
    "first_alloc_ps": "int64",
    "last_alloc_ps": "int64",
}

VERDICT_COLUMNS: dict[str, str] = {
    "host": "category",
    "allocator": "category",
    "verdict": "category",
    "steps": "int64",
    "growth_bytes_per_step": "Float64",
    "total_growth_bytes": "Int64",
    "suspect_bytes": "int64",
    "message": "object",
}


def _frame(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in columns.items()})


@dataclass
class LeakReport:
    """The leak verdict of a capture, its per-step growth and the ops that hold what stays.

    ``verdict`` is "growing", "stable", "too few steps" or "no memory events";
    ``message`` says it in a sentence; ``by_op`` lists the allocations made
    after the first step and still live at the end, per op, largest first;
    ``growth`` has one row per (host, allocator, step); ``allocators`` one
    verdict per (host, allocator).
    """

    verdict: str
    message: str
    by_op: pd.DataFrame = field(default_factory=lambda: _frame(BY_OP_COLUMNS))
    growth: pd.DataFrame = field(default_factory=lambda: _frame(GROWTH_COLUMNS))
    allocators: pd.DataFrame = field(default_factory=lambda: _frame(VERDICT_COLUMNS))


def leak_report(steps: pd.DataFrame, allocations: pd.DataFrame) -> LeakReport:
    """Judge growth from ``Profile.steps`` and find the suspects in ``Profile.allocations``."""
    if allocations.empty and steps.empty:
        return LeakReport(
            NO_EVENTS, "The capture has no memory events, so there is no growth to judge."
        )
    growth = growth_table(steps)
    by_op = suspects_by_op(allocations, growth)
    verdicts = _verdicts(growth, by_op, steps)
    counts = verdicts["verdict"].astype(object).value_counts()
    if counts.get(GROWING, 0):
        verdict = GROWING
    elif counts.get(STABLE, 0):
        verdict = STABLE
    else:
        verdict = TOO_FEW
    if verdicts.empty:
        message = (
            "The capture has no steps (no step markers and no step ids), so growth cannot "
            f"be judged; mark at least {MIN_STEPS} steps with cap.step(n)."
        )
    else:
        message = " ".join(verdicts["message"])
    return LeakReport(verdict, message, by_op=by_op, growth=growth, allocators=verdicts)


def growth_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Per (host, allocator, step): bytes in use at its end and the change since the last step."""
    if steps.empty:
        return _frame(GROWTH_COLUMNS)
    table = steps.sort_values(["host", "allocator", "start_ps", "step"], kind="stable")
    table = table.reset_index(drop=True)
    # dropna=False: events that name no allocator are one allocator of their own.
    owner = table.groupby(["host", "allocator"], observed=True, sort=False, dropna=False)
    previous_end = owner["in_use_end_bytes"].shift(1)
    first = previous_end.isna().to_numpy()
    growth = table["in_use_end_bytes"] - previous_end.fillna(table["in_use_start_bytes"])
    out = table[[c for c in GROWTH_COLUMNS if c in table.columns]].copy()
    out["growth_bytes"] = growth.to_numpy(dtype=np.int64)
    out["judged"] = ~first
    return out[list(GROWTH_COLUMNS)].astype(GROWTH_COLUMNS)


def suspects_by_op(allocations: pd.DataFrame, growth: pd.DataFrame) -> pd.DataFrame:
    """Allocations made after their allocator's first step and live at the end, per op."""
    if allocations.empty or growth.empty:
        return _frame(BY_OP_COLUMNS)
    first = growth[~growth["judged"]][["host", "allocator", "end_ps"]].astype(
        {"host": object, "allocator": object}
    )
    keys = allocations[["host", "allocator"]].astype(object)
    first_end = keys.merge(first, on=["host", "allocator"], how="left")["end_ps"]
    after = (allocations["alloc_ps"].to_numpy() > first_end.fillna(np.inf).to_numpy()).astype(bool)
    live = end_events(allocations) == STILL_LIVE
    rows = allocations[after & live]
    if rows.empty:
        return _frame(BY_OP_COLUMNS)
    work = pd.DataFrame(
        {
            "host": rows["host"].astype(object),
            "allocator": rows["allocator"].astype(object),
            "op": rows["op"].astype(object),
            "op_type": rows["op_type"].astype(object),
            "bytes": held_bytes(rows),
            "requested_bytes": rows["requested_bytes"].fillna(0).astype("int64"),
            "step": rows["step"],
            "dtype": rows["dtype"].astype(object),
            "shape": rows["shape"].astype(object),
            "alloc_ps": rows["alloc_ps"],
        }
    )
    table = work.groupby(["host", "allocator", "op"], dropna=False, sort=False).agg(
        op_type=("op_type", "first"),
        count=("bytes", "size"),
        bytes=("bytes", "sum"),
        requested_bytes=("requested_bytes", "sum"),
        steps=("step", "nunique"),
        dtype=("dtype", "first"),
        shape=("shape", "first"),
        first_alloc_ps=("alloc_ps", "min"),
        last_alloc_ps=("alloc_ps", "max"),
    )
    table = table.reset_index().sort_values(
        ["host", "allocator", "bytes"], ascending=[True, True, False], kind="stable"
    )
    return table[list(BY_OP_COLUMNS)].astype(BY_OP_COLUMNS).reset_index(drop=True)


def _verdicts(growth: pd.DataFrame, by_op: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One verdict row per (host, allocator); the few allocators are looped over."""
    rows: list[dict[str, object]] = []
    sources = steps.groupby(["host", "allocator"], observed=True)["source"].first()
    for (host, allocator), group in growth.groupby(["host", "allocator"], observed=True):
        suspects = by_op[
            (by_op["host"].astype(object) == host)
            & (by_op["allocator"].astype(object) == allocator)
        ]
        source = str(sources.get((host, allocator), ""))
        rows.append(_judge(str(host), str(allocator), group, suspects, source))
    if not rows:
        return _frame(VERDICT_COLUMNS)
    return pd.DataFrame(rows)[list(VERDICT_COLUMNS)].astype(VERDICT_COLUMNS)


def _judge(
    host: str, allocator: str, growth: pd.DataFrame, suspects: pd.DataFrame, source: str
) -> dict[str, object]:
    n = len(growth)
    suspect_bytes = int(suspects["bytes"].sum())
    name = f"{allocator} on {host}"
    row: dict[str, object] = {
        "host": host,
        "allocator": allocator,
        "steps": n,
        "suspect_bytes": suspect_bytes,
        "growth_bytes_per_step": pd.NA,
        "total_growth_bytes": pd.NA,
    }
    if source == STEP_ID:
        # Raw step ids number single executions (an eager op, a function call):
        # "growth per step" over them would be noise, so there is no verdict.
        row["verdict"] = TOO_FEW
        row["message"] = (
            f"{name}: the capture has no step markers, so growth cannot be judged "
            "(TensorFlow's step ids number single executions, not training steps); "
            f"mark at least {MIN_STEPS} steps with cap.step(n) or "
            "tf.profiler.experimental.Trace('train', step_num=n, _r=1)."
        )
        return row
    if n < MIN_STEPS:
        row["verdict"] = TOO_FEW
        row["message"] = (
            f"{name}: {n} step{'s' if n != 1 else ''} is too few to judge growth; "
            f"it takes at least {MIN_STEPS} (the first is warm-up)."
        )
        return row
    judged = growth[growth["judged"]]
    ends = growth["in_use_end_bytes"].to_numpy(dtype=np.int64)
    total = int(ends[-1] - ends[0])
    per_step = total / len(judged)
    grew = int((judged["growth_bytes"] > 0).sum())
    growing = total > 0 and 2 * grew > len(judged)
    row["growth_bytes_per_step"] = per_step
    row["total_growth_bytes"] = total
    steps = f"steps {judged['step'].iloc[0]}–{judged['step'].iloc[-1]}"
    if growing:
        row["verdict"] = GROWING
        message = (
            f"{name} is growing: {format_bytes(total)} more in use after {steps} "
            f"({format_bytes(per_step)} per step, up in {grew} of {len(judged)} steps)"
        )
        if suspect_bytes:
            top = suspects.iloc[0]
            op = "an unnamed op" if pd.isna(top["op"]) else str(top["op"])
            message += (
                f"; {int(suspects['count'].sum())} allocations made after the first step are "
                f"still live at the end ({format_bytes(suspect_bytes)}), the most from {op} "
                f"({format_bytes(int(top['bytes']))})"
            )
        row["message"] = message + "."
    else:
        row["verdict"] = STABLE
        row["message"] = (
            f"{name} is stable: {format_bytes(total)} change in use over {steps}"
            f" (up in {grew} of {len(judged)} steps)."
        )
    return row
