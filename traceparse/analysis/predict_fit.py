"""Two captures of one program at two batch sizes: each request fitted in the batch.

Allocations are matched by (host, allocator, step, op, occurrence of that op
in that step) and each one's request ``r`` fitted as ``r(N) = a + b N``
through its two points: exact for a program whose sizes are affine in the
batch. An allocation found in one capture only keeps its one-capture sizing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import requested_or_held
from traceparse.analysis.predict_batch import FITTED, Sizing
from traceparse.errors import UsageError

_KEY = ["host", "allocator", "step", "op", "occurrence"]


def match_keys(allocations: pd.DataFrame) -> pd.DataFrame:
    """The matching key of every allocation (its row order kept)."""
    keys = pd.DataFrame(
        {
            "host": allocations["host"].astype(object).to_numpy(),
            "allocator": allocations["allocator"].astype(object).to_numpy(),
            "step": allocations["step"].to_numpy(dtype=np.float64, na_value=-1.0),
            "op": allocations["op"].astype(object).fillna("").to_numpy(),
        }
    )
    keys["occurrence"] = keys.groupby(["host", "allocator", "step", "op"], sort=False).cumcount()
    return keys


def fit_two(
    sizing: Sizing,
    base: object,
    base_batch: int,
    other: object,
    other_batch: int,
    requested: np.ndarray,
) -> None:
    """Fit every allocation of ``base`` found in ``other`` (in place)."""
    if other_batch == base_batch:
        raise UsageError(
            f"both captures are at batch {base_batch} (read off their shapes or given), and "
            "a fit needs two batch sizes: give --with a capture at another batch size, or "
            "correct --from-batch / --with-batch"
        )
    mine = match_keys(base.allocations)  # type: ignore[attr-defined]
    mine["row"] = np.arange(len(mine))
    theirs = match_keys(other.allocations)  # type: ignore[attr-defined]
    theirs["other_requested"] = requested_or_held(other.allocations).astype(np.float64)  # type: ignore[attr-defined]
    both = mine.merge(theirs, on=_KEY, how="inner")
    rows = both["row"].to_numpy(dtype=np.int64)
    r1 = requested[rows]
    r2 = both["other_requested"].to_numpy(dtype=np.float64)
    slope = (r2 - r1) / (other_batch - base_batch)
    sizing.per_example[rows] = slope
    sizing.fixed[rows] = r1 - slope * base_batch
    sizing.alt_fixed[rows], sizing.alt_per_example[rows] = sizing.fixed[rows], slope
    sizing.basis[rows] = FITTED
