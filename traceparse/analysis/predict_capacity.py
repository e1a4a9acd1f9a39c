"""Will it fit: the largest batch whose predicted peak fits a capacity, and the
predicted peak over a range of batch sizes (for the report's plot).

Numbers only; ``output/predict.py`` says them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.predict import Predictor

Key = tuple[object, object]
# The largest batch the search tries.
MAX_BATCH = 1 << 24


@dataclass
class Fit:
    """The capacity answer for one (host, allocator)."""

    host: object
    allocator: object
    capacity_bytes: int
    # The largest batch whose predicted peak fits, with that peak (None: not even 1).
    largest: int | None
    largest_peak_bytes: int | None
    # The largest batch whose high bound fits (fits whatever the allocator does).
    largest_sure: int | None
    # The largest batch whose low bound fits (beyond it, it cannot fit).
    largest_possible: int | None
    # At the asked batch: predicted peak, bounds, and by how much it misses.
    batch_size: int
    peak_bytes: int
    low_bytes: int
    high_bytes: int
    over_bytes: int
    # What grows from the captured batch to the asked one, by (layer, role).
    growing: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def fits(self) -> bool:
        return self.over_bytes <= 0

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "growing"}
        out["fits"] = self.fits
        out["growing"] = self.growing.to_dict("records")
        return out


def _peaks(predictor: Predictor, batch: int, key: Key) -> tuple[int, int, int]:
    _, point, low, high = predictor.bounds(batch)[key]
    return point, low, high


def _largest(fits: Any, limit: int = MAX_BATCH) -> int | None:
    """The largest batch n >= 1 with ``fits(n)`` (peaks grow with the batch: doubling,
    then bisection); None when even 1 does not fit."""
    if not fits(1):
        return None
    low, high = 1, 2
    while high < limit and fits(high):
        low, high = high, high * 2
    if high >= limit:
        return limit if fits(limit) else _bisect(fits, low, limit)
    return _bisect(fits, low, high)


def _bisect(fits: Any, low: int, high: int) -> int:
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


def capacity_fit(predictor: Predictor, key: Key, capacity: int, batch: int) -> Fit:
    """The capacity answer for ``key``: the largest batch that fits ``capacity``
    (by the prediction, and by each bound), and the asked ``batch`` against it."""
    cache: dict[int, tuple[int, int, int]] = {}

    def peaks(n: int) -> tuple[int, int, int]:
        if n not in cache:
            cache[n] = _peaks(predictor, n, key)
        return cache[n]

    largest = _largest(lambda n: peaks(n)[0] <= capacity)
    sure = _largest(lambda n: peaks(n)[2] <= capacity)
    possible = _largest(lambda n: peaks(n)[1] <= capacity)
    point, low, high = peaks(batch)
    return Fit(
        host=key[0],
        allocator=key[1],
        capacity_bytes=capacity,
        largest=largest,
        largest_peak_bytes=None if largest is None else peaks(largest)[0],
        largest_sure=sure,
        largest_possible=possible,
        batch_size=batch,
        peak_bytes=point,
        low_bytes=min(low, point),
        high_bytes=max(high, point),
        over_bytes=point - capacity,
        growing=growing_parts(predictor, key, batch),
    )


def growing_parts(predictor: Predictor, key: Key, batch: int) -> pd.DataFrame:
    """Per (layer, role) at the predicted peak: bytes at ``batch``, at the captured
    size, and the growth; largest growth first, only rows that grow."""
    table = predictor.breakdown(batch)
    mine = table[
        (table["host"].astype(object) == key[0]) & (table["allocator"].astype(object) == key[1])
    ]
    grouped = mine.groupby(["layer", "role"], dropna=False, sort=False)[
        ["bytes", "captured_bytes"]
    ].sum()
    grouped["growth_bytes"] = grouped["bytes"] - grouped["captured_bytes"]
    grouped = grouped[grouped["growth_bytes"] > 0].sort_values("growth_bytes", ascending=False)
    return grouped.reset_index()


def curve(predictor: Predictor, key: Key, batches: list[int]) -> pd.DataFrame:
    """The predicted peak (and bounds) of ``key`` at each of ``batches``."""
    rows = []
    for n in batches:
        point, low, high = _peaks(predictor, n, key)
        rows.append(
            {
                "batch_size": n,
                "peak_bytes": point,
                "low_bytes": min(low, point),
                "high_bytes": max(high, point),
            }
        )
    return pd.DataFrame(rows)


def plot_batches(captured: int, *others: int | None) -> list[int]:
    """Batch sizes to draw: from a quarter of the smallest asked to twice the largest."""
    known = [captured, *[o for o in others if o]]
    low, high = max(1, min(known) // 4), max(known) * 2
    points = np.unique(np.geomspace(low, high, num=24).round().astype(int))
    return sorted({*points.tolist(), *known})
