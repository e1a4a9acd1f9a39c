"""The figures a gate compares: per (host, allocator), the peak and the bytes of each op.

A ``Profile`` has far more than a comparison needs; these records keep only
what a baseline stores and a diff reads, so a diff works the same between two
captures, or between a baseline file and a capture. Scopes are derived from the
op names (``scope_of``), exactly as ``Profile.scopes`` groups allocations.

Host names differ between machines (a CI runner is not a laptop), so pairing
the two sides of a comparison matches hosts by name first and then pairs the
one host left on each side, whatever its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from traceparse.output import cells

if TYPE_CHECKING:
    from traceparse.core.profile import Profile

__all__ = [
    "NO_OP",
    "AllocatorFigures",
    "OpFigures",
    "figures_of",
    "pair_allocators",
    "rollup",
]

# The label of allocations without an op (TF names cannot contain parentheses).
NO_OP = cells.NO_OP  # one spelling everywhere


# An op's shapes listed in a diff: its largest few (dtype and shape).
MAX_SHAPES = 3


@dataclass(frozen=True)
class OpFigures:
    """One op (or scope) of one allocator: bytes live at the peak, bytes allocated, count.

    Besides what the allocator handed out (``*_bytes``), what the program asked
    for: ``requested_bytes`` over the capture and ``live_at_peak_requested_bytes``,
    and ``shapes`` (``float32[128,2048]``), the largest first. Requests do not
    depend on the allocator's luck (which chunk a request got); allocated bytes do.
    """

    live_at_peak_bytes: int = 0
    allocated_bytes: int = 0
    count: int = 0
    requested_bytes: int = 0
    live_at_peak_requested_bytes: int = 0
    shapes: tuple[str, ...] = ()

    def __add__(self, other: OpFigures) -> OpFigures:
        shapes = tuple(dict.fromkeys((*self.shapes, *other.shapes)))[:MAX_SHAPES]
        return OpFigures(
            self.live_at_peak_bytes + other.live_at_peak_bytes,
            self.allocated_bytes + other.allocated_bytes,
            self.count + other.count,
            self.requested_bytes + other.requested_bytes,
            self.live_at_peak_requested_bytes + other.live_at_peak_requested_bytes,
            shapes,
        )


@dataclass(frozen=True)
class AllocatorFigures:
    """The figures of one allocator of one host.

    ``peak_bytes`` is the allocator's in-use bytes at its peak (reserved +
    allocated, xprof's rule); ``live_at_peak_bytes`` what the allocations live
    then hold, of which ``padding_at_peak_bytes`` the allocator added beyond
    the requests; ``allocated_bytes`` sums every allocation in the capture.
    """

    host: str
    allocator: str
    peak_bytes: int
    capacity_bytes: int | None = None
    live_at_peak_bytes: int = 0
    padding_at_peak_bytes: int = 0
    allocated_bytes: int = 0
    allocations: int = 0
    ops: dict[str, OpFigures] = field(default_factory=dict)
    #: Steps (or executions) the capture holds for this allocator; None when unknown.
    steps: int | None = None

    @property
    def name(self) -> str:
        return f"{self.allocator} on {self.host}"

    @property
    def requested_peak_bytes(self) -> int:
        """The peak less what the allocator added to the requests live then (its padding)."""
        return self.peak_bytes - self.padding_at_peak_bytes

    @property
    def utilisation(self) -> float | None:
        """Peak / capacity, or None when the capacity is unknown."""
        if not self.capacity_bytes:
            return None
        return self.peak_bytes / self.capacity_bytes


def figures_of(profile: Profile) -> list[AllocatorFigures]:
    """One record per (host, allocator) of ``profile``, sorted by host then allocator."""
    import pandas as pd

    ops = profile.ops
    asked = _requests(profile)
    steps = profile.steps
    step_counts = (
        steps.groupby(["host", "allocator"], observed=True).size().to_dict() if len(steps) else {}
    )
    out: list[AllocatorFigures] = []
    for summary in profile.summary():
        parts = summary.attribution
        live = (
            parts["shape_explained_bytes"]
            + parts["shape_unknown_bytes"]
            + parts["unexplained_request_bytes"]
            + parts["padding_bytes"]
        )
        mask = (ops["host"].astype(object) == summary.host) & (
            ops["allocator"].astype(object) == summary.allocator
        )
        mine = ops[mask.to_numpy(dtype=bool)]
        by_op: dict[str, OpFigures] = {}
        for op, at_peak, allocated, count in zip(
            mine["op"].astype(object),
            mine["live_at_peak_bytes"],
            mine["allocated_bytes"],
            mine["count"],
            strict=True,
        ):
            key = NO_OP if pd.isna(op) else str(op)
            requested, at_peak_requested, shapes = asked.get(
                (summary.host, summary.allocator, key), (0, 0, ())
            )
            figures = OpFigures(
                int(at_peak),
                0 if pd.isna(allocated) else int(allocated),
                int(count),
                requested,
                at_peak_requested,
                shapes,
            )
            by_op[key] = by_op.get(key, OpFigures()) + figures
        out.append(
            AllocatorFigures(
                host=summary.host,
                allocator=summary.allocator,
                peak_bytes=summary.peak_bytes,
                capacity_bytes=summary.capacity_bytes,
                live_at_peak_bytes=int(live),
                padding_at_peak_bytes=int(parts["padding_bytes"]),
                allocated_bytes=sum(f.allocated_bytes for f in by_op.values()),
                allocations=summary.allocations,
                ops=dict(sorted(by_op.items())),
                steps=step_counts.get((summary.host, summary.allocator)),
            )
        )
    return sorted(out, key=lambda f: (f.host, f.allocator))


def _requests(profile: Profile) -> dict[tuple[str, str, str], tuple[int, int, tuple[str, ...]]]:
    """Per (host, allocator, op): bytes requested, those live at the peak, largest shapes.

    A request TensorFlow did not record counts as what was handed out.
    """
    import pandas as pd

    from traceparse.analysis.liveness import requested_or_held

    out: dict[tuple[str, str, str], tuple[int, int, tuple[str, ...]]] = {}
    allocations = profile.allocations
    if allocations.empty:
        return out
    live = profile.live_at_peak()
    frame = pd.DataFrame(
        {
            "host": allocations["host"].astype(object).to_numpy(),
            "allocator": allocations["allocator"].astype(object).to_numpy(),
            "op": allocations["op"].astype(object).fillna(NO_OP).to_numpy(),
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


def rollup(figures: AllocatorFigures, by: str, depth: int = 1) -> dict[str, OpFigures]:
    """The op figures as they are (``by="op"``) or summed per name scope ``depth`` deep."""
    if by == "op":
        return dict(figures.ops)
    from traceparse.analysis.rollups import scope_of

    scopes: dict[str, OpFigures] = {}
    for op, values in figures.ops.items():
        key = NO_OP if op == NO_OP else scope_of(op, depth)
        scopes[key] = scopes.get(key, OpFigures()) + values
    return dict(sorted(scopes.items()))


T = TypeVar("T", bound=AllocatorFigures)


def _pair_hosts(left: Sequence[str], right: Sequence[str]) -> dict[str, str]:
    """Left host -> right host: same names first, then the only host left on each side."""
    pairs = {host: host for host in left if host in right}
    rest_left = [h for h in left if h not in pairs]
    rest_right = [h for h in right if h not in pairs.values()]
    if len(rest_left) == 1 and len(rest_right) == 1:
        pairs[rest_left[0]] = rest_right[0]
    return pairs


def pair_allocators(left: Iterable[T], right: Iterable[T]) -> list[tuple[T | None, T | None]]:
    """Pairs of the same allocator on matching hosts; one side None where it has no match.

    Pairs come in the left side's order, then the right side's unmatched records.
    """
    lefts, rights = list(left), list(right)
    hosts = _pair_hosts(sorted({f.host for f in lefts}), sorted({f.host for f in rights}))
    index = {(f.host, f.allocator): f for f in rights}
    used: set[tuple[str, str]] = set()
    out: list[tuple[T | None, T | None]] = []
    for a in lefts:
        key = (hosts.get(a.host, ""), a.allocator)
        b = index.get(key) if a.host in hosts else None
        if b is not None:
            used.add(key)
        out.append((a, b))
    out.extend((None, b) for b in rights if (b.host, b.allocator) not in used)
    return out
