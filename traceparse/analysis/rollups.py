"""Allocations rolled up per op and per name scope, with their bytes at the peak and at the end.

Every allocation lands in exactly one row (an allocation without an op is its
own NA row), so the byte columns of a roll-up sum to those of
``Profile.allocations``. The live-at-peak columns group ``Profile.breakdown``
on the same key: an HLO buffer inside a linked slab counts under its own TF
op (an op no allocation names gets a row of its own, with no allocations).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.breakdown import in_capture
from traceparse.analysis.liveness import (
    STILL_LIVE,
    end_events,
    first_rows,
    group_sums,
    held_bytes,
    numbered_combinations,
)
from traceparse.analysis.naming import NO_SCOPE, NO_TF_OP, KnownNames, model_scopes, written_scopes
from traceparse.errors import UsageError
from traceparse.tables.contracts import declare
from traceparse.tables.xla import XLA_ARGS

_SUMS = ["requested_bytes", "allocated_bytes", "estimated_bytes", "padding_bytes"]

_ROLLUP = [
    "count",
    "requested_bytes",
    "allocated_bytes",
    "estimated_bytes",
    "padding_bytes",
    "unestimated",
    "largest_bytes",
    "live_at_peak",
    "live_at_peak_bytes",
    "live_at_end",
    "live_at_end_bytes",
    "mean_lifetime_ps",
    "compute_count",
    "compute_ps",
]
# largest_bytes: NA for an op that only XLA buffers bring (it allocated nothing).
_ROLLUP_NA = ["allocator", "largest_bytes", "mean_lifetime_ps", "compute_count", "compute_ps"]
OPS = declare(
    "ops", ["host", "allocator", "op", "op_type", *_ROLLUP], ["op", "op_type", *_ROLLUP_NA]
)
SCOPES = declare("scopes", ["host", "allocator", "scope", "ops", *_ROLLUP], ["scope", *_ROLLUP_NA])
OPS_COLUMNS = OPS.dtypes
SCOPE_COLUMNS = SCOPES.dtypes


def ops_table(
    allocations: pd.DataFrame,
    breakdown: pd.DataFrame,
    op_time: pd.DataFrame,
    ends: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per (host, allocator, op); ``op_time`` has ``host, op, count, total_ps``;
    ``ends`` is ``end_events(allocations)`` where the caller has it already."""
    if allocations.empty:
        return _empty(OPS_COLUMNS)
    work = _work_frame(allocations, ends)
    work["op_type"] = allocations["op_type"]
    op, ops = _codes(allocations["op"])
    keys, group = _keys(allocations, op, ops, "op")
    table = _roll(work, keys, group, {"op_type": ("op_type", "first")})
    table["op_type"] = table["op_type"].astype(object)
    live = in_capture(breakdown)
    table = _with_live(table, live.assign(key=live["op"].astype(object)), "op")
    new = table["op_type"].isna() & (table["count"] == 0)
    if new.any():
        table.loc[new, "op_type"] = table.loc[new, "op"].map(_op_types(live))
    timing = op_time.rename(columns={"count": "compute_count", "total_ps": "compute_ps"})
    # A key column of only NA comes out of the groupby as float: merge on objects.
    table["op"] = table["op"].astype(object)
    table = table.merge(timing, on=["host", "op"], how="left")
    return _finish(table, OPS_COLUMNS)


def scope_of(op: str, depth: int, as_written: bool = False, known: KnownNames | None = None) -> str:
    """The first ``depth`` name-scope levels of an op name, relative to its model.

    Under a Keras model layer the path starts at the layer, by the user's name
    (``layer_names.model_scopes``: call wrappers, ``gradient_tape/``,
    ``replica_N/`` and the model's scope dropped), so a layer's forward and
    backward ops share one scope. Other ops keep their scopes as written, minus
    the call wrappers; ``as_written=True`` does that for every op. ``known``
    gives the names and generation learnt from a capture not written by Keras 3.

    >>> scope_of("StatefulPartitionedCall/gradient_tape/mlp_1/hidden_1/MatMul", 1)
    'hidden'
    >>> scope_of("StatefulPartitionedCall/mlp_1/hidden_1/MatMul", 2, as_written=True)
    'mlp_1/hidden_1'
    >>> scope_of("Fill", 1)
    '(top level)'
    """
    parts = written_scopes(op) if as_written else model_scopes(op, known)
    return "/".join(parts[:depth]) if parts else NO_SCOPE


