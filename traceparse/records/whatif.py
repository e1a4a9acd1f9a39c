"""The what-if record: what each change would do to each allocator's peak.

Its own record beside ``AllocatorRecord`` (built only when asked, by
``traceparse advise``), so the allocator records and their goldens are as
before. ``build_whatif`` runs ``analysis.whatif.advice`` once; the terminal,
Markdown, HTML and JSON renderers (``cli/advise.py``, ``report/whatif.py``)
take the record only. docs/whatif.md says what each change is assumed to do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceparse.analysis.predict import Predictor

# Bumped when a key of ``WhatIfRecord.to_dict`` changes meaning or goes.
WHATIF_VERSION = 1


@dataclass(frozen=True)
class WhatIfRow:
    """One change on one allocator, at the captured batch."""

    host: str
    allocator: str
    change: str  # e.g. "mixed_bfloat16 + sgd"
    batch_size: int
    captured_peak_bytes: int
    peak_bytes: int  # predicted with the change
    low_bytes: int
    high_bytes: int
    saved_bytes: int  # captured_peak_bytes - peak_bytes (negative: it costs memory)
    largest_batch: int | None  # the largest batch whose predicted peak fits the capacity
    capacity_bytes: int | None
    cost: str  # what the change costs, one line, no promises
    notes: tuple[str, ...]  # what the rules assumed


@dataclass(frozen=True)
class WhatIfRecord:
    """Every change ``advise`` tries, ranked per allocator by bytes saved."""

    path: str
    rows: tuple[WhatIfRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "whatif_version": WHATIF_VERSION,
            "path": self.path,
            "advice": [asdict(r) | {"notes": list(r.notes)} for r in self.rows],
        }

    def allocators(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((r.host, r.allocator) for r in self.rows))


def build_whatif(
    predictor: Predictor,
    path: str,
    keys: list[tuple[object, object]],
    capacity: int | None,
) -> WhatIfRecord:
    """The record of ``advice`` on ``keys`` (capacity: the allocator's when None)."""
    from traceparse.analysis.whatif import advice

    rows = tuple(
        WhatIfRow(
            host=str(r["host"]),
            allocator=str(r["allocator"]),
            change=str(r["change"]),
            batch_size=int(r["batch_size"]),
            captured_peak_bytes=int(r["captured_peak_bytes"]),
            peak_bytes=int(r["peak_bytes"]),
            low_bytes=int(r["low_bytes"]),
            high_bytes=int(r["high_bytes"]),
            saved_bytes=int(r["saved_bytes"]),
            largest_batch=None if r["largest_batch"] is None else int(r["largest_batch"]),
            capacity_bytes=None if r["capacity_bytes"] is None else int(r["capacity_bytes"]),
            cost=str(r["cost"]),
            notes=tuple(str(n) for n in r["notes"]),
        )
        for r in advice(predictor, keys, capacity)
    )
    return WhatIfRecord(path, rows)
