"""A what-if replayed: ``WhatIf``, a Predictor of the changed program (its
allocations resized by the rules, placed by the allocator model), and the
parts at its peak with the change's own bytes by role (``changed_parts``)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.naming import (
    ACTIVATION,
)
from traceparse.analysis.predict import BEFORE, READ_BEFORE, Predictor, Replayed
from traceparse.analysis.predict.batch import dims
from traceparse.analysis.whatif.change import Change, parse_change
from traceparse.analysis.whatif.facts import Facts, Key, facts_of
from traceparse.analysis.whatif.rules import Resizing, failed_request_factors, resizing


class _Resized:
    """A ``Sizing`` with every request multiplied by the what-if's factors."""

    def __init__(self, inner: Any, change: Resizing) -> None:
        self._inner = inner
        self._change = change

    def at(self, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        point, low, high = self._inner.at(batch)
        c = self._change
        lo = np.minimum(low * c.low, point * c.low)
        hi = np.maximum(high * c.high, point * c.high)
        return point * c.point, lo, hi

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class WhatIf(Predictor):
    """A Predictor of the changed program: ``base``'s allocations resized by the
    change, replayed through its allocator model; bytes the change adds for the
    whole step are added to every event's counter."""

    change: Change
    resized: Resizing
    facts: Facts
    _sized: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]

    @classmethod
    def of(cls, base: Predictor, change: Change, facts: Facts | None = None) -> WhatIf:
        base.histories  # noqa: B018 - calibrate once, shared by every copy
        made = copy.copy(base)
        made.__class__ = cls
        assert isinstance(made, WhatIf)
        made.change = change
        made.facts = facts if facts is not None else facts_of(base)
        made.resized = resizing(base, change, made.facts)
        made._sized = {}
        made._high_sized = None
        made.sizing = _Resized(base.sizing, made.resized)  # type: ignore[assignment]
        made._runs = {}
        return made

    def sizes(self, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``Predictor.sizes``, made once per batch: ``bounds`` asks three times (the
        point, the low replay, the extremes), and each is three passes of ``chunks``
        over every allocation (read-only arrays to every caller)."""
        if batch not in self._sized:
            self._sized[batch] = super().sizes(batch)
        return self._sized[batch]

    def _extra(self, key: Key, which: int) -> float:
        return self.resized.extra.get(key, [0.0, 0.0, 0.0])[which]

    def dropped_held(self, key: Key) -> float:
        """Bytes held before the capture that a fresh process does not hold
        (``fresh_process``), where one is asked."""
        return (
            float(self.facts.earlier[key][0])
            if self.change.fresh and key in self.facts.earlier
            else 0.0
        )

    def failed_chunks(self, batch: int) -> dict[Key, tuple[int, int, int]]:
        """The base's failed requests (``Predictor.failed_chunks``) under the change
        (``rules.failed_request_factors``: only the precision moves them)."""
        found = super().failed_chunks(batch)
        out = {}
        for key, sizes in found.items():
            request = self.failed[key][0]
            _, role = self.failed_place(key)
            weighty = dims(request.shape) in self.weights
            point, low, high = failed_request_factors(request.dtype, role, weighty, self.change)
            out[key] = (round(sizes[0] * point), round(sizes[1] * low), round(sizes[2] * high))
        return out

    def refused_batch(self, key: Key) -> int | None:
        """None: the capture's refusal was the captured program's, not the changed one's."""
        return None

    def change_columns(self) -> dict[str, str | None]:
        return {
            "change": self.change.label(),
            "assumptions": "\n".join(self.resized.notes) or None,  # one a line
        }

    def _point(self, batch: int) -> tuple[Replayed, np.ndarray]:
        """At the captured batch: the captured counter with each allocation's change
        (its chunk at the new request, ``predict_replay.chunks``), as a prediction
        there is the capture itself; the allocator model's placement is not asked
        to explain what the capture already shows. Elsewhere: the allocator model
        at the new sizes, as for a batch-size prediction. (``Predictor.point`` adds
        a failed request, at the batch's size: the change's rules resize the
        capture's allocations, and the request is none of them.)"""
        if batch == self.batch:
            held, _, _ = self.sizes(batch)
            found = self._replayed(held)
            counters = {k: v + self._added(k) for k, v in found.bytes.items()}
            return Replayed(found.events, counters), held
        runs = self.runs(batch)
        held = np.zeros(len(self.held))
        for key, simulated in runs.items():
            mine = self._mine(key)
            held[mine] = simulated.chunks[mine]
        counters = {key: run.in_use + self._added(key) for key, run in runs.items()}
        return Replayed(dict(self.rows), counters), held

    def _added(self, key: Key) -> np.ndarray | float:
        """Bytes the change adds after each of ``key``'s events: for the whole run,
        and while a recomputed layer's tensors are live (``Resizing.backward``)."""
        extra = self._extra(key, 0)
        spans = self.resized.backward.get(key)
        if spans is None or not len(spans):
            return extra
        rows = self.rows[key]
        delta = np.zeros(len(rows) + 1)
        np.add.at(delta, np.searchsorted(rows, spans[:, 0]), spans[:, 2])
        np.add.at(delta, np.searchsorted(rows, spans[:, 1], side="right"), -spans[:, 2])
        return extra + np.cumsum(delta)[:-1]

    def extremes(
        self, batch: int, runs: tuple[Replayed, Replayed] | None = None
    ) -> dict[Key, tuple[int, int]]:
        found = super().extremes(batch, runs)
        return {
            k: (round(lo + self._extra(k, 1)), round(hi + self._extra(k, 2)))
            for k, (lo, hi) in found.items()
        }

    def _parts(
        self, key: Key, event: int, peak: int, sizes: np.ndarray, batch: int
    ) -> pd.DataFrame:
        """The base's parts at the counter without the change's own bytes (so what
        was held before the capture is split as the capture held it), then those
        bytes by role (``changed_parts``): the rules' whole-run bytes
        (``Resizing.by_role``) and a recomputed layer's tensors live at ``event``."""
        changed = {r: b for r, b in self.resized.by_role.get(key, {}).items() if round(b)}
        again = self._recomputed(key, event)
        if again:
            changed[ACTIVATION] = changed.get(ACTIVATION, 0.0) + again
        parts = super()._parts(key, event, peak - round(sum(changed.values())), sizes, batch)
        if parts.empty or not changed:
            return parts
        return changed_parts(parts, changed, f"what-if: {self.change.label()}")

    def slab_factors(self, row: int) -> np.ndarray | None:
        return self.resized.slabs.get(row)

    def _recomputed(self, key: Key, event: int) -> float:
        """Bytes a recomputed layer's tensors add at ``event`` (``Resizing.backward``:
        each span live from its first row to its last, as ``_added`` counts them)."""
        spans = self.resized.backward.get(key)
        if spans is None or not len(spans):
            return 0.0
        live = (spans[:, 0] <= event) & (event <= spans[:, 1])
        return float(spans[live, 2].sum())


def changed_parts(parts: pd.DataFrame, changed: dict[str, float], basis: str) -> pd.DataFrame:
    """``parts`` with a change's bytes per role: bytes it removes come off what was
    held before the capture in that role first (the slots an optimizer built
    before the first step; a fresh process's share of the earlier work, ``other``),
    then off the rest of what was held before (the change's counter takes them
    off every moment, and at this one less may be held than when the capture
    started); each such row in proportion, as a change of optimizer removes the
    same share of every parameter's slots. What is left, and what it adds, is a
    row of its own (layer ``(what-if)``). The rows' bytes still sum to the peak."""
    parts = parts.copy()
    before = parts["basis"].isin((BEFORE, READ_BEFORE)).to_numpy(dtype=bool)
    added = []
    for role, delta in changed.items():
        if delta < 0:
            delta += _take_off(parts, before & (parts["role"] == role).to_numpy(), -delta)
        if delta < 0:
            delta += _take_off(parts, before, -delta)
        if round(delta):
            row = {"layer": "(what-if)", "role": role, "basis": basis, "bytes": round(delta)}
            added.append(row | {"captured_bytes": 0})
    return pd.concat([parts, pd.DataFrame(added)], ignore_index=True) if added else parts


def _take_off(parts: pd.DataFrame, rows: np.ndarray, amount: float) -> int:
    """Takes up to ``amount`` bytes off ``parts``' ``rows``, each in proportion to its
    bytes, in place; returns the bytes taken."""
    have = parts.loc[rows, "bytes"].to_numpy(dtype=np.int64)
    total = int(have.sum())
    taken = min(round(amount), total)
    if taken <= 0:
        return 0
    kept = have - np.floor(have * (taken / total)).astype(np.int64)
    kept[np.argmax(kept)] -= int(kept.sum()) - (total - taken)  # the rounding's bytes
    parts.loc[rows, "bytes"] = kept
    return taken


def with_change(
    predictor: Predictor,
    precision: str | None = None,
    optimizer: str | None = None,
    remat: str | tuple[str, ...] | None = None,
    fresh: bool = False,
) -> Predictor:
    """``predictor``, or ``what_if`` it with the change given (``parse_change``), where
    one is: ``Profile.predict``'s keywords."""
    if precision is None and optimizer is None and remat is None and not fresh:
        return predictor
    return what_if(predictor, parse_change(precision, optimizer, remat, fresh))


def what_if(predictor: Predictor, change: Change) -> Predictor:
    """``predictor`` itself for no change, else the WhatIf of ``change``."""
    return WhatIf.of(predictor, change) if change else predictor