def scopes_table(
    allocations: pd.DataFrame,
    breakdown: pd.DataFrame,
    op_time: pd.DataFrame,
    depth: int = 1,
    as_written: bool = False,
    ends: np.ndarray | None = None,
    known: KnownNames | None = None,
) -> pd.DataFrame:
    """The ops roll-up by name-scope prefix, ``depth`` levels deep (see ``scope_of``,
    with ``known``); ``ends`` as for ``ops_table``."""
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
        raise UsageError(f"scope depth must be a whole number of levels, 1 or more, not {depth!r}")
    depth = int(depth)
    if allocations.empty:
        return _empty(SCOPE_COLUMNS)
    work = _work_frame(allocations, ends)
    op, ops = _codes(allocations["op"])
    # Each op's scope made once, rows grouped on its number; no op (code -1) has no scope.
    of_op, scopes = pd.factorize(
        np.asarray([scope_of(str(o), depth, as_written, known) for o in ops])
    )
    # Code -1 picks the appended -1; int32 holds any scope number, in half the bytes.
    scope = np.append(of_op, -1).astype(np.int32)[op]
    work["op"] = pd.arrays.IntegerArray(op, op < 0)  # counted, never shown
    keys, group = _keys(allocations, scope, scopes, "scope")
    del scope  # a row each, not needed past the keys
    table = _roll(work, keys, group, {"ops": ("op", "nunique")})
    live = in_capture(breakdown)
    ops_live = live["op"].astype("category")
    names = [_scope_key(str(op), depth, as_written, known) for op in ops_live.cat.categories]
    keys = np.asarray([*names, None], dtype=object)[ops_live.cat.codes.to_numpy()]
    table = _with_live(table, live.assign(key=keys), "scope")
    if not op_time.empty:
        timing = op_time.assign(
            scope=[scope_of(str(op), depth, as_written, known) for op in op_time["op"]]
        )
        timing = timing.groupby(["host", "scope"], as_index=False).agg(
            compute_count=("count", "sum"), compute_ps=("total_ps", "sum")
        )
        table["scope"] = table["scope"].astype(object)
        table = table.merge(timing, on=["host", "scope"], how="left")
    return _finish(table, SCOPE_COLUMNS)


def _scope_key(op: str, depth: int, as_written: bool, known: KnownNames | None) -> str:
    # NO_TF_OP names no scope: it stays one row of its own.
    return op if op == NO_TF_OP else scope_of(op, depth, as_written, known)


def _work_frame(allocations: pd.DataFrame, ends: np.ndarray | None) -> pd.DataFrame:
    """The columns every roll-up sums, with liveness at the end."""
    ends = end_events(allocations) if ends is None else ends
    at_end = ends == STILL_LIVE
    # held_bytes is a new array: zeroed in place where freed, it is the bytes live at the end.
    live_at_end_bytes = held_bytes(allocations)
    live_at_end_bytes[~at_end] = 0
    work = pd.DataFrame(
        {
            **{column: allocations[column].astype("Int64") for column in _SUMS},
            "unestimated": allocations["estimated_bytes"].isna().to_numpy(),
            "live_at_end": at_end,
            "live_at_end_bytes": live_at_end_bytes,
            # Int64 as it is: groupby's mean reads it as float64, as it would a Float64 copy.
            "lifetime_ps": allocations["lifetime_ps"],
        },
        index=allocations.index,
        copy=False,  # columns added later never write into these
    )
    return work


