"""Linked XLA slabs at the allocator's peak, opened up into their HLO buffers.

``expand_live`` replaces each linked temp slab in ``live_at_peak`` with one row
per HLO buffer live at the program's peak (op = the buffer's TF op) and one
slack row (the slab's op, its padding, the bytes no buffer covers), so the
rows of one slab still add up to its ``allocated_bytes``. ``live_deltas``
gives the roll-ups the same move: bytes at the peak leave the slab's op and go
to the buffers' TF ops.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Columns expand_live adds to live_at_peak.
EXPANDED_COLUMNS = ["xla_program", "xla_buffer"]
_AS_OBJECT = ["op", "op_type", "dtype", "shape", "xla_program"]


def slab_rows(live: pd.DataFrame, peak_buffers: pd.DataFrame) -> pd.DataFrame:
    """``peak_buffers`` rows joined to the live rows (by index) of their slab."""
    if live.empty or peak_buffers.empty or "xla_program" not in live:
        return pd.DataFrame(columns=["row", "logical_buffer", "held_bytes"])
    linked = live[live["xla_allocation_index"].notna()]
    keys = pd.DataFrame(
        {
            "row": linked.index,
            "host": linked["host"].astype(object).to_numpy(),
            "program": linked["xla_program"].astype(object).to_numpy(),
            "allocation_index": linked["xla_allocation_index"].to_numpy(dtype=np.int64),
        }
    )
    return keys.merge(peak_buffers, on=["host", "program", "allocation_index"], how="inner")


def covered_bytes(slabs: pd.DataFrame) -> pd.Series:
    """Per live slab row: bytes its live HLO buffers cover."""
    if slabs.empty:
        return pd.Series(dtype="int64")
    buffers = slabs["logical_buffer"].notna().to_numpy(dtype=bool)
    held = np.where(buffers, slabs["held_bytes"].to_numpy(dtype=np.int64), 0)
    return pd.Series(held, index=slabs["row"].to_numpy()).groupby(level=0).sum()


def expand_live(live: pd.DataFrame, slabs: pd.DataFrame, buffers: pd.DataFrame) -> pd.DataFrame:
    """``live`` with each slab in ``slabs`` replaced by its buffer rows and a slack row."""
    out = live.copy()
    out["xla_buffer"] = pd.Series(pd.NA, index=out.index, dtype=object)
    if slabs.empty:
        return out
    keyed = buffers.astype({"host": object, "program": object})
    info = slabs.merge(
        keyed[
            [
                "host",
                "program",
                "allocation_index",
                "logical_buffer",
                "instruction",
                "tf_op",
                "tf_op_type",
                "dtype",
                "shape",
                "estimated_bytes",
            ]
        ],
        on=["host", "program", "allocation_index", "logical_buffer"],
        how="left",
    )
    parts = []
    for row, group in info.groupby("row", sort=False):
        slab = live.loc[[row]]
        is_buffer = group["logical_buffer"].notna().to_numpy(dtype=bool)
        held = group["held_bytes"].to_numpy(dtype=np.int64)
        covered = int(held[is_buffer].sum())
        rows = pd.DataFrame(
            {
                column: np.repeat(slab[column].astype(object).to_numpy(), len(group))
                for column in live
            },
        )
        rows.index = pd.Index([row] * len(group))
        requested = int(pd.array(slab["requested_bytes"]).fillna(0)[0])
        allocated = int(pd.array(slab["allocated_bytes"]).fillna(requested)[0])
        b = is_buffer
        rows.loc[b, "op"] = group["tf_op"].to_numpy()[b]
        rows.loc[b, "op_type"] = group["tf_op_type"].to_numpy()[b]
        rows.loc[b, "dtype"] = group["dtype"].astype(object).to_numpy()[b]
        rows.loc[b, "shape"] = group["shape"].to_numpy()[b]
        rows["estimated_bytes"] = np.where(
            b, group["estimated_bytes"].astype(object).to_numpy(), None
        )
        rows["requested_bytes"] = np.where(b, held, requested - covered)
        rows["allocated_bytes"] = np.where(b, held, allocated - covered)
        rows["padding_bytes"] = np.where(b, 0, allocated - requested)
        rows["xla_buffer"] = np.where(b, group["instruction"].to_numpy(), None)
        parts.append(rows)
    kept = out.drop(index=slabs["row"].unique())
    merged = pd.concat([kept.astype({c: object for c in _AS_OBJECT if c in kept}), *parts])
    for column in live.columns:
        dtype = live[column].dtype
        if column in _AS_OBJECT:
            merged[column] = merged[column].astype("category")
        elif column in ("estimated_bytes", "requested_bytes", "allocated_bytes", "padding_bytes"):
            merged[column] = pd.array(merged[column].tolist(), dtype="Int64")
        else:
            merged[column] = merged[column].astype(dtype)
    merged["xla_buffer"] = merged["xla_buffer"].astype(object)
    return merged.sort_values(
        ["host", "allocator", "allocated_bytes"], ascending=[True, True, False], kind="stable"
    )


def live_deltas(live: pd.DataFrame, expanded: pd.DataFrame) -> pd.DataFrame:
    """Per (host, allocator, op): live-at-peak count and bytes of ``expanded``
    minus those of ``live`` (zero where nothing moved)."""

    def sums(frame: pd.DataFrame) -> pd.DataFrame:
        work = pd.DataFrame(
            {
                "host": frame["host"].astype(object),
                "allocator": frame["allocator"].astype(object),
                "op": frame["op"].astype(object),
                "bytes": frame["allocated_bytes"]
                .fillna(frame["requested_bytes"])
                .fillna(0)
                .astype("int64"),
            }
        )
        return work.groupby(["host", "allocator", "op"], dropna=False).agg(
            live=("bytes", "size"), live_bytes=("bytes", "sum")
        )

    after, before = sums(expanded), sums(live)
    delta = after.sub(before, fill_value=0).astype("int64")
    return delta[(delta != 0).any(axis=1)].reset_index()
