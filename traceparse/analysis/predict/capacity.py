"""Will it fit: the largest batch whose predicted peak fits a capacity, and the
predicted peak over a range of batch sizes (for the report's plot).

Numbers only; ``output/predict.py`` says them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal
from weakref import WeakKeyDictionary

import numpy as np
import pandas as pd

from traceparse.analysis.predict.predictor import Predictor

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
    # What changes most from the captured batch to the asked one, by (layer, role):
    # what grows towards a larger batch, what shrinks towards a smaller one.
    growing: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The capture ended in a refused request it never saw go on (``Predictor.
    # unseen_after_failure``): a batch that fits gets past that request, and what
    # the step holds after it is not predicted.
    unseen_after_failure: bool = False
    # The batch the allocator ran out of memory at (``refused_at``: the captured
    # one, where the capture ended in a refused request), else None; a batch as
    # large does not fit, whatever the bytes in use say (``refused_here``).
    refused_batch: int | None = None

    @property
    def refused_here(self) -> bool:
        return self.refused_batch is not None and self.batch_size >= self.refused_batch

    @property
    def fits(self) -> bool:
        return self.over_bytes <= 0 and not self.refused_here

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "growing"}
        out["fits"] = self.fits
        out["refused_here"] = self.refused_here
        out["growing"] = self.growing.to_dict("records")
        return out


def _largest(
    value: Callable[[int], float], capacity: float, start: int = 2, limit: int = MAX_BATCH
) -> int | None:
    """The largest batch n in 1..``limit`` whose ``value(n)`` (a predicted peak, or
    a bound) is at most ``capacity``; None when even 1 does not fit.

    Why a bracket holds the answer: a peak grows with the batch. Every request is
    sized affinely in the batch with a slope of zero or more (``predict_batch``:
    the batch dimension times the rest of the shape; a fit through two captures
    the same), so every chunk of the bounds' replays (``predict_replay.chunks``:
    the request rounded up to the granule, or a whole chunk a fixed factor
    larger) grows with it, and the counter, a sum of chunks, and its peak, a
    maximum of sums, do too. The allocator model places the same chunks, so its
    peak follows, up to what the placement adds (a free chunk a smaller request
    fitted, handed out whole); where that makes it step down, the search still
    ends on a batch that fits beside one that does not, as a bisection does.

    How few replays: besides 1, probes are chosen by the line through the last
    two values (a peak is nearly affine in the batch), so on a real capture the
    answer is bracketed in three or four replays, not the doubling's twenty.
    Each guess is clamped (at most 16 times the last batch that fit while
    bracketing; inside the bracket), and a guess that does not halve the
    bracket is followed by a bisection step, so a poor line costs at most what
    a bisection would."""
    if limit < 1:  # the capture ran out of memory at batch 1
        return None
    known: dict[int, float] = {}

    def at(n: int) -> float:
        if n not in known:
            known[n] = float(value(n))
        return known[n]

    if at(1) > capacity:
        return None
    low, high = 1, 0
    probe = max(2, min(start, limit))
    while not high:  # bracketing: every probe so far fits
        if at(probe) > capacity:
            high = probe
            break
        if probe >= limit:
            return limit
        previous, low = low, probe
        rise = (at(low) - at(previous)) / (low - previous)
        guess = low + (capacity - at(low)) / rise if rise > 0 else float(16 * low)
        # The first batch past the line's crossing: it should not fit.
        probe = min(limit, 16 * low, max(low + 1, math.floor(guess) + 1))
    slow = False
    while high - low > 1:
        width = high - low
        if slow:
            probe = (low + high) // 2
        else:
            share = (capacity - at(low)) / (at(high) - at(low))
            probe = min(high - 1, max(low + 1, low + math.floor(share * width)))
        if at(probe) <= capacity:
            low = probe
        else:
            high = probe
        slow = 2 * (high - low) > width
    return low


# Told of each batch replayed (batches done, budget or None) where set: a command
# on a terminal sets it to draw a progress bar (analyses write nothing).
REPLAY_PROGRESS: ContextVar[Callable[[int, int | None], None] | None] = ContextVar(
    "REPLAY_PROGRESS", default=None
)


class Replays:
    """What a search asks of a Predictor, each batch replayed once: the allocator
    model's peak of every (host, allocator) from one replay per batch, the bounds
    (``Predictor.extremes``) from one pair of counter replays per batch, and the
    full ``Predictor.bounds`` where a curve shows the batch (which fills both).

    ``budget``: how many batches may be replayed (None: no limit); past it a
    search stops, and ``left_out`` counts what it did not replay. ``progress``:
    called with (batches replayed, budget or None) after each one (a terminal's
    progress bar; by default ``REPLAY_PROGRESS``'s)."""

    def __init__(
        self,
        predictor: Predictor,
        budget: int | None = None,
        progress: Callable[[int, int | None], None] | None = None,
    ) -> None:
        self.predictor = predictor
        self.budget = budget
        self.progress = progress if progress is not None else REPLAY_PROGRESS.get()
        self.replayed = 0
        self.left_out = 0
        self._points: dict[int, dict[Key, int]] = {}
        self._extremes: dict[int, dict[Key, tuple[int, int]]] = {}
        self._bounds: dict[int, dict[Key, tuple[int, int, int, int]]] = {}

    def can(self, batch: int, bounds: bool = False) -> bool:
        """Whether ``batch`` is replayed already (as asked) or the budget has room."""
        done = batch in self._bounds or (not bounds and batch in self._points)
        if done or batch == self.predictor.batch or self.budget is None:
            return True
        return self.replayed < self.budget

    def _spend(self) -> None:
        self.replayed += 1
        if self.progress is not None:
            self.progress(self.replayed, self.budget)

    def point(self, batch: int) -> dict[Key, int]:
        if batch in self._bounds:
            return {key: found[1] for key, found in self._bounds[batch].items()}
        if batch not in self._points:
            if not self.can(batch):
                raise _OutOfBudget
            run, _ = self.predictor.point(batch)
            self._points[batch] = {key: run.peak(key)[1] for key in self.predictor.rows}
            if batch != self.predictor.batch:
                self._spend()
        return self._points[batch]

    def extremes(self, batch: int) -> dict[Key, tuple[int, int]]:
        if batch not in self._extremes:
            self._extremes[batch] = self.predictor.extremes(batch)
        return self._extremes[batch]

    def bounds(self, batch: int) -> dict[Key, tuple[int, int, int, int]]:
        if batch not in self._bounds:
            if not self.can(batch, bounds=True):
                raise _OutOfBudget
            self._bounds[batch] = self.predictor.bounds(batch)
            if batch != self.predictor.batch:
                self._spend()
        return self._bounds[batch]


class _OutOfBudget(Exception):
    """A search asked for a batch past its replay budget."""


_SHARED: WeakKeyDictionary[Predictor, Replays] = WeakKeyDictionary()


def replays_of(predictor: Predictor) -> Replays:
    """One ``Replays`` per Predictor (no budget): the capacity answers of its
    allocators share their replays (one replay serves every allocator)."""
    if predictor not in _SHARED:
        _SHARED[predictor] = Replays(predictor)
    return _SHARED[predictor]


def capacity_fit(predictor: Predictor, key: Key, capacity: int, batch: int) -> Fit:
    """The capacity answer for ``key``: the largest batch that fits ``capacity``
    (by the prediction, and by each bound), and the asked ``batch`` against it.

    Three searches (``_largest``), each on one peak that grows with the batch:
    the allocator model's, the high bound's and the low bound's. The batches
    that fit by the model and the high bound both are those up to the smaller
    answer (fits whatever the allocator does); by the model or the low bound,
    those up to the larger (beyond it, it cannot fit). The bounds are cheap
    replays of the counter; the allocator model runs only at the model's
    probes and the asked batch."""
    replays = replays_of(predictor)

    def model(n: int) -> int:
        return replays.point(n)[key]

    def extreme(n: int) -> tuple[int, int]:
        return replays.extremes(n)[key]

    start = predictor.batch
    # A capture that ran out of memory shows its batch does not fit, even where the
    # bytes in use say it would (the allocator's free memory in pieces too small
    # for the request): the searches stop below it, as every request is as large
    # or larger at a larger batch (``_largest``).
    below = below_refused(predictor, key)
    largest = model_largest(predictor, key, capacity, start, replays)
    under_high = _largest(lambda n: extreme(n)[1], capacity, start, below)
    under_low = _largest(lambda n: extreme(n)[0], capacity, start, below)
    sure = None if largest is None or under_high is None else min(largest, under_high)
    possible = max((n for n in (largest, under_low) if n is not None), default=None)
    low, high = extreme(batch)
    point = model(batch)  # last: the breakdown below reuses its replay
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
        unseen_after_failure=predictor.unseen_after_failure(key),
        refused_batch=refused_at(predictor, key),
    )