def _with_live(table: pd.DataFrame, live: pd.DataFrame, key: str) -> pd.DataFrame:
    """``table`` with the breakdown's rows grouped on ``key``: ``live_at_peak`` (live
    things: allocations, HLO buffers, values) and ``live_at_peak_bytes``; a key only
    the breakdown has gets a row with no allocations, after the others. A roll-up
    is a few hundred rows: summed in a dict, not with pandas joins."""

    def names(column: pd.Series) -> list[object]:
        return [v if isinstance(v, str) else None for v in column.astype(object).tolist()]

    keys = ["host", "allocator", key]
    own = list(zip(*(names(table[c]) for c in keys), strict=True))
    found: dict[tuple[object, ...], tuple[set[int], list[int]]] = {}
    rows = zip(
        *(names(live[c]) for c in ("host", "allocator", "key")),
        live["item"].tolist(),
        live["bytes"].tolist(),
        strict=True,
    )
    for host, allocator, name, item, size in rows:
        items, total = found.setdefault((host, allocator, name), (set(), [0]))
        items.add(item)
        total[0] += int(size)
    table = table.assign(
        live_at_peak=[len(found[k][0]) if k in found else 0 for k in own],
        live_at_peak_bytes=[found[k][1][0] if k in found else 0 for k in own],
    )
    seen = set(own)
    extra = [(*k, len(v[0]), v[1][0]) for k, v in found.items() if k not in seen]
    if not extra:
        return table
    new = pd.DataFrame(extra, columns=[*keys, "live_at_peak", "live_at_peak_bytes"])
    counts = ["count", "unestimated", "live_at_end", "live_at_end_bytes", "ops", *_SUMS]
    for column in counts:
        if column in table:
            new[column] = 0
    table = table.astype({c: object for c in keys})
    return pd.concat([table, new.astype({c: object for c in keys})], ignore_index=True)


def _op_types(live: pd.DataFrame) -> dict[str, object]:
    """TF op -> its op type, from the largest live row of that op (an argument's
    copy, typed ``XLA_Args``, says nothing of the op's own type)."""
    found: dict[str, object] = {}
    ordered = live.sort_values("bytes", ascending=False, kind="stable")
    for op, kind in zip(ordered["op"].tolist(), ordered["op_type"].tolist(), strict=True):
        if isinstance(op, str) and found.get(op) is None:
            found[op] = kind if isinstance(kind, str) and kind != XLA_ARGS else None
    return found


