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
            "allocator": inside["allocator"].astype(object).fillna(_NONE),
            "key": _keys(inside, key),
            "source": inside["source"].astype(object),
            "bytes": inside["bytes"].to_numpy(dtype=np.int64),
            "layer": inside["layer"].astype(object),
            "op": inside["op"].astype(object),
        }
    )
    made = (
        allocations.assign(stack=stacks) if stacks is not None else allocations.assign(stack=pd.NA)
    )
    over = pd.DataFrame(
        {
            "host": made["host"].astype(object),
            "allocator": made["allocator"].astype(object).fillna(_NONE),
            "key": _keys(made, key),
            "source": made["source"].astype(object),
            "bytes": made["requested_bytes"].to_numpy(dtype=np.int64, na_value=0),
            "op": made["op"].astype(object),
        }
    )
    groups = ["host", "allocator", "key"]
    held = peak.groupby(groups, dropna=False, sort=False)["bytes"].sum()
    allocated = over.groupby(groups, dropna=False, sort=False)["bytes"].agg(["sum", "count"])
    sources = pd.concat([peak[[*groups, "source"]], over[[*groups, "source"]]])
    named = sources.dropna(subset=["source"]).groupby(groups, dropna=False, sort=False)["source"]
    source_of = named.first()
    index = held.index.union(allocated.index, sort=False)
    layers, ops = _largest(peak, groups, "layer"), _largest(peak, groups, "op")
    # A line holding nothing at the peak is described by what it asked for.
    ops = {**_largest(over, groups, "op"), **ops}
    rows = []
    for host, allocator, value in index:
        k = (host, allocator, value)
        rows.append(
            {
                "host": host,
                "allocator": None if allocator == _NONE else allocator,
                "source": None if _missing(value) else source_of.get(k),
                "stack": None if not by_stack or _missing(value) else int(value),
                "live_at_peak_bytes": int(held.get(k, 0)),
                "requested_bytes": int(allocated["sum"].get(k, 0)),
                "allocations": int(allocated["count"].get(k, 0)),
                "layers": layers.get(k),
                "op_names": ops.get(k),
            }
        )
    table = pd.DataFrame(rows, columns=_COLUMNS)
    if table.empty:
        return LINES.empty()
    table = table.sort_values(
        ["live_at_peak_bytes", "requested_bytes"], ascending=False, kind="stable"
    )
    return table.reset_index(drop=True)


# The group of what no recorded stack names (NA does not group or compare as a key).
_NONE = ""


def _keys(frame: pd.DataFrame, key: str) -> pd.Series:
    if key == "stack":
        values = frame["stack"] if "stack" in frame else pd.Series(pd.NA, index=frame.index)
        text = [_NONE if pd.isna(v) else str(int(v)) for v in values.tolist()]
        return pd.Series(text, index=frame.index, dtype=object)
    return frame["source"].astype(object).where(frame["source"].notna(), _NONE)


def _missing(value: object) -> bool:
    return value == _NONE


def _largest(rows: pd.DataFrame, groups: list[str], column: str) -> dict[tuple[object, ...], str]:
    """Per group, the distinct values of ``column`` by the bytes they hold, largest first."""
    sums = rows.dropna(subset=[column]).groupby([*groups, column], sort=False)["bytes"].sum()
    sums = sums[sums > 0].reset_index().sort_values("bytes", ascending=False, kind="stable")
    out: dict[tuple[object, ...], str] = {}
    for key, group in sums.groupby(groups, sort=False):
        names = [str(n) for n in group[column].tolist()]
        shown = names[:_NAMES] + ([f"+{len(names) - _NAMES}"] if len(names) > _NAMES else [])
        out[tuple(key)] = ", ".join(shown)
    return out
