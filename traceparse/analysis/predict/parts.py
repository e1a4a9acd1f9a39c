"""What holds a predicted peak: roles and layers of allocations and HLO buffers.

The rows ``Predictor.breakdown`` groups: each live allocation by its op's
layer and role (``naming.place``), a compiled program's slab opened into its
HLO buffers, and the bytes from before the capture named as the capture's own
breakdown names them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.naming import BEFORE_CAPTURE, OTHER, XLA_SLAB, KnownNames, place, placed
from traceparse.analysis.predict.batch import HLO
from traceparse.analysis.predict.xla import SlabBuffers

BEFORE = "before the capture: kept as captured"
READ_BEFORE = "before the capture: a variable read off its gradient"


def roles_of(
    allocations: pd.DataFrame, known: KnownNames, shapes: dict[str, str]
) -> tuple[np.ndarray, np.ndarray]:
    """Role and layer of every allocation (``naming.place``), each distinct (op,
    type, shape) placed once and its names shared by its allocations."""
    if allocations.empty:
        return np.empty(0, dtype=object), np.empty(0, dtype=object)
    ids, distinct = placed(allocations, known, shapes)
    return _shared(distinct["role"])[ids], _shared(distinct["layer"])[ids]


def _shared(column: pd.Series) -> np.ndarray:
    """``column`` as an object array whose equal values are one object: ``place``
    makes a string per row, millions of copies of a few thousand names."""
    values = column.to_numpy(dtype=object)
    codes, uniques = pd.factorize(values)  # NA (None or NaN) keeps its own object: -1
    out = np.asarray(uniques, dtype=object)[codes] if len(uniques) else values.copy()
    out[codes < 0] = values[codes < 0]
    return out


def buffer_places(
    buffers: pd.DataFrame, known: KnownNames, shapes: dict[str, str]
) -> dict[tuple[object, object, int], tuple[str, str]]:
    """(host, program, logical buffer) -> (layer, role) of the buffer's TF op."""
    if buffers.empty:
        return {}
    rows = pd.DataFrame(
        {
            "op": buffers["tf_op"].astype(object).to_numpy(),
            "op_type": buffers["tf_op_type"].astype(object).to_numpy(),
            "shape": buffers["shape"].astype(object).to_numpy(),
        }
    )
    place(rows, known, shapes)
    keys = zip(
        buffers["host"].astype(object),
        buffers["program"].astype(object),
        buffers["logical_buffer"].astype(int),
        strict=True,
    )
    return {
        (h, p, int(b)): (str(layer), str(role))
        for (h, p, b), layer, role in zip(keys, rows["layer"], rows["role"], strict=True)
    }


def before_rows(
    breakdown: pd.DataFrame,
    key: tuple[object, object],
    rest: int,
    read: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The ``rest`` bytes from before the capture: its named variables or parameters,
    then the variables ``read`` off their gradients (``Predictor.read_before``:
    layer, role, bytes), each largest first while they fit, then one row for the
    remainder."""
    mine = breakdown[
        (breakdown["host"].astype(object) == key[0])
        & (breakdown["allocator"].astype(object) == key[1])
        & breakdown["holder"].isin(("variable", "xla_parameter"))
    ]
    rows = []
    for named, basis in ((mine, BEFORE), (read, READ_BEFORE)):
        if named is None:
            continue
        for row in named.sort_values("bytes", ascending=False).itertuples(index=False):
            size = int(row.bytes)
            if 0 < size <= rest:
                rows.append({"layer": row.layer, "role": row.role, "basis": basis, "bytes": size})
                rest -= size
    rows.append({"layer": BEFORE_CAPTURE, "role": OTHER, "basis": BEFORE, "bytes": rest})
    frame = pd.DataFrame(rows)
    frame["captured_bytes"] = frame["bytes"]
    return frame


def slab_rows(
    slab: SlabBuffers,
    places: dict[tuple[object, object, int], tuple[str, str]],
    batch: int,
    captured_batch: int,
    total: int,
    captured_total: int,
    factors: np.ndarray | None = None,
) -> pd.DataFrame:
    """One slab's ``total`` predicted bytes: each HLO buffer live at its program's
    peak at ``batch`` (its TF op's layer and role; times its ``factors`` where a
    what-if resized them, ``whatif.slab_factors``), and the rest as the slab's
    slack; ``captured_*`` the same at the captured batch."""
    held, _ = slab.at(batch)
    if factors is not None:
        held = held * factors
    captured, _ = slab.at(captured_batch)
    keep = (held > 0) | (captured > 0)
    found = [
        places.get((slab.key[0], slab.key[1], int(b)), (XLA_SLAB, OTHER))
        for b in slab.buffers[keep]
    ]
    frame = pd.DataFrame(
        {
            "layer": [p[0] for p in found],
            "role": [p[1] for p in found],
            "basis": HLO,
            "bytes": np.rint(held[keep]).astype(np.int64),
            "captured_bytes": np.rint(captured[keep]).astype(np.int64),
        }
    )
    slack = {
        "layer": XLA_SLAB,
        "role": OTHER,
        "basis": HLO,
        "bytes": total - int(frame["bytes"].sum()),
        "captured_bytes": captured_total - int(frame["captured_bytes"].sum()),
    }
    return pd.concat([frame, pd.DataFrame([slack])], ignore_index=True)
