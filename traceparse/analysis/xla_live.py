"""Linked XLA slabs at the allocator's peak, opened up into their HLO buffers.

``slab_frame`` lists, per linked temp slab live at a peak, the HLO buffers live
at the program's peak (with their TF op, dtype and shape) and one slack row.
``expand_live`` replaces each such slab in ``live_at_peak`` with those rows
(op = the buffer's TF op; the slack row keeps the slab's op and padding), so
the rows of one slab still add up to its ``allocated_bytes``. ``live_deltas``
gives the roll-ups the same move without expanding: bytes at the peak leave
the slab's op and go to the buffers' TF ops. The tables here are a few rows
per slab, so they are built in plain Python, not with pandas joins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from traceparse.tables.xla import XLA_ARGS

# The op of an HLO buffer (or agreed value) live in a linked slab whose TF op the
# module does not say (tables/xla.py: no metadata, and not a fusion or copy of
# an op that has one): one explicit name in ops, scopes, layers and the expanded
# live_at_peak, like rollups.NO_SCOPE, so those bytes are never grouped under NA.
NO_TF_OP = "(XLA buffer, no TF op)"

# Columns expand_live adds to live_at_peak.
EXPANDED_COLUMNS = ["xla_program", "xla_buffer"]
_AS_OBJECT = ["op", "op_type", "dtype", "shape", "xla_program"]

# One row per live buffer of a slab, then its slack row (buffer False). An
# allocation named by the value all its candidate allocations hold (index NA,
# ``held_rows``) has one value row with logical_buffer and instruction NA.
SLAB_COLUMNS: dict[str, str] = {
    "row": "int64",  # the slab's row in live_at_peak (= allocations)
    "host": "object",
    "program": "object",
    "allocation_index": "Int64",  # NA for a value named by agreement
    "logical_buffer": "Int64",
    "buffer": "bool",  # a value's row (not the slack row)
    "held_bytes": "int64",
    "instruction": "object",
    "tf_op": "object",
    "tf_op_type": "object",
    "dtype": "object",
    "shape": "object",
    "estimated_bytes": "Int64",
}

# (host, program, allocation index) -> ([(logical buffer, bytes it covers)], slack)
PeakFill = dict[tuple[str, str, int], tuple[list[tuple[int, int]], int]]
# (host, program, logical buffer) -> (instruction, tf_op, tf_op_type, dtype, shape, estimated)
BufferInfo = Callable[[str, str, int], tuple[Any, ...]]


def linked_slabs(live: pd.DataFrame) -> list[tuple[int, str, str, int]]:
    """(row, host, program, allocation index) of each linked allocation in ``live``."""
    if live.empty or "xla_allocation_index" not in live:
        return []
    linked = live[live["xla_allocation_index"].notna()]
    return list(
        zip(
            linked.index.tolist(),
            linked["host"].astype(object).tolist(),
            linked["xla_program"].astype(object).tolist(),
            linked["xla_allocation_index"].astype("int64").tolist(),
            strict=True,
        )
    )


def slab_rows(
    slabs: Iterable[tuple[int, str, str, int]], fill: PeakFill, info: BufferInfo
) -> list[tuple[Any, ...]]:
    """``SLAB_COLUMNS`` rows for the slabs whose allocation ``fill`` describes (temp ones)."""
    rows: list[tuple[Any, ...]] = []
    for row, host, program, index in slabs:
        found = fill.get((host, program, index))
        if found is None:
            continue
        covered, slack = found
        for buffer, held in covered:
            rows.append(
                (row, host, program, index, buffer, True, held, *info(host, program, buffer))
            )
        rows.append((row, host, program, index, None, False, slack, *[None] * 6))
    return rows


def held_rows(live: pd.DataFrame, held: dict[Any, tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``SLAB_COLUMNS`` rows for the allocations in ``live`` named by an agreed value
    ((dtype, shape, estimated_bytes, tf_op, tf_op_type), see tables/xla_link.py):
    the value covers up to its shape x dtype bytes, the rest is slack."""
    rows: list[tuple[Any, ...]] = []
    if held and "xla_program" in live:
        found = live[live.index.isin(list(held))]
        for row, host, program, requested in zip(
            found.index.tolist(),
            found["host"].astype(object).tolist(),
            found["xla_program"].astype(object).tolist(),
            found["requested_bytes"].fillna(0).astype("int64").tolist(),
            strict=True,
        ):
            dtype, shape, estimated, tf_op, tf_op_type = held[row]
            covered = min(int(estimated), int(requested))
            head = (row, host, program, None, None)
            rows.append((*head, True, covered, None, tf_op, tf_op_type, dtype, shape, estimated))
            rows.append((*head, False, int(requested) - covered, *[None] * 6))
    return rows


def slab_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """The ``SLAB_COLUMNS`` frame of ``slab_rows`` and ``held_rows``; a value
    row (buffer) with no TF op gets NO_TF_OP."""
    columns = list(SLAB_COLUMNS)
    tf_op, buffer = columns.index("tf_op"), columns.index("buffer")
    named = [
        (*r[:tf_op], NO_TF_OP, *r[tf_op + 1 :]) if r[buffer] and r[tf_op] is None else r
        for r in rows
    ]
    return pd.DataFrame(named, columns=columns).astype(SLAB_COLUMNS)


def covered_bytes(slabs: pd.DataFrame) -> pd.Series:
    """Per live slab row: bytes its live HLO buffers cover."""
    if slabs.empty:
        return pd.Series(dtype="int64")
    buffers = slabs["buffer"].to_numpy(dtype=bool)
    held = np.where(buffers, slabs["held_bytes"].to_numpy(dtype=np.int64), 0)
    return pd.Series(held, index=slabs["row"].to_numpy()).groupby(level=0).sum()