def refused_at(predictor: Predictor, key: Key) -> int | None:
    """The batch ``key`` ran out of memory at (``Predictor.refused_batch``), else None."""
    return predictor.refused_batch(key)


def below_refused(predictor: Predictor, key: Key) -> int:
    """The largest batch a search for ``key`` may answer: below the batch it ran out
    of memory at (``refused_at``), else ``MAX_BATCH``."""
    return (refused_at(predictor, key) or MAX_BATCH + 1) - 1


def model_largest(
    predictor: Predictor, key: Key, capacity: int, start: int, replays: Replays | None = None
) -> int | None:
    """The largest batch whose allocator-model peak of ``key`` fits ``capacity``
    (``_largest`` from ``start``, below a refused batch), on ``replays`` (default:
    the predictor's shared ones, ``replays_of``)."""
    found = replays if replays is not None else replays_of(predictor)
    return _largest(partial_point(found, key), capacity, start, below_refused(predictor, key))


def growing_parts(predictor: Predictor, key: Key, batch: int) -> pd.DataFrame:
    """Per (layer, role) at the predicted peak: bytes at ``batch``, at the captured
    size, and the growth (negative: shrinking). Towards a larger batch the rows that
    grow, largest growth first; towards a smaller one those that shrink, most first
    (a chunk's rounding moves a few bytes the other way: no answer to either)."""
    table = predictor.breakdown(batch)
    mine = table[
        (table["host"].astype(object) == key[0]) & (table["allocator"].astype(object) == key[1])
    ]
    grouped = mine.groupby(["layer", "role"], dropna=False, sort=False)[
        ["bytes", "captured_bytes"]
    ].sum()
    grouped["growth_bytes"] = grouped["bytes"] - grouped["captured_bytes"]
    sign = 1 if batch >= predictor.batch else -1
    grouped = grouped[sign * grouped["growth_bytes"] > 0]
    grouped = grouped.sort_values("growth_bytes", ascending=sign < 0)
    return grouped.reset_index()


