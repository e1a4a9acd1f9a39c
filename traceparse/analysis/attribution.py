"""Where an allocator's bytes at its peak went: one row per allocator, parts summing exactly.

Each allocation live at the peak holds its chunk (``allocated_bytes``), which
splits into

- ``shape_explained_bytes``: what its shape x dtype accounts for (capped at the
  request, so a part is never negative);
- ``shape_unknown_bytes``: what TensorFlow asked for where it recorded no
  shape (temp buffers, a Keras optimizer slot's initializer): no estimate, so
  neither explained nor "beyond" one;
- ``unexplained_request_bytes``: the rest of what TensorFlow asked for:
  dtypes without a fixed size (a string tensor's 24-byte ``tstring``
  headers), requests larger than the shape;
- ``padding_bytes``: what the allocator added (rounding, unsplit chunks).

An XLA program's temp slab linked to its program (``allocations.xla_program``)
has no shape of its own; its request splits instead into

- ``xla_buffer_bytes``: the bytes the HLO buffers live at the program's own
  peak cover (each a shape x dtype, see ``analysis/xla.py``);
- ``xla_slack_bytes``: the rest of the slab.

The allocator's heap counter at the peak minus what the live allocations hold
is memory allocated before the capture started and still held. When the
capture has a variable inventory (``Profile.variables``), ``variable_bytes`` is
the part of it that the inventoried variables on that allocator account for
(shape x dtype), and ``before_capture_bytes`` keeps the rest, whose owner is
unknown. A variable counts when

- it was alive both when the profiler started and when it stopped (one made
  during the capture has its own allocation event; one dropped may have been
  freed before the peak);
- its allocator is the allocator's (``traceparse.tables.variables``);
- its shape x dtype is known; and, on a CPU allocator (``mklcpu``, ``cpu``),
  it is at least 256 KiB: smaller requests come from a pool that the allocator
  never records, so they are not in its counter (``variables.traced``);
- no allocation made during the capture holds its bytes at the peak (a buffer
  that replaced it, ``analysis/variable_match.py``): then that allocation is
  the variable, and it is not counted twice.

Variables count whole, largest first, while they fit in what was allocated
before the capture (``analysis/breakdown.py``): the sum of the variables can
exceed it when some were reallocated during the capture. Without an
inventory the column is NA and named in the table's ``attrs["not_measured"]``;
reports leave out such parts, so a capture without an inventory reports
exactly as before.

Without an inventory, the entry parameters of the XLA programs that ran during
the capture name part of it instead: ``xla_parameter_bytes`` (the rule is in
``analysis/xla_params.py``), counted like ``variable_bytes``. Parameters are not
certainly variables (a batch made before the capture, a tensor held by Python
and passed in), so they get their own part. With an inventory, or without a
program that ran, the column is NA (not measured). ``reserved_bytes`` is the allocator's
reservation counter. The table pivots ``Profile.breakdown`` (one row per holder, each in one
part), so the parts sum to ``in_use_bytes`` by construction, and a negative
``before_capture_bytes`` means the capture lost frees.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import held_bytes, requested_or_held
from traceparse.tables.contracts import declare
from traceparse.tables.variables import traced

# The parts, in the order a report lists them.
PARTS = [
    "shape_explained_bytes",
    "xla_buffer_bytes",
    "xla_slack_bytes",
    "shape_unknown_bytes",
    "unexplained_request_bytes",
    "padding_bytes",
    "variable_bytes",
    "xla_parameter_bytes",
    "before_capture_bytes",
    "reserved_bytes",
]
# Parts measured only when their source is there: variable_bytes needs an
# inventory, xla_parameter_bytes an XLA program that ran and no inventory.
OPTIONAL_PARTS = ("variable_bytes", "xla_parameter_bytes")
NOT_MEASURED = "not_measured"

ATTRIBUTION = declare(
    "attribution",
    ["host", "allocator", "in_use_bytes", *PARTS, "live_allocations"],
    ["allocator", *OPTIONAL_PARTS],
)
ATTRIBUTION_COLUMNS = ATTRIBUTION.dtypes


def split_bytes(allocations: pd.DataFrame, xla_covered: pd.Series | None = None) -> pd.DataFrame:
    """Per allocation: its explained, XLA, shape-unknown, unexplained-request and padding
    bytes (int64, exact).

    ``xla_covered``: for linked XLA temp slabs (by row), the bytes HLO buffers cover.
    A linked slab has no shape of its own: its request splits into XLA buffers and
    slack, never into "shape unknown"."""
    held = held_bytes(allocations)
    requested = requested_or_held(allocations)
    estimated = allocations["estimated_bytes"].to_numpy(dtype=np.int64, na_value=0)
    explained = np.clip(np.minimum(estimated, requested), 0, None)
    rest = requested - explained
    slab = np.zeros(len(allocations), dtype=bool)
    xla_buffer = np.zeros(len(allocations), dtype=np.int64)
    xla_slack = np.zeros(len(allocations), dtype=np.int64)
    if xla_covered is not None and len(xla_covered):
        slab = allocations.index.isin(xla_covered.index)
        covered = xla_covered.reindex(allocations.index).fillna(0).to_numpy(dtype=np.int64)
        xla_buffer = np.where(slab, np.clip(covered, 0, rest), 0)
        xla_slack = np.where(slab, rest - xla_buffer, 0)
    no_shape = allocations["shape"].isna().to_numpy(dtype=bool)
    unknown = np.where(no_shape & ~slab, rest, 0)
    return pd.DataFrame(
        {
            "shape_explained_bytes": explained,
            "xla_buffer_bytes": xla_buffer,
            "xla_slack_bytes": xla_slack,
            "shape_unknown_bytes": unknown,
            "unexplained_request_bytes": rest - xla_buffer - xla_slack - unknown,
            "padding_bytes": held - requested,
            "held_bytes": held,
        },
        index=allocations.index,
    )


def counted_variables(variables: pd.DataFrame) -> np.ndarray:
    """Which variables count against what was allocated before the capture (the
    rule in the module docstring), as a boolean mask."""
    recorded = (
        variables["traced"]
        if "traced" in variables
        else traced(variables["allocator"], variables["estimated_bytes"])
    )
    return (
        variables["at_start"].to_numpy(dtype=bool)
        & variables["at_stop"].to_numpy(dtype=bool)
        & recorded.to_numpy(dtype=bool)
    )


def attribution_table(
    peak: pd.DataFrame, breakdown: pd.DataFrame, measured: tuple[str, ...] = ()
) -> pd.DataFrame:
    """One row per peak row: ``breakdown.bytes`` summed by ``part``.

    ``measured`` names the optional parts whose source was there (an
    inventory, XLA programs that ran); the others are NA (a CSV or Parquet
    export keeps that) and listed in ``attrs["not_measured"]``."""
    table = _pivot(peak, breakdown)
    unmeasured = [p for p in OPTIONAL_PARTS if p not in measured]
    for part in unmeasured:  # NA, not 0: the capture had nothing to measure it with
        table[part] = pd.array([pd.NA] * len(table), dtype="Int64")
    table.attrs[NOT_MEASURED] = unmeasured
    return table


def _pivot(peak: pd.DataFrame, breakdown: pd.DataFrame) -> pd.DataFrame:
    if peak.empty:
        return ATTRIBUTION.empty()
    keys = ["host", "allocator"]
    rows = breakdown.astype({"host": object, "allocator": object, "part": object})
    sums = rows.groupby([*keys, "part"], dropna=False, sort=False)["bytes"].sum()
    # A key of only NA comes out of a groupby as float: merge on objects.
    as_object = {"host": object, "allocator": object}
    table = sums.astype("int64").unstack("part", fill_value=0).reset_index().astype(as_object)
    inside = rows[rows["allocation"].notna().to_numpy(dtype=bool)]
    count = inside.groupby(keys, dropna=False, sort=False)["allocation"].nunique()
    count = count.rename("live_allocations").reset_index().astype(as_object)
    table = table.merge(count, on=keys, how="left")
    table = peak[keys].astype(object).merge(table, on=keys, how="left")
    for part in [*PARTS, "live_allocations"]:
        table[part] = table[part].fillna(0).astype("int64") if part in table else 0
    table["in_use_bytes"] = peak["in_use_bytes"].to_numpy(dtype=np.int64)
    table["host"] = peak["host"].to_numpy()
    table["allocator"] = peak["allocator"].to_numpy()
    columns = ATTRIBUTION_COLUMNS
    return table[list(columns)].astype(columns)
