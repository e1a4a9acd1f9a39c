"""Will it fit: the largest batch whose predicted peak fits a capacity, and the
predicted peak over a range of batch sizes (for the report's plot).

Numbers only; ``output/predict.py`` says them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
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
    points: dict[int, int] = {}
    extremes: dict[int, tuple[int, int]] = {}

    def model(n: int) -> int:
        if n not in points:
            points[n] = predictor.point(n)[0].peak(key)[1]
        return points[n]

    def extreme(n: int) -> tuple[int, int]:
        if n not in extremes:
            extremes[n] = predictor.extremes(n)[key]
        return extremes[n]

    def peaks(n: int) -> tuple[int, int, int]:
        low, high = extreme(n)
        return model(n), min(low, model(n)), max(high, model(n))

    # The bounds hold the predicted peak: a bound decides alone where it can, and
    # the allocator model runs only where it must (it is the costly part).
    largest = _largest(lambda n: model(n) <= capacity)
    sure = _largest(lambda n: extreme(n)[1] <= capacity and model(n) <= capacity)
    possible = _largest(lambda n: extreme(n)[0] <= capacity or model(n) <= capacity)
    point, low, high = peaks(batch)
    return Fit(
        host=key[0],
        allocator=key[1],
        capacity_bytes=capacity,
        largest=largest,
        largest_peak_bytes=None if largest is None else model(largest),
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


# The report's range around the captured batch: a quarter of it to eight times it.
REPORT_SPAN = (-2, 3)
# The columns of a report curve.
CURVE_COLUMNS = ("batch_size", "peak_bytes", "low_bytes", "high_bytes")


def _fits(point: Any, key: Key, capacity: int, n: int) -> bool:
    return bool(point(n, key) <= capacity)


def report_batches(captured: int) -> list[int]:
    """Batch sizes the report predicts at: the captured one times 2**k, k in REPORT_SPAN."""
    first, last = REPORT_SPAN
    return sorted({max(1, round(captured * 2.0**k)) for k in range(first, last + 1)})


def report_curves(predictor: Predictor) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (host, allocator): the predicted peak (and bounds) over ``report_batches``
    and, where the capture gives a capacity, at the largest batch that fits it (as
    ``capacity_fit`` finds it) and at each doubling on the way there. Plain
    values and a frame, the record's ``prediction``. One replay per batch serves
    every allocator; the search for the largest replays the predicted sizes only."""
    bounds: dict[int, dict[Key, tuple[int, int, int, int]]] = {}
    points: dict[int, dict[Key, int]] = {}

    def at(n: int) -> dict[Key, tuple[int, int, int, int]]:
        if n not in bounds:
            bounds[n] = predictor.bounds(n)
        return bounds[n]

    def point(n: int, key: Key) -> int:
        if n in bounds:
            return bounds[n][key][1]
        if n not in points:
            run, _ = predictor.point(n)
            points[n] = {k: run.peak(k)[1] for k in predictor.rows}
        return points[n][key]

    batches = report_batches(predictor.batch)
    for n in batches:
        at(n)
    captured = {
        (row.host, row.allocator): row for row in predictor.base.peak.itertuples(index=False)
    }
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key in predictor.rows:
        row = captured.get(key)
        capacity = None if row is None or pd.isna(row.capacity_bytes) else int(row.capacity_bytes)
        largest = None
        if capacity is not None:
            largest = _largest(partial(_fits, point, key, capacity))
        shown = list(batches)
        if largest is not None and largest < MAX_BATCH:
            # On to the largest that fits, doubling: the plot follows the prediction.
            step = batches[-1] * 2
            while step < largest:
                shown.append(step)
                step *= 2
            shown = sorted({*shown, largest})
        rows = []
        for n in shown:
            _, peak, low, high = at(n)[key]
            rows.append({"batch_size": n, "peak_bytes": peak, "low_bytes": low, "high_bytes": high})
        out[(str(key[0]), str(key[1]))] = {
            "captured_batch": predictor.batch,
            "captured_peak_bytes": None if row is None else int(row.in_use_bytes),
            "capacity_bytes": capacity,
            "largest_batch": largest,
            "largest_peak_bytes": None if largest is None else at(largest)[key][1],
            "curve": pd.DataFrame(rows, columns=list(CURVE_COLUMNS)),
        }
    return out