def curve(predictor: Predictor, key: Key, batches: list[int]) -> pd.DataFrame:
    """The predicted peak (and bounds) of ``key`` at each of ``batches``."""
    replays = replays_of(predictor)
    rows = []
    for n in batches:
        _, point, low, high = replays.bounds(n)[key]
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


def report_batches(captured: int) -> list[int]:
    """Batch sizes the report predicts at: the captured one times 2**k, k in REPORT_SPAN."""
    first, last = REPORT_SPAN
    return sorted({max(1, round(captured * 2.0**k)) for k in range(first, last + 1)})


# The report replays at most this many events in all (batches x the capture's
# events) beyond the capture itself: on a large capture the curve's far batches
# and the search past them are left out (and the report says so) rather than
# letting its predictions take many times what reading the capture does.
REPORT_REPLAY_EVENTS = 8_000_000
# ... but always a couple of batches either side of the captured one.
REPORT_MIN_BATCHES = 2


def report_budget(events: int) -> int | None:
    """How many batch sizes the report replays a capture of ``events`` memory
    events at; None: no limit (the whole curve and search take under the cap)."""
    if events * 32 <= REPORT_REPLAY_EVENTS:
        return None
    return max(REPORT_MIN_BATCHES, REPORT_REPLAY_EVENTS // max(events, 1))


def report_curves(
    predictor: Predictor,
    budget: int | Literal["auto"] | None = "auto",
    progress: Callable[[int, int | None], None] | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (host, allocator): the predicted peak (and bounds) over ``report_batches``
    and, where the capture gives a capacity, at the largest batch that fits it (as
    ``capacity_fit`` finds it) and at each doubling on the way there. Plain
    values and a frame, the record's ``prediction``. One replay per batch serves
    every allocator and every use (``Replays``); the search for the largest
    replays the predicted sizes only.

    ``budget``: at most this many batch sizes replayed (by default
    ``report_budget`` of the capture's events; None: no limit); the
    curve's batches nearest the captured one come first, then the search, then
    the doublings on the way to the answer. What it leaves out is named in the
    record's ``left_out`` (batch sizes, whether the search ran, the events),
    present only where something was."""
    events = len(predictor.base.timeline)
    replays = Replays(predictor, report_budget(events) if budget == "auto" else budget, progress)
    batches = report_batches(predictor.batch)
    skipped: set[int] = set()
    for n in sorted(batches, key=lambda n: abs(math.log(n / predictor.batch))):
        try:
            replays.bounds(n)
        except _OutOfBudget:
            skipped.add(n)
    captured = {
        (row.host, row.allocator): row for row in predictor.base.peak.itertuples(index=False)
    }
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key in predictor.rows:
        row = captured.get(key)
        capacity = None if row is None or pd.isna(row.capacity_bytes) else int(row.capacity_bytes)
        largest, searched = None, True
        if capacity is not None:
            try:
                largest = model_largest(predictor, key, capacity, predictor.batch, replays)
            except _OutOfBudget:
                searched = False
        wanted = list(batches)
        if largest is not None and largest < MAX_BATCH:
            # On to the largest that fits, doubling: the plot follows the prediction.
            step = batches[-1] * 2
            while step < largest:
                wanted.append(step)
                step *= 2
            wanted = sorted({*wanted, largest})
        rows, missing = [], []
        for n in wanted:
            try:
                _, peak, low, high = replays.bounds(n)[key]
            except _OutOfBudget:
                missing.append(n)
                continue
            rows.append({"batch_size": n, "peak_bytes": peak, "low_bytes": low, "high_bytes": high})
        # The search replayed it: the model's peak there is the curve's.
        largest_peak = None if largest is None else replays.point(largest)[key]
        entry: dict[str, Any] = {
            "captured_batch": predictor.batch,
            "captured_peak_bytes": None if row is None else int(row.in_use_bytes),
            "capacity_bytes": capacity,
            "largest_batch": largest,
            "largest_peak_bytes": largest_peak,
            "curve": pd.DataFrame(rows, columns=list(CURVE_COLUMNS)),
            # What was held when the capture started, kept at every size: the
            # model's variables in it and the evidence of earlier models.
            "held": dict(predictor.held_columns(key)),
            # The request the capture ended in, asked again at every size (``failed``).
            "failed_request": (
                predictor.failed[key][0].label() if key in predictor.failed else None
            ),
            "unseen_after_failure": predictor.unseen_after_failure(key),
        }
        if missing or not searched:
            entry["left_out"] = {
                "batch_sizes": missing,
                "searched": searched,
                "events": events,
                "replayed": replays.replayed,
            }
        out[(str(key[0]), str(key[1]))] = entry
    return out


def partial_point(replays: Replays, key: Key) -> Callable[[int], int]:
    """The allocator model's peak of ``key`` at a batch, from ``replays``."""
    return lambda n: replays.point(n)[key]
