"""Is memory growing step over step, and which ops hold the bytes that stay?

The first step is warm-up (variables, optimizer slots, caches are built
there), so it is never judged. An allocator is *growing* when its bytes in use
at the end of the judged steps rose overall and rose in most of those steps;
judging needs at least ``MIN_STEPS`` steps. The suspects are the allocations
made after the first step that are still live when the capture stops, grouped
by op, less those that are a variable's current buffer (an assign op that
replaced a weight or an optimizer slot: the old buffer was freed, nothing
grew; ``analysis/variable_match.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE, end_events, held_bytes, owner_groups
from traceparse.analysis.steps import STEP_ID, STEP_ORDER
from traceparse.tables.contracts import conform, declare

MIN_STEPS = 3

GROWING, STABLE, TOO_FEW, NO_EVENTS = "growing", "stable", "too few steps", "no memory events"

GROWTH = declare(
    "leaks.growth",
    [
        "host",
        "allocator",
        "step",
        "start_ps",
        "end_ps",
        "in_use_start_bytes",
        "in_use_end_bytes",
        "growth_bytes",
        "retained_bytes",
        "judged",
    ],
    nullable=["allocator"],
)
BY_OP = declare(
    "leaks.by_op",
    [
        "host",
        "allocator",
        "op",
        "op_type",
        "count",
        "bytes",
        "requested_bytes",
        "steps",
        "dtype",
        "shape",
        "first_alloc_ps",
        "last_alloc_ps",
    ],
    nullable=["allocator", "op", "op_type", "dtype", "shape"],
)
# One row per (host, allocator): the verdict and the figures it rests on. The
# sentences are made from these in output/sentences.py.
VERDICTS = declare(
    "leaks.allocators",
    [
        "host",
        "allocator",
        "verdict",
        "source",  # where the steps come from: markers, or raw step ids
        "steps",
        "judged_steps",  # all but the first (warm-up)
        "grew_steps",  # judged steps whose in-use bytes rose
        "first_step",  # the judged steps, NA when none were judged
        "last_step",
        "growth_bytes_per_step",
        "total_growth_bytes",
        "suspect_count",
        "suspect_bytes",
        "top_suspect_op",  # NA: the top suspect names no op
        "top_suspect_bytes",
    ],
    nullable=[
        "allocator",
        "first_step",
        "last_step",
        "growth_bytes_per_step",
        "total_growth_bytes",
        "top_suspect_op",
        "top_suspect_bytes",
    ],
)
GROWTH_COLUMNS = GROWTH.dtypes
BY_OP_COLUMNS = BY_OP.dtypes
VERDICT_COLUMNS = VERDICTS.dtypes


@dataclass
class LeakReport:
    """The leak verdict of a capture, its per-step growth and the ops that hold what stays.

    ``verdict`` is "growing", "stable", "too few steps" or "no memory events"
    (``output.sentences.leak_message`` says it in words); ``by_op`` lists the allocations made
    after the first step and still live at the end, per op, largest first;
    ``growth`` has one row per (host, allocator, step); ``allocators`` one
    verdict per (host, allocator).
    """

    verdict: str
    by_op: pd.DataFrame = field(default_factory=lambda: BY_OP.empty())
    growth: pd.DataFrame = field(default_factory=lambda: GROWTH.empty())
    allocators: pd.DataFrame = field(default_factory=lambda: VERDICTS.empty())

    def conformed(self, categories: Mapping[str, pd.CategoricalDtype]) -> LeakReport:
        """The report with each table as declared, with a Profile's ``categories``."""
        return replace(
            self,
            by_op=conform(self.by_op, BY_OP, categories),
            growth=conform(self.growth, GROWTH, categories),
            allocators=conform(self.allocators, VERDICTS, categories),
        )


def leak_report(
    steps: pd.DataFrame,
    allocations: pd.DataFrame,
    variables: pd.Index | None = None,
    ends: np.ndarray | None = None,
) -> LeakReport:
    """Judge growth from ``Profile.steps`` and find the suspects in ``Profile.allocations``;
    ``variables``: the rows of ``allocations`` that are variables' current buffers;
    ``ends``: ``end_events(allocations)`` where the caller has it already."""
    if allocations.empty and steps.empty:
        return LeakReport(NO_EVENTS)
    growth = growth_table(steps)
    if variables is not None and len(variables):
        allocations = allocations[~allocations.index.isin(variables)]
        ends = None  # the ends of fewer allocations: the variables' reuses do not count
    by_op = suspects_by_op(allocations, growth, ends)
    verdicts = _verdicts(growth, by_op, steps)
    counts = verdicts["verdict"].value_counts()
    if counts.get(GROWING, 0):
        verdict = GROWING
    elif counts.get(STABLE, 0):
        verdict = STABLE
    else:
        verdict = TOO_FEW
    return LeakReport(verdict, by_op=by_op, growth=growth, allocators=verdicts)