def _codes(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """A column's integer codes (-1 for NA; the categorical's own, as narrow as
    they are: read only) and the values they stand for."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype("category")
    return column.cat.codes.to_numpy(), column.cat.categories


def _keys(
    allocations: pd.DataFrame, key: np.ndarray, names: pd.Index | np.ndarray, name: str
) -> tuple[pd.DataFrame, np.ndarray]:
    """The roll-up's rows, ``host, allocator, <name>`` (``key``: codes into ``names``,
    -1 for NA), and each allocation's row among them.

    Groups are numbered in order of first appearance, as ``groupby(sort=False)``
    numbers them, but found on integer codes: allocations can be millions, and
    grouping on their names as text costs seconds.
    """
    host, hosts = _codes(allocations["host"])
    allocator, allocators = _codes(allocations["allocator"])
    group = numbered_combinations([host, allocator, key], [len(hosts), len(allocators), len(names)])
    first = first_rows(group)
    values = np.asarray([*names, None], dtype=object)  # code -1 picks None
    keys = pd.DataFrame(
        {
            "host": allocations["host"].iloc[first].astype(object).to_numpy(),
            "allocator": allocations["allocator"].iloc[first].astype(object).to_numpy(),
            name: values[key[first]],
        }
    )
    return keys, group


def _roll(
    work: pd.DataFrame, keys: pd.DataFrame, group: np.ndarray, extra: dict[str, tuple[str, str]]
) -> pd.DataFrame:
    """``keys`` with the sums of ``work`` per ``group`` (numbered as ``keys``' rows).

    Summed with numpy over the group numbers (allocations can be millions, and
    pandas' groupby makes copies of them); only the mean is pandas', whose
    compensated sum it must match bit for bit. ``extra``: a column ``name:
    (column, "first" | "nunique")`` of ``work``, as groupby's aggregations.
    """
    size = len(keys)
    table: dict[str, object] = {}
    for name, (column, how) in extra.items():
        table[name] = (
            _first(work[column], group, size)
            if how == "first"
            else _distinct(work[column], group, size)
        )
    table["count"] = np.bincount(group, minlength=size)
    no_na = np.zeros(size, dtype=bool)
    for column in _SUMS:
        values = work[column].to_numpy(dtype=np.int64, na_value=0)
        table[column] = pd.arrays.IntegerArray(group_sums(group, values, size), no_na)
    for column in ("unestimated", "live_at_end"):
        table[column] = np.bincount(group, weights=work[column].to_numpy(), minlength=size).astype(
            np.int64
        )
    table["live_at_end_bytes"] = group_sums(group, work["live_at_end_bytes"].to_numpy(), size)
    table["largest_bytes"] = _largest(work["allocated_bytes"], group, size)
    mean = work["lifetime_ps"].groupby(group, sort=True).mean()
    table["mean_lifetime_ps"] = mean.astype("Float64").round().array
    return pd.concat([keys, pd.DataFrame(table)], axis=1)


def _largest(column: pd.Series, group: np.ndarray, size: int) -> pd.arrays.IntegerArray:
    """Per group, the largest known value of an Int64 column; NA where none is known."""
    known = column.notna().to_numpy(dtype=bool)
    lowest = np.iinfo(np.int64).min
    largest = np.full(size, lowest, dtype=np.int64)
    np.maximum.at(largest, group, column.to_numpy(dtype=np.int64, na_value=lowest))
    unknown = np.bincount(group, weights=known, minlength=size) == 0
    return pd.arrays.IntegerArray(np.where(unknown, 0, largest), unknown)


def _first(column: pd.Series, group: np.ndarray, size: int) -> pd.Categorical:
    """Per group, the first known value of a categorical column (NA where none)."""
    codes = column.cat.codes.to_numpy()
    known = codes >= 0
    if known.all():  # each group's first row: no row numbers of a row each
        first = first_rows(group)
    else:
        rows = np.flatnonzero(known)
        first = np.full(size, codes.size, dtype=np.int64)
        np.minimum.at(first, group[rows], rows)
    found = first < codes.size
    picked = np.full(size, -1, dtype=codes.dtype)
    picked[found] = codes[first[found]]
    return pd.Categorical.from_codes(picked, dtype=column.dtype)


def _distinct(column: pd.Series, group: np.ndarray, size: int) -> np.ndarray:
    """Per group, how many distinct known values an integer column has."""
    values = column.to_numpy(dtype=column.dtype.numpy_dtype, na_value=-1)  # as narrow
    known = values >= 0
    width = int(values.max(initial=0)) + 1
    if known.all():  # (group, value) packed in place into one new array
        pairs = group.astype(np.int64)
        pairs *= width
        pairs += values
    else:
        pairs = group[known] * width + values[known]
    return np.bincount(pd.unique(pairs) // width, minlength=size)


def _finish(table: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    for column in ("compute_count", "compute_ps"):
        if column not in table:
            table[column] = pd.NA
    table = table[list(columns)].astype(columns)
    table = table.sort_values(
        ["host", "allocator", "live_at_peak_bytes", "allocated_bytes"],
        ascending=[True, True, False, False],
        kind="stable",
        na_position="last",
    )
    return table.reset_index(drop=True)


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    return (OPS if columns is OPS_COLUMNS else SCOPES).empty()