def expand_live(live: pd.DataFrame, slabs: pd.DataFrame) -> pd.DataFrame:
    """``live`` with each slab in ``slabs`` replaced by its buffer rows and a slack row."""
    out = live.copy()
    out["xla_buffer"] = pd.Series(pd.NA, index=out.index, dtype=object)
    if slabs.empty:
        return out
    rows = slabs["row"].to_numpy(dtype=np.int64)
    new = live.loc[rows].copy()  # one copy of the slab's row per buffer and slack row
    b = slabs["buffer"].to_numpy(dtype=bool)
    held = slabs["held_bytes"].to_numpy(dtype=np.int64)
    covered = covered_bytes(slabs).reindex(rows).to_numpy(dtype=np.int64)
    requested = new["requested_bytes"].fillna(0).to_numpy(dtype=np.int64)
    allocated = new["allocated_bytes"].fillna(new["requested_bytes"]).fillna(0)
    allocated_np = allocated.to_numpy(dtype=np.int64)
    for column, source in (("op", "tf_op"), ("op_type", "tf_op_type"), ("dtype", "dtype")):
        new[column] = np.where(b, slabs[source].to_numpy(dtype=object), new[column].astype(object))
    new["shape"] = np.where(b, slabs["shape"].to_numpy(dtype=object), new["shape"].astype(object))
    est = slabs["estimated_bytes"].to_numpy(dtype=object, na_value=None)
    new["estimated_bytes"] = pd.array(
        [e if f else None for e, f in zip(est.tolist(), b.tolist(), strict=True)], dtype="Int64"
    )
    new["requested_bytes"] = pd.array(np.where(b, held, requested - covered), dtype="Int64")
    new["allocated_bytes"] = pd.array(np.where(b, held, allocated_np - covered), dtype="Int64")
    new["padding_bytes"] = pd.array(np.where(b, 0, allocated_np - requested), dtype="Int64")
    new["xla_buffer"] = np.where(b, slabs["instruction"].to_numpy(dtype=object), None)
    kept = out.drop(index=np.unique(rows))
    as_object = {c: object for c in _AS_OBJECT if c in kept}
    merged = pd.concat([kept.astype(as_object), new.astype(as_object)])
    merged = merged.astype({c: "category" for c in as_object})
    merged["xla_buffer"] = merged["xla_buffer"].astype(object)
    return merged.sort_values(
        ["host", "allocator", "allocated_bytes"], ascending=[True, True, False], kind="stable"
    )


Key = tuple[Any, Any, Any]


def _key(host: Any, allocator: Any, name: Any) -> Key:
    return (host, allocator, name if isinstance(name, str) else None)


def live_deltas(live: pd.DataFrame, slabs: pd.DataFrame) -> dict[Key, list[int]]:
    """(host, allocator, op) -> [live-at-peak count, bytes] that ``expand_live``
    would add (negative: remove); ops where nothing moves are left out."""
    deltas: dict[Key, list[int]] = {}
    if slabs.empty:
        return deltas
    where = live.loc[slabs["row"].unique(), ["host", "allocator", "op"]].astype(object)
    slab_of = {r: (h, a, o) for r, h, a, o in where.itertuples(name=None)}
    for row, buffer, held, tf_op in zip(
        slabs["row"].tolist(),
        slabs["buffer"].tolist(),
        slabs["held_bytes"].tolist(),
        slabs["tf_op"].tolist(),
        strict=True,
    ):
        if not buffer:
            continue  # the slack row takes the slab's place: its op keeps one row
        host, allocator, op = slab_of[row]
        to = deltas.setdefault(_key(host, allocator, tf_op), [0, 0])
        to[0] += 1
        to[1] += held
        frm = deltas.setdefault(_key(host, allocator, op), [0, 0])
        frm[1] -= held
    return {k: v for k, v in deltas.items() if v != [0, 0]}


def op_types(slabs: pd.DataFrame) -> dict[str, Any]:
    """TF op -> its op type, from the largest live buffer of that op (an
    argument's copy, typed ``XLA_Args``, says nothing of the op's own type)."""
    found: dict[str, Any] = {}
    ordered = slabs.sort_values("held_bytes", ascending=False, kind="stable")
    for op, kind in zip(ordered["tf_op"].tolist(), ordered["tf_op_type"].tolist(), strict=True):
        if isinstance(op, str) and found.get(op) is None:
            found[op] = kind if isinstance(kind, str) and kind != XLA_ARGS else None
    return found


def programs_at_peak(expanded: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From ``expand_live``'s rows: per (host, allocator, program) the bytes its
    allocations hold at the peak, and its values (HLO buffers, agreed values)
    live there, largest first. Both empty when nothing linked is live."""
    linked = expanded[expanded["xla_program"].notna()] if "xla_program" in expanded else expanded
    keys = ["host", "allocator", "xla_program"]
    if linked.empty:
        return pd.DataFrame(columns=[*keys, "allocations", "allocated_bytes"]), pd.DataFrame(
            columns=[*keys, "xla_buffer", "op", "dtype", "shape", "allocated_bytes"]
        )
    frame = linked.astype({c: object for c in keys}).reset_index(names="row")
    programs = (
        frame.groupby(keys, sort=False)
        .agg(allocations=("row", "nunique"), allocated_bytes=("allocated_bytes", "sum"))
        .reset_index()
        .sort_values("allocated_bytes", ascending=False, kind="stable")
    )
    values = frame[frame["xla_buffer"].notna() | frame["dtype"].notna()]
    buffers = values[[*keys, "xla_buffer", "op", "dtype", "shape", "allocated_bytes"]]
    buffers = buffers.sort_values("allocated_bytes", ascending=False, kind="stable")
    return programs.reset_index(drop=True), buffers.reset_index(drop=True)
