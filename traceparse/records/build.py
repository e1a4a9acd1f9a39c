"""Builds the record of each allocator (``records.allocator``) from the analyses'
tables: the input of every report, of batch analysis and of the gate."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.attribution import NOT_MEASURED, PARTS
from traceparse.analysis.leaks import LeakReport
from traceparse.analysis.liveness import owner_groups
from traceparse.analysis.naming import OPTIMIZER_STATE
from traceparse.records.allocator import (
    OPTIONAL_FIELDS,
    AllocatorRecord,
    LeakVerdict,
    live_at_peak_bytes,
    notes_of,
    owned,
    step_unit,
)

__all__ = [
    "OPTIONAL_FIELDS",
    "TOP_OP_COLUMNS",
    "TOP_SCOPE_COLUMNS",
    "TOP_TENSOR_COLUMNS",
    "TOP_VARIABLE_COLUMNS",
    "AllocatorRecord",
    "AllocatorSummary",
    "build_records",
    "build_summaries",
    "owned",
    "plain",
    "with_predictions",
]

# In the order reports show them (a column declared not shown by default,
# ``Column.shown``, is in the JSON only).
TOP_TENSOR_COLUMNS = [
    "op",
    "op_type",
    "dtype",
    "shape",
    "region",
    "allocated_bytes",
    "requested_bytes",
    "estimated_bytes",
    "estimate_status",
    "step",
    "alloc_ps",
]
TOP_OP_COLUMNS = ["op", "op_type", "live_at_peak_bytes", "allocated_bytes", "count"]
TOP_SCOPE_COLUMNS = ["scope", "live_at_peak_bytes", "allocated_bytes", "count"]
TOP_VARIABLE_COLUMNS = [
    "path",
    "role",
    "belongs_to",
    "model",
    "dtype",
    "shape",
    "estimated_bytes",
]
# The name the record had before it carried every figure (kept for users' code).
AllocatorSummary = AllocatorRecord


def plain(value: Any) -> Any:
    """A Python scalar for JSON: numpy numbers unwrapped, NA / NaN / inf as None."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer | int):
        return int(value)
    if isinstance(value, np.floating | float):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, str):
        return value
    if isinstance(value, pd.Timestamp | pd.Timedelta):
        return str(value)
    return str(value)


