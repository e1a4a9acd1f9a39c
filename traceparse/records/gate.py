"""The gate's figures that the allocator record does not carry: what each op asked
for (``op_requests``) and who padded the peak (``padding_rows``), built here from
a profile's tables so that the gate (``gate/figures.py``, ``gate/budgets.py``)
renders and compares them without re-deriving a figure."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.attribution import split_bytes
from traceparse.analysis.liveness import requested_or_held
from traceparse.records.source import RecordSource

__all__ = ["MAX_SHAPES", "OpRequests", "op_requests", "padding_rows"]

# An op's shapes listed in a diff: its largest few (dtype and shape).
MAX_SHAPES = 3

# (host, allocator, op) -> (bytes requested over the capture, of them live at the
# peak, the op's largest shapes ``float32[128,2048]``).
OpRequests = dict[tuple[str, str, str], tuple[int, int, tuple[str, ...]]]


def op_requests(source: RecordSource, no_op: str) -> OpRequests:
    """Per (host, allocator, op) of ``source`` (a ``Profile``): bytes requested, those
    live at the peak, largest shapes; allocations without an op under ``no_op`` (the
    renderer's label, ``output.cells.NO_OP``). A request TensorFlow did not record counts as
    what was handed out (``requested_or_held``)."""
    out: OpRequests = {}
    allocations = source.allocations
    if allocations.empty:
        return out
    live = source.live_at_peak()
    frame = pd.DataFrame(
        {
            "host": allocations["host"].astype(object).to_numpy(),
            "allocator": allocations["allocator"].astype(object).to_numpy(),
            "op": allocations["op"].astype(object).fillna(no_op).to_numpy(),
            "requested": requested_or_held(allocations),
            "at_peak": allocations.index.isin(live.index),
            # Only where TensorFlow recorded both (NA rows are left out of the shapes).
            "shape": (
                allocations["dtype"].astype(object) + allocations["shape"].astype(object)
            ).to_numpy(),
        }
    )
    frame["at_peak_requested"] = frame["requested"].where(frame["at_peak"], 0)
    keys = ["host", "allocator", "op"]
    sums = frame.groupby(keys, sort=False)[["requested", "at_peak_requested"]].sum()
    by_shape = frame.groupby([*keys, "shape"], sort=False)["requested"].max().reset_index()
    by_shape = by_shape.sort_values(["requested", "shape"], ascending=[False, True])
    shapes = by_shape.groupby(keys, sort=False)["shape"].agg(lambda s: tuple(s[:MAX_SHAPES]))
    for key, row in sums.iterrows():
        out[key] = (int(row["requested"]), int(row["at_peak_requested"]), shapes.get(key, ()))
    return out


def padding_rows(live: pd.DataFrame) -> pd.DataFrame:
    """The allocations of ``live`` (one allocator's ``live_at_peak``) the allocator
    padded, most padding first (stable), with their ``padding_bytes``: whole, the
    gate cuts them."""
    if live.empty:
        return live.assign(padding_bytes=pd.Series(dtype=np.int64))
    padding = split_bytes(live)["padding_bytes"]
    order = padding[padding > 0].sort_values(ascending=False, kind="stable")
    return live.loc[order.index].assign(padding_bytes=order.to_numpy(dtype=np.int64))
