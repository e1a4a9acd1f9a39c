"""Bytes per line of the user's code: ``Profile.lines()`` and ``traceparse lines``.

Each row is one source line (``allocations.source``: the innermost frame of
the program's own code that made the memory, docs/sources.md) of one
allocator: the bytes it holds at the allocator's peak (the breakdown's rows
made during the capture: allocations, XLA values, padding) and what it
allocated over the capture, with the layers and ops under it. ``by_stack``
keeps whole stacks apart (two calls of one line from different callers).

Bytes from before the capture (variables, XLA parameters) and the allocator's
reservation have no line; memory made during the capture whose op has no
recorded stack is one row with ``source`` NA, so the rows of an allocator sum
to what was made during the capture.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.breakdown import INSIDE
from traceparse.tables.contracts import declare

_COLUMNS = [
    "host",
    "allocator",
    "source",
    "stack",
    "live_at_peak_bytes",
    "requested_bytes",
    "allocations",
    "layers",
    "op_names",
]
LINES = declare("lines", _COLUMNS, ["allocator", "source", "stack", "layers", "op_names"])

# How many layer and op names a row lists (largest first).
_NAMES = 3


def lines_table(
    breakdown: pd.DataFrame,
    allocations: pd.DataFrame,
    stacks: pd.Series | None,
    *,
    by_stack: bool = False,
) -> pd.DataFrame:
    """One row per (host, allocator, line) or (host, allocator, stack), largest first.

    ``stacks`` is each allocation's recorded stack (None without a record);
    the breakdown carries its own ``source`` and ``stack`` columns.
    """
    key = "stack" if by_stack else "source"
    inside = breakdown[breakdown["holder"].astype(object).isin(INSIDE).to_numpy(dtype=bool)]
    peak = pd.DataFrame(
        {
            "host": inside["host"].astype(object),
            "allocator": inside["allocator"].astype(object),
            "key": _keys(inside, key),
            "source": inside["source"].astype(object),
            "bytes": inside["bytes"].to_numpy(dtype=np.int64),
            "layer": inside["layer"].astype(object),
            "op": inside["op"].astype(object),
        }
    )
    made = allocations.assign(stack=stacks) if stacks is not None else allocations.assign(stack=pd.NA)
    over = pd.DataFrame(
        {
            "host": made["host"].astype(object),
            "allocator": made["allocator"].astype(object),
            "key": _keys(made, key),
            "source": made["source"].astype(object),
            "bytes": made["requested_bytes"].to_numpy(dtype=np.int64, na_value=0),
        }
    )
    groups = ["host", "allocator", "key"]
    held = peak.groupby(groups, dropna=False, sort=False)["bytes"].sum()
    allocated = over.groupby(groups, dropna=False, sort=False)["bytes"].agg(["sum", "count"])
    sources = pd.concat([peak[[*groups, "source"]], over[[*groups, "source"]]])
    named = sources.dropna(subset=["source"]).groupby(groups, dropna=False, sort=False)["source"]
    source_of = named.first()
    index = held.index.union(allocated.index, sort=False)
    rows = []
    for host, allocator, value in index:
        k = (host, allocator, value)
        mine = peak[_same(peak, host, allocator, value)]
        rows.append(
            {
                "host": host,
                "allocator": allocator,
                "source": source_of.get(k) if not _missing(value) else None,
                "stack": None if not by_stack or _missing(value) else int(value),
                "live_at_peak_bytes": int(held.get(k, 0)),
                "requested_bytes": int(allocated["sum"].get(k, 0)),
                "allocations": int(allocated["count"].get(k, 0)),
                "layers": _largest(mine, "layer"),
                "op_names": _largest(mine, "op"),
            }
        )
    table = pd.DataFrame(rows, columns=_COLUMNS)
    if table.empty:
        return LINES.empty()
    table = table.sort_values(
        ["live_at_peak_bytes", "requested_bytes"], ascending=False, kind="stable"
    )
    return table.reset_index(drop=True)


def _keys(frame: pd.DataFrame, key: str) -> pd.Series:
    if key == "stack":
        return pd.Series(
            frame["stack"].to_numpy(dtype=object, na_value=None)
            if "stack" in frame
            else [None] * len(frame),
            index=frame.index,
            dtype=object,
        )
    return frame["source"].astype(object)


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _same(frame: pd.DataFrame, host: object, allocator: object, value: object) -> np.ndarray:
    match = (frame["host"] == host).to_numpy(dtype=bool) & (
        (frame["allocator"] == allocator).to_numpy(dtype=bool)
        if not _missing(allocator)
        else frame["allocator"].isna().to_numpy(dtype=bool)
    )
    if _missing(value):
        return match & frame["key"].isna().to_numpy(dtype=bool)
    return match & (frame["key"] == value).to_numpy(dtype=bool)


def _largest(rows: pd.DataFrame, column: str) -> str | None:
    """The distinct values of ``column`` by the bytes they hold, largest first."""
    if rows.empty:
        return None
    sums = rows.dropna(subset=[column]).groupby(column, sort=False)["bytes"].sum()
    sums = sums[sums > 0].sort_values(ascending=False, kind="stable")
    names = [str(n) for n in sums.index[:_NAMES]]
    if len(sums) > _NAMES:
        names.append(f"+{len(sums) - _NAMES}")
    return ", ".join(names) or None
