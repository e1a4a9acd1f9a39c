"""Where an allocator's bytes at its peak went: one row per allocator, parts summing exactly.

Each allocation live at the peak holds its chunk (``allocated_bytes``), which
splits into

- ``shape_explained_bytes``: what its shape x dtype accounts for (capped at the
  request, so a part is never negative);
- ``unexplained_request_bytes``: the rest of what TensorFlow asked for: temp
  buffers without a shape, dtypes without a fixed size (a string tensor's
  24-byte ``tstring`` headers), requests larger than the shape;
- ``padding_bytes``: what the allocator added (rounding, unsplit chunks).

The allocator's heap counter at the peak minus what the live allocations hold
is ``before_capture_bytes``: memory allocated before the capture started and
still held (its owner is unknown). ``reserved_bytes`` is the allocator's
reservation counter. So the parts sum to ``in_use_bytes`` by construction, and
a negative ``before_capture_bytes`` means the capture lost frees.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import held_bytes, requested_or_held
from traceparse.tables.contracts import declare

# The parts, in the order a report lists them.
PARTS = [
    "shape_explained_bytes",
    "unexplained_request_bytes",
    "padding_bytes",
    "before_capture_bytes",
    "reserved_bytes",
]

ATTRIBUTION = declare(
    "attribution", ["host", "allocator", "in_use_bytes", *PARTS, "live_allocations"], ["allocator"]
)
ATTRIBUTION_COLUMNS = ATTRIBUTION.dtypes


def split_bytes(allocations: pd.DataFrame) -> pd.DataFrame:
    """Per allocation: its explained, unexplained-request and padding bytes (int64, exact)."""
    held = held_bytes(allocations)
    requested = requested_or_held(allocations)
    estimated = allocations["estimated_bytes"].to_numpy(dtype=np.int64, na_value=0)
    explained = np.clip(np.minimum(estimated, requested), 0, None)
    return pd.DataFrame(
        {
            "shape_explained_bytes": explained,
            "unexplained_request_bytes": requested - explained,
            "padding_bytes": held - requested,
            "held_bytes": held,
        },
        index=allocations.index,
    )


def attribution_table(peak: pd.DataFrame, live: pd.DataFrame) -> pd.DataFrame:
    """One row per peak row; ``live`` is ``live_at_peak`` for every allocator."""
    if peak.empty:
        return ATTRIBUTION.empty()
    parts = split_bytes(live)
    parts["host"] = live["host"].astype(object)
    parts["allocator"] = live["allocator"].astype(object)
    sums = parts.groupby(["host", "allocator"], dropna=False, sort=False).agg(
        shape_explained_bytes=("shape_explained_bytes", "sum"),
        unexplained_request_bytes=("unexplained_request_bytes", "sum"),
        padding_bytes=("padding_bytes", "sum"),
        held_bytes=("held_bytes", "sum"),
        live_allocations=("held_bytes", "size"),
    )
    keys = peak[["host", "allocator"]].astype(object)
    # A key of only NA comes out of the groupby as float: merge on objects.
    sums = sums.reset_index().astype({"host": object, "allocator": object})
    table = keys.merge(sums, on=["host", "allocator"], how="left")
    table = table.fillna(0).infer_objects()
    heap = peak["heap_bytes"].fillna(0).to_numpy(dtype=np.int64)
    reserved = peak["reserved_bytes"].fillna(0).to_numpy(dtype=np.int64)
    table["in_use_bytes"] = peak["in_use_bytes"].to_numpy(dtype=np.int64)
    table["before_capture_bytes"] = heap - table["held_bytes"].to_numpy(dtype=np.int64)
    table["reserved_bytes"] = reserved
    table["host"] = peak["host"].to_numpy()
    table["allocator"] = peak["allocator"].to_numpy()
    return table[list(ATTRIBUTION_COLUMNS)].astype(ATTRIBUTION_COLUMNS)
