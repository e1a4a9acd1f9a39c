"""What changed between two captures (or a baseline and a capture), per op or name scope.

For each allocator present on either side, one row per op (keyed by name) or
per name-scope prefix: bytes live at the allocator's peak and bytes allocated
over the capture, before and after, and their deltas. Rows are sorted by
impact: the size of the change at the peak, then of the change in allocated
bytes, then by name. The headline says how the peak moved and which rows
explain it: the rows that moved the same way as the peak, largest first, until
they account for the peak's change. Bytes at the peak that belong to no op
(allocated before the capture started, or reserved) are named separately, so
the rows and the rest always add up to the peak's change.

By default (``compare="requested"``) rows are ranked by what the program asked
for (requested bytes over the capture, then those live at the peak), and the
headline names the rows whose requests moved: a weight gradient that got a
bigger chunk from the allocator this time did not grow. ``compare="allocated"``
ranks by the bytes the allocator handed out at the peak, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from traceparse.gate.figures import AllocatorFigures, OpFigures, pair_allocators, rollup
from traceparse.gate.matching import match_ops
from traceparse.output.units import format_bytes, format_change

__all__ = ["EXPLAIN_MAX_ROWS", "AllocatorDiff", "By", "DiffRow", "diff_figures"]

By = Literal["op", "scope"]
Compare = Literal["requested", "allocated"]
RowStatus = Literal["new", "vanished", "changed", "same"]

# The headline names at most this many rows.
EXPLAIN_MAX_ROWS = 5

_EMPTY = OpFigures()


@dataclass(frozen=True)
class DiffRow:
    """One op or scope: its figures before and after (None where it is absent)."""

    key: str
    before: OpFigures | None
    after: OpFigures | None
    #: The sides' step counts; when both are known and differ, the bytes over a
    #: capture compare per step (24 steps of batch 64 ask for what 12 of 128 do).
    steps_before: int | None = None
    steps_after: int | None = None
    #: The op's name before, where TensorFlow numbered it otherwise (``key`` is
    #: the name after): ``gate/matching.py`` matched them as the same op.
    key_before: str | None = None

    @property
    def per_step(self) -> bool:
        return _per_step(self.steps_before, self.steps_after)

    def _over_capture_delta(self, before: int, after: int) -> int:
        if self.per_step:
            assert self.steps_before and self.steps_after
            return round(after / self.steps_after - before / self.steps_before)
        return after - before

    @property
    def status(self) -> RowStatus:
        if self.before is None:
            return "new"
        if self.after is None:
            return "vanished"
        return "same" if self.before == self.after else "changed"

    @property
    def peak_before(self) -> int:
        return (self.before or _EMPTY).live_at_peak_bytes

    @property
    def peak_after(self) -> int:
        return (self.after or _EMPTY).live_at_peak_bytes

    @property
    def peak_delta(self) -> int:
        return self.peak_after - self.peak_before

    @property
    def allocated_before(self) -> int:
        return (self.before or _EMPTY).allocated_bytes

    @property
    def allocated_after(self) -> int:
        return (self.after or _EMPTY).allocated_bytes

    @property
    def allocated_delta(self) -> int:
        """The change in bytes allocated over the capture (per step if the counts differ)."""
        return self._over_capture_delta(self.allocated_before, self.allocated_after)

    @property
    def requested_delta(self) -> int:
        """The change in bytes requested over the capture (per step if the counts differ)."""
        return self._over_capture_delta(
            (self.before or _EMPTY).requested_bytes, (self.after or _EMPTY).requested_bytes
        )

    @property
    def peak_requested_delta(self) -> int:
        """The change in bytes requested by the allocations live at the peak."""
        after = (self.after or _EMPTY).live_at_peak_requested_bytes
        return after - (self.before or _EMPTY).live_at_peak_requested_bytes

    @property
    def reshaped(self) -> bool:
        """On both sides, with other shapes: the program asked for something else."""
        return bool(self.shapes_before and self.shapes_after) and (
            self.shapes_before != self.shapes_after
        )

    @property
    def shapes_before(self) -> tuple[str, ...]:
        return (self.before or _EMPTY).shapes

    @property
    def shapes_after(self) -> tuple[str, ...]:
        return (self.after or _EMPTY).shapes

    @property
    def count_before(self) -> int:
        return (self.before or _EMPTY).count

    @property
    def count_after(self) -> int:
        return (self.after or _EMPTY).count

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            # The name before only where TensorFlow numbered the op otherwise.
            **({"key_before": self.key_before} if self.key_before else {}),
            "status": self.status,
            "peak_before_bytes": self.peak_before,
            "peak_after_bytes": self.peak_after,
            "peak_delta_bytes": self.peak_delta,
            "allocated_before_bytes": self.allocated_before,
            "allocated_after_bytes": self.allocated_after,
            "allocated_delta_bytes": self.allocated_delta,
            "count_before": self.count_before,
            "count_after": self.count_after,
            "requested_before_bytes": (self.before or _EMPTY).requested_bytes,
            "requested_after_bytes": (self.after or _EMPTY).requested_bytes,
            "requested_delta_bytes": self.requested_delta,
            "peak_requested_delta_bytes": self.peak_requested_delta,
            "per_step": self.per_step,
            "shapes_before": list(self.shapes_before),
            "shapes_after": list(self.shapes_after),
        }


@dataclass(frozen=True)
class AllocatorDiff:
    """One allocator compared: its peak before and after, and the rows, by impact."""

    allocator: str
    host_before: str | None
    host_after: str | None
    peak_before: int | None
    peak_after: int | None
    rows: tuple[DiffRow, ...]
    by: By = "op"
    compare: Compare = "requested"
    # The peaks less the allocator's padding at them (None where a side is absent).
    requested_peak_before: int | None = None
    requested_peak_after: int | None = None
    steps_before: int | None = None
    steps_after: int | None = None

    @property
    def per_step(self) -> bool:
        """The sides hold different numbers of steps: bytes over a capture compare per step."""
        return _per_step(self.steps_before, self.steps_after)

    @property
    def host(self) -> str:
        hosts = [h for h in (self.host_before, self.host_after) if h is not None]
        if len(hosts) == 2 and hosts[0] != hosts[1]:
            return f"{hosts[0]} → {hosts[1]}"
        return hosts[0]

    @property
    def where(self) -> str:
        return f"{self.allocator} on {self.host}"

    @property
    def peak_delta(self) -> int:
        return (self.peak_after or 0) - (self.peak_before or 0)

    @property
    def changed_rows(self) -> tuple[DiffRow, ...]:
        return tuple(r for r in self.rows if r.status != "same")

    @property
    def outside_rows_delta(self) -> int:
        """The peak's change not held by any row: before-capture and reserved bytes."""
        return self.peak_delta - sum(r.peak_delta for r in self.rows)

    def _explanation(self) -> list[DiffRow | None]:
        """What moved with the peak, largest first, until it covers the peak's change.

        ``None`` stands for the bytes held by no row (before the capture, reserved).
        """
        change = self.peak_delta
        if change == 0:
            return []
        sign = 1 if change > 0 else -1
        candidates: list[tuple[int, str, DiffRow | None]] = [
            (abs(r.peak_delta), r.key, r) for r in self.rows if r.peak_delta * sign > 0
        ]
        if self.outside_rows_delta * sign > 0:
            candidates.append((abs(self.outside_rows_delta), "", None))
        candidates.sort(key=lambda c: (-c[0], c[1]))
        chosen: list[DiffRow | None] = []
        covered = 0
        for size, _key, row in candidates:
            if covered >= abs(change) or len(chosen) == EXPLAIN_MAX_ROWS:
                break
            chosen.append(row)
            covered += size
        return chosen

    def _requests_moved(self) -> list[DiffRow]:
        """The rows whose shapes changed, their requests moved most, the way the total moved.

        An op whose shapes are the same on both sides asks for the same tensors:
        a change in its bytes is how often it allocated (TensorFlow reuses an
        input's buffer when it can) or where the peak fell, not the program. A
        row whose shapes changed is always a candidate, even when its bytes over
        the capture did not move (twice the steps of half the batch): the
        headline never says no shape changed while a row shows one.
        """
        reshaped = [r for r in self.rows if r.reshaped]
        total = sum(r.requested_delta for r in reshaped)
        sign = 1 if total >= 0 else -1
        moved = [r for r in reshaped if r.requested_delta * sign > 0] or reshaped
        moved.sort(key=lambda r: (-abs(r.requested_delta), -abs(r.peak_requested_delta), r.key))
        chosen: list[DiffRow] = []
        covered = 0
        for row in moved:
            if chosen and (covered >= abs(total) or len(chosen) == EXPLAIN_MAX_ROWS):
                break
            chosen.append(row)
            covered += abs(row.requested_delta)
        return chosen

    @property
    def explained_by(self) -> tuple[DiffRow, ...]:
        """The rows that moved with the peak, largest first, until they cover its change.

        Bytes held by no row count towards the cover (``outside_rows_delta``), so
        when they moved the peak, fewer rows (or none) are named. Comparing
        requests, the rows whose requests over the capture moved most.
        """
        if self.compare == "requested":
            return tuple(self._requests_moved())
        return tuple(row for row in self._explanation() if row is not None)

    def headline(self) -> str:
        """One sentence: how the peak moved and which rows explain it."""
        if self.peak_before is None:
            return f"{self.where}: only in the second capture (peak {_b(self.peak_after)})."
        if self.peak_after is None:
            return f"{self.where}: only in the first capture (peak {_b(self.peak_before)})."
        noun = self.by
        if self.peak_delta == 0:
            text = f"{self.where}: peak unchanged at {_b(self.peak_after)}"
            changed = len(self.changed_rows)
            if changed:
                text += f"; {changed} {noun}{'s' if changed != 1 else ''} changed"
            if self.compare == "requested" and self._requests_moved():
                return text + self._requested_headline()
            return text + "."
        text = (
            f"{self.where}: peak {_b(self.peak_before)} → {_b(self.peak_after)} "
            f"({format_bytes(self.peak_delta, signed=True)}, "
            f"{format_change(self.peak_delta, self.peak_before)})"
        )
        if self.compare == "requested":
            return text + self._requested_headline()
        rest = self.outside_rows_delta
        outside = (
            f"{format_bytes(rest, signed=True)} held by no {noun} (allocated before the "
            "capture started, or reserved)"
        )
        explanation = self._explanation()
        if explanation:
            names = ", ".join(outside if r is None else _row_label(r) for r in explanation)
            text += f"; explained by {names}"
        if rest and None not in explanation:
            text += f"; {outside}"
        return text + "."

    def _requested_headline(self) -> str:
        before, after = self.requested_peak_before, self.requested_peak_after
        text = ""
        if before is not None and after is not None:
            text = (
                f"; requested at the peak {_b(before)} → {_b(after)} "
                f"({format_bytes(after - before, signed=True)})"
            )
        moved = self._requests_moved()
        per = " per step" if self.per_step else ""
        if self.per_step:
            text += (
                f"; {self.steps_before} steps → {self.steps_after}, so requests compare per step"
            )
        if moved:
            names = ", ".join(
                f"{r.key} ({_shape_change(r)}, {format_bytes(r.requested_delta, signed=True)} "
                f"requested{per}" + {"new": ", new", "vanished": ", gone"}.get(r.status, "") + ")"
                for r in moved
            )
            text += f"; shapes changed most in {names}"
        else:
            text += (
                f"; no {self.by}'s shapes changed (the rest is buffer reuse, timing and the "
                "allocator's chunks)"
            )
        return text + "."

    def to_dict(self) -> dict[str, Any]:
        return {
            "allocator": self.allocator,
            "compare": self.compare,
            "requested_peak_before_bytes": self.requested_peak_before,
            "requested_peak_after_bytes": self.requested_peak_after,
            "host_before": self.host_before,
            "host_after": self.host_after,
            "peak_before_bytes": self.peak_before,
            "peak_after_bytes": self.peak_after,
            "peak_delta_bytes": self.peak_delta,
            "outside_rows_delta_bytes": self.outside_rows_delta,
            "steps_before": self.steps_before,
            "steps_after": self.steps_after,
            "per_step": self.per_step,
            "headline": self.headline(),
            "explained_by": [r.key for r in self.explained_by],
            "rows": [r.to_dict() for r in self.rows],
        }