def build_summaries(
    peak: pd.DataFrame,
    attribution: pd.DataFrame,
    breakdown: pd.DataFrame,
    live: pd.DataFrame,
    ops: pd.DataFrame,
    scopes: pd.DataFrame,
    allocations: pd.DataFrame,
    leaks: LeakReport,
    variables: pd.DataFrame | None = None,
    parameters: pd.DataFrame | None = None,
    *,
    layers: pd.DataFrame | None = None,
    xla_at_peak: tuple[pd.DataFrame, pd.DataFrame] | None = None,
    steps: pd.DataFrame | None = None,
    repeats: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> list[AllocatorRecord]:
    """One record per peak row; ``live`` is ``live_at_peak(expand_xla=True)``
    (the largest tensors and HLO buffers), ``variables`` is ``Profile.variables``
    (None without an inventory), ``parameters`` ``Profile.xla_parameters`` (used
    when ``xla_parameter_bytes`` was measured). The split of the bytes from
    before the capture is the breakdown's, as in ``attribution`` and ``layers``.
    ``layers``, ``xla_at_peak`` and ``steps`` are the profile's tables, each
    record keeps its allocator's rows for the renderers. ``prediction`` is left
    None: ``Profile.summary(predict=True)`` fills it, only when asked (it replays
    the capture at several batch sizes). ``repeats`` is ``analysis.breakdown_at.peak_repeats``:
    per allocator whose peak is reached at several instants, what holds memory
    at every one (``analysis/peak_repeats.py``)."""
    group, owners = owner_groups(allocations)
    counts = {
        (str(host), str(allocator)): int(count)
        for host, allocator, count in zip(
            owners["host"], owners["allocator"], np.bincount(group), strict=True
        )
        if not (pd.isna(host) or pd.isna(allocator))
    }
    unmeasured = set(attribution.attrs.get(NOT_MEASURED, ()))
    verdicts = leaks.allocators.set_index(["host", "allocator"]) if len(leaks.allocators) else None
    out: list[AllocatorRecord] = []
    for index in range(len(peak)):
        row = peak.iloc[index]
        host, allocator = str(row["host"]), str(row["allocator"])
        parts = attribution.iloc[index]
        mine = owned(live, host, allocator)
        capacity = _int(row["capacity_bytes"])
        peak_bytes = int(row["in_use_bytes"])
        verdict, rate, leak = leaks.verdict, None, {}
        if verdicts is not None and (host, allocator) in verdicts.index:
            found = verdicts.loc[(host, allocator)]
            verdict = str(found["verdict"])
            rate = (
                None
                if pd.isna(found["growth_bytes_per_step"])
                else float(found["growth_bytes_per_step"])
            )
            leak = {"host": host, "allocator": allocator}
            leak.update({k: plain(v) for k, v in found.items()})
        attribution_parts = {part: int(parts[part]) for part in PARTS if part not in unmeasured}
        split, top_variables = (
            (None, None)
            if variables is None
            else _before_capture(variables, owned(breakdown, host, allocator), attribution_parts)
        )
        if split is None and parameters is not None and "xla_parameter_bytes" in attribution_parts:
            split = _read_as_parameters(parameters, host, allocator, attribution_parts)
        all_ops = _ranked(owned(ops, host, allocator))
        programs, buffers = xla_at_peak if xla_at_peak is not None else (None, None)
        out.append(
            AllocatorRecord(
                host=host,
                allocator=allocator,
                peak_bytes=peak_bytes,
                peak_time_ps=int(row["time_ps"]),
                peak_step=_int(row["step"]),
                capacity_bytes=capacity,
                utilisation=peak_bytes / capacity if capacity else None,
                heap_bytes=_int(row["heap_bytes"]) or 0,
                reserved_bytes=_int(row["reserved_bytes"]) or 0,
                fragmentation=None
                if pd.isna(row["fragmentation"])
                else float(row["fragmentation"]),
                allocations=int(counts.get((host, allocator), 0)),
                live_at_peak=int(parts["live_allocations"]),
                top_tensors=_top_tensors(mine),
                top_ops=_holding(all_ops, TOP_OP_COLUMNS),
                top_scopes=_holding(_ranked(owned(scopes, host, allocator)), TOP_SCOPE_COLUMNS),
                attribution=attribution_parts,
                leak_verdict=LeakVerdict.of(verdict),
                growth_bytes_per_step=rate,
                leak=leak,
                peak_events=int(row["peak_events"]),
                lifetime_peak_bytes=_int(row["lifetime_peak_bytes"]),
                live_at_peak_bytes=live_at_peak_bytes(attribution_parts),
                step_unit=step_unit(steps, host, allocator),
                before_capture=split,
                top_variables=top_variables,
                ops=all_ops.reset_index(drop=True),
                layers=None if layers is None else _layer_rows(owned(layers, host, allocator)),
                xla_programs=None if programs is None else _mine(programs, host, allocator),
                xla_buffers=None if buffers is None else _mine(buffers, host, allocator),
                steps=None if steps is None else _mine(steps, host, allocator),
                peak_repeats=_repeats((repeats or {}).get((host, allocator))),
            )
        )
        out[-1].notes = notes_of(out[-1])
    return out


# Rows of the layers and ops held at every peak instant a record keeps.
REPEAT_ROWS = 10


def _repeats(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """A record's ``peak_repeats``: the instants' figures, the first layers and ops."""
    if found is None:
        return None
    out = {k: v for k, v in found.items() if k not in ("layers", "ops")}
    for name in ("layers", "ops"):
        out[name] = found[name].head(REPEAT_ROWS).reset_index(drop=True)
    return out


# The name the records are built by everywhere else.
build_records = build_summaries


def with_predictions(
    records: Sequence[AllocatorRecord], curves: Mapping[tuple[str, str], dict[str, Any]]
) -> list[AllocatorRecord]:
    """``records`` with their ``prediction`` section (``predict_capacity.report_curves``
    of a predictor, per (host, allocator)); None where the predictor has none."""
    return [replace(r, prediction=curves.get((str(r.host), str(r.allocator)))) for r in records]


def _before_capture(
    variables: pd.DataFrame, breakdown: pd.DataFrame, parts: dict[str, int]
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The variables the breakdown names on this allocator by role (from before the
    capture, and allocations of the capture that hold one), and the largest."""
    named = breakdown[breakdown["variable"].notna().to_numpy(dtype=bool)]
    paths = named["variable"].astype(object)
    mine = variables[variables["path"].astype(object).isin(set(paths))]
    mine = mine.drop_duplicates("path")
    split: dict[str, Any] = {}
    # Variables are counted by item: two variables can share a path (two models'
    # ``hidden/kernel``), and one item holds one variable.
    # By the inventory's roles (weight, optimizer, other): a variable of the
    # optimizer is its state (``OPTIMIZER_STATE`` in the breakdown).
    inventory_role = named["role"].astype(object).replace({OPTIMIZER_STATE: "optimizer"})
    for role in ("weight", "optimizer", "other"):
        of_role = named[inventory_role.to_numpy(dtype=object) == role]
        split[f"{role}_bytes"] = int(of_role["bytes"].sum())
        split[f"{role}_variables"] = int(of_role["item"].nunique())
    during = named[named["holder"].to_numpy(dtype=object) != "variable"]
    split["during_variables"] = int(during["item"].nunique())
    # Variables of this allocator it never records (on CPU, those under 256 KiB):
    # alive, but in no counter, so the roles above leave them out; said apart.
    if "traced" in variables and len(breakdown):
        keys = (breakdown["host"].astype(object), breakdown["allocator"].astype(object))
        where = set(zip(*keys, strict=True))
        hosts = variables["host"].astype(object).tolist()
        allocators = variables["allocator"].astype(object).tolist()
        here = np.fromiter(
            ((h, a) in where for h, a in zip(hosts, allocators, strict=True)), bool, len(hosts)
        )
        small = variables[here & ~variables["traced"].to_numpy(dtype=bool)]
        small = small[small["at_stop"].to_numpy(dtype=bool)]
        for role in ("weight", "optimizer", "other"):
            of_role = small[small["role"].astype(object) == role]
            split[f"{role}_untraced_variables"] = len(of_role)
            split[f"{role}_untraced_bytes"] = int(of_role["estimated_bytes"].fillna(0).sum())
    optimizers = {
        str(path).split("/", 1)[0]
        for path in mine.loc[mine["role"].astype(object) == "optimizer", "path"]
        if isinstance(path, str) and "/" in path
    }
    split["optimizer"] = optimizers.pop() if len(optimizers) == 1 else None
    split["variable_bytes"] = parts.get("variable_bytes", 0)
    split["unnamed_bytes"] = parts.get("before_capture_bytes", 0)
    top = mine.sort_values(["estimated_bytes", "path"], ascending=[False, True], kind="stable")
    return split, top[TOP_VARIABLE_COLUMNS].reset_index(drop=True)


def _read_as_parameters(
    parameters: pd.DataFrame, host: str, allocator: str, parts: dict[str, int]
) -> dict[str, Any]:
    """What XLA programs read as parameters on this allocator (counted ones only)."""
    mine = owned(parameters, host, allocator)
    mine = mine[mine["counted"].to_numpy(dtype=bool)]
    names = [
        f if isinstance(f, str) else str(p)
        for p, f in zip(mine["program"].astype(object), mine["function"], strict=True)
    ]
    programs = sorted(set(names))
    kinds = Counter(
        f"{d}{s}" if isinstance(d, str) and isinstance(s, str) else f"{int(b)} B"
        for d, s, b in zip(
            mine["dtype"].astype(object),
            mine["shape"].astype(object),
            mine["size_bytes"],
            strict=True,
        )
    )
    shapes = ", ".join(f"{n} × {kind}" for kind, n in sorted(kinds.items(), key=lambda x: -x[1]))
    return {
        "xla_parameter_bytes": parts.get("xla_parameter_bytes", 0),
        "xla_parameters": len(mine),
        "xla_programs": len(programs),
        "xla_program": programs[0] if len(programs) == 1 else None,
        "xla_parameter_shapes": shapes,
        "unnamed_bytes": parts.get("before_capture_bytes", 0),
    }


def _ranked(frame: pd.DataFrame) -> pd.DataFrame:
    """Largest bytes at the peak first, then the most allocated (stable)."""
    return frame.sort_values(
        ["live_at_peak_bytes", "allocated_bytes"], ascending=False, kind="stable"
    )


def _holding(ranked: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The ranked rows holding any bytes at the peak, whole."""
    return ranked[(ranked["live_at_peak_bytes"] > 0).to_numpy(dtype=bool)][columns].reset_index(
        drop=True
    )


def _mine(frame: pd.DataFrame, host: str, allocator: str) -> pd.DataFrame:
    return frame if frame.empty else owned(frame, host, allocator).reset_index(drop=True)


def _layer_rows(mine: pd.DataFrame) -> pd.DataFrame:
    """The layers holding bytes at the peak (their rows sum to the bytes in use)."""
    return mine[(mine["live_at_peak_bytes"] != 0).to_numpy(dtype=bool)].reset_index(drop=True)


def _top_tensors(live: pd.DataFrame) -> pd.DataFrame:
    """The tensors and HLO buffers live at the peak, largest first; with their Python
    source line where the capture has one (JAX's Python tracer, allocations.source)."""
    columns = list(TOP_TENSOR_COLUMNS)
    if "source" in live and live["source"].notna().any():
        columns.append("source")
    return live[columns].reset_index(drop=True)


def _int(value: Any) -> int | None:
    return None if pd.isna(value) else int(value)