def growth_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Per (host, allocator, step): bytes in use at its end and the change since the last step."""
    if steps.empty:
        return GROWTH.empty()
    table = steps.sort_values(STEP_ORDER, kind="stable")
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


def suspects_by_op(
    allocations: pd.DataFrame, growth: pd.DataFrame, ends: np.ndarray | None = None
) -> pd.DataFrame:
    """Allocations made after their allocator's first step and live at the end, per op."""
    if allocations.empty or growth.empty:
        return BY_OP.empty()
    first = growth[~growth["judged"]]
    first_ends = {
        (_key(host), _key(allocator)): end
        for host, allocator, end in zip(
            first["host"], first["allocator"], first["end_ps"], strict=True
        )
    }
    group, owners = owner_groups(allocations)
    ends_of = np.array(
        [
            first_ends.get((_key(host), _key(allocator)), np.inf)
            for host, allocator in zip(owners["host"], owners["allocator"], strict=True)
        ]
    )
    # One owner: its end as one number, not repeated for every row.
    first_end = ends_of[0] if len(ends_of) == 1 else ends_of[group]
    after = allocations["alloc_ps"].to_numpy() > first_end
    live = (end_events(allocations) if ends is None else ends) == STILL_LIVE
    rows = allocations[after & live]
    if rows.empty:
        return BY_OP.empty()
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


def _key(name: object) -> str | None:
    """A host or allocator name as a key, NA as None (NA matches NA)."""
    return None if pd.isna(name) else str(name)


def _verdicts(growth: pd.DataFrame, by_op: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One verdict row per (host, allocator); the few allocators are looped over."""
    rows: list[dict[str, object]] = []
    sources = steps.groupby(["host", "allocator"], observed=True)["source"].first()
    for (host, allocator), group in growth.groupby(["host", "allocator"], observed=True):
        suspects = by_op[
            ((by_op["host"] == host) & (by_op["allocator"] == allocator)).to_numpy(
                dtype=bool, na_value=False
            )
        ]
        source = str(sources.get((host, allocator), ""))
        rows.append(_judge(str(host), str(allocator), group, suspects, source))
    if not rows:
        return VERDICTS.empty()
    return pd.DataFrame(rows)[list(VERDICT_COLUMNS)].astype(VERDICT_COLUMNS)


def _judge(
    host: str, allocator: str, growth: pd.DataFrame, suspects: pd.DataFrame, source: str
) -> dict[str, object]:
    n = len(growth)
    judged = growth[growth["judged"]]
    grew = int((judged["growth_bytes"] > 0).sum())
    row: dict[str, object] = {
        "host": host,
        "allocator": allocator,
        "source": source,
        "steps": n,
        "judged_steps": len(judged),
        "grew_steps": grew,
        "first_step": judged["step"].iloc[0] if len(judged) else pd.NA,
        "last_step": judged["step"].iloc[-1] if len(judged) else pd.NA,
        "growth_bytes_per_step": pd.NA,
        "total_growth_bytes": pd.NA,
        "suspect_count": int(suspects["count"].sum()),
        "suspect_bytes": int(suspects["bytes"].sum()),
        "top_suspect_op": suspects["op"].iloc[0] if len(suspects) else pd.NA,
        "top_suspect_bytes": int(suspects["bytes"].iloc[0]) if len(suspects) else pd.NA,
    }
    # Raw step ids number single executions (an eager op, a function call):
    # "growth per step" over them would be noise, so there is no verdict.
    if source == STEP_ID or n < MIN_STEPS:
        row["verdict"] = TOO_FEW
        return row
    ends = growth["in_use_end_bytes"].to_numpy(dtype=np.int64)
    total = int(ends[-1] - ends[0])
    row["growth_bytes_per_step"] = total / len(judged)
    row["total_growth_bytes"] = total
    # Growing: up overall and in most judged steps (a one-time rise is not a leak).
    row["verdict"] = GROWING if total > 0 and 2 * grew > len(judged) else STABLE
    return row
