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
from typing import TypeVar

from traceparse.output import cells
from traceparse.records import AllocatorRecord, Part
from traceparse.records.gate import MAX_SHAPES, OpRequests, op_requests
from traceparse.records.source import RecordSource
from traceparse.records.terms import scope_of

__all__ = [
    "NO_OP",
    "AllocatorFigures",
    "OpFigures",
    "figures_of",
    "figures_of_record",
    "pair_allocators",
    "rollup",
]

# The label of allocations without an op (TF names cannot contain parentheses).
NO_OP = cells.NO_OP  # one spelling everywhere


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


def figures_of(profile: RecordSource) -> list[AllocatorFigures]:
    """One record per (host, allocator) of ``profile``, sorted by host then allocator.

    Every figure but the requests comes from the allocator's record
    (``Profile.summary()``): live at the peak is the record's (the XLA buffers
    and slab slack of compiled programs included), the ops are its ops."""
    asked = op_requests(profile, NO_OP)
    return sorted(
        (figures_of_record(record, asked) for record in profile.summary()),
        key=lambda f: (f.host, f.allocator),
    )


def figures_of_record(
    record: AllocatorRecord,
    asked: OpRequests | None = None,
) -> AllocatorFigures:
    """The gate's figures of one record; ``asked`` holds the requests per op
    (``records.gate.op_requests``)."""
    import pandas as pd

    asked = asked or {}
    ops = record.ops if record.ops is not None else pd.DataFrame(columns=["op"])
    by_op: dict[str, OpFigures] = {}
    for op, at_peak, allocated, count in zip(
        ops["op"].astype(object),
        ops.get("live_at_peak_bytes", []),
        ops.get("allocated_bytes", []),
        ops.get("count", []),
        strict=True,
    ):
        key = NO_OP if pd.isna(op) else str(op)
        requested, at_peak_requested, shapes = asked.get(
            (record.host, record.allocator, key), (0, 0, ())
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
    steps = record.steps
    return AllocatorFigures(
        host=record.host,
        allocator=record.allocator,
        peak_bytes=record.peak_bytes,
        capacity_bytes=record.capacity_bytes,
        live_at_peak_bytes=record.live_at_peak_bytes,
        padding_at_peak_bytes=int(record.attribution.get(Part.PADDING, 0)),
        allocated_bytes=sum(f.allocated_bytes for f in by_op.values()),
        allocations=record.allocations,
        ops=dict(sorted(by_op.items())),
        steps=len(steps) if steps is not None and len(steps) else None,
    )


def rollup(figures: AllocatorFigures, by: str, depth: int = 1) -> dict[str, OpFigures]:
    """The op figures as they are (``by="op"``) or summed per name scope ``depth`` deep."""
    if by == "op":
        return dict(figures.ops)
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
