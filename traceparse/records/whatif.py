"""The what-if record: what each change would do to each allocator's peak.

Its own record beside ``AllocatorRecord``, per capture (one table per
allocator), so the allocator records and their goldens are as before.
``build_whatif`` runs ``analysis.whatif.advice`` once; the terminal, Markdown,
HTML and JSON renderers (``cli/advise.py``, ``report/whatif.py``) take the
record only. docs/whatif.md says what each change is assumed to do.

Two makers: ``traceparse advise`` (its own capacity, every search), and the
reports' section ``whatif`` (``records.sections.PROFILE_SECTIONS``):
``report_whatif`` runs on the Predictor the report's prediction curves use
(``Profile._report_predictor``: one calibration, its sizes), once per profile
(``Profile._report_whatif``), and ``whatif_section`` hands it to the views.
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
    # False: the largest batch each change allows was not searched (the report's
    # replay budget); ``largest_batch`` is then null on every row.
    searched: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "whatif_version": WHATIF_VERSION,
            "path": self.path,
            "searched": self.searched,
            "advice": [asdict(r) | {"notes": list(r.notes)} for r in self.rows],
        }

    def allocators(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((r.host, r.allocator) for r in self.rows))


def build_whatif(
    predictor: Predictor,
    path: str,
    keys: list[tuple[object, object]],
    capacity: int | None,
    *,
    search: bool = True,
) -> WhatIfRecord:
    """The record of ``advice`` on ``keys`` (capacity: the allocator's when None;
    ``search=False``: the largest batch each change allows is not searched)."""
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
        for r in advice(predictor, keys, capacity, search=search)
    )
    return WhatIfRecord(path, rows, searched=search)


def report_whatif(predictor: Predictor | None, path: str) -> WhatIfRecord | None:
    """The reports' what-if section: ``advice`` on every allocator ``predictor`` (the
    report's own) predicts, against each allocator's capacity in the capture. The
    changes at the captured batch are counter replays of the capture's events
    (``WhatIf.point``); the largest batch each allows takes allocator-model
    replays at several batches per change, so it is searched only where the
    report's curve is not cut (``predict_capacity.report_budget``: no budget).
    None without a predictor or an allocator it predicts."""
    from traceparse.analysis.predict_capacity import report_budget

    if predictor is None or not predictor.rows:
        return None
    search = report_budget(len(predictor.base.timeline)) is None
    return build_whatif(predictor, path, list(predictor.rows), None, search=search)


def whatif_section(source: Any) -> WhatIfRecord | None:
    """The what-if section of ``source`` (a ``Profile``: built once, by
    ``report_whatif``); None where none can be made (no batch size read, no memory
    events) and for a stand-in without one."""
    return getattr(source, "_report_whatif", None)