def diff_figures(
    before: Sequence[AllocatorFigures],
    after: Sequence[AllocatorFigures],
    by: By = "op",
    depth: int = 1,
    allocator: str | None = None,
    compare: Compare = "requested",
) -> list[AllocatorDiff]:
    """One ``AllocatorDiff`` per allocator on either side (hosts paired as in a baseline)."""
    if allocator is not None:
        before = [f for f in before if f.allocator == allocator]
        after = [f for f in after if f.allocator == allocator]
    out = []
    for a, b in pair_allocators(before, after):
        rows_a = rollup(a, by, depth) if a is not None else {}
        rows_b = rollup(b, by, depth) if b is not None else {}
        steps_a = None if a is None else a.steps
        steps_b = None if b is None else b.steps
        if by == "op":  # the same op, though TensorFlow numbered it otherwise
            pairs = match_ops(rows_a, rows_b)
        else:
            pairs = [(key, key) for key in {*rows_a, *rows_b}]
        rows = [
            DiffRow(
                str(kb if kb is not None else ka),
                rows_a.get(ka) if ka is not None else None,
                rows_b.get(kb) if kb is not None else None,
                steps_a,
                steps_b,
                key_before=ka if ka is not None and kb is not None and ka != kb else None,
            )
            for ka, kb in pairs
        ]
        if compare == "requested":  # reshaped rows first: what the program asked for
            rows.sort(
                key=lambda r: (
                    not r.reshaped,
                    -abs(r.requested_delta),
                    -abs(r.peak_requested_delta),
                    r.key,
                )
            )
        else:
            rows.sort(key=lambda r: (-abs(r.peak_delta), -abs(r.allocated_delta), r.key))
        some = a if a is not None else b
        assert some is not None
        out.append(
            AllocatorDiff(
                allocator=some.allocator,
                host_before=None if a is None else a.host,
                host_after=None if b is None else b.host,
                peak_before=None if a is None else a.peak_bytes,
                peak_after=None if b is None else b.peak_bytes,
                rows=tuple(rows),
                by=by,
                compare=compare,
                requested_peak_before=None if a is None else a.requested_peak_bytes,
                requested_peak_after=None if b is None else b.requested_peak_bytes,
                steps_before=steps_a,
                steps_after=steps_b,
            )
        )
    return out


def _per_step(before: int | None, after: int | None) -> bool:
    return bool(before and after and before != after)


def _shape_change(row: DiffRow) -> str:
    """``float32[64,32] → float32[128,32]``: the largest shape on each side."""
    before = row.shapes_before[0] if row.shapes_before else "-"
    after = row.shapes_after[0] if row.shapes_after else "-"
    return before if before == after else f"{before} → {after}"


def _row_label(row: DiffRow) -> str:
    status = {"new": ", new", "vanished": ", gone"}.get(row.status, "")
    return f"{row.key} ({format_bytes(row.peak_delta, signed=True)}{status})"


def _b(value: int | None) -> str:
    return format_bytes(value)
