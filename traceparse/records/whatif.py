"""The what-if record: what each change would do to each allocator's peak.

Its own record beside ``AllocatorRecord``, per capture (one table per
allocator), so the allocator records and their goldens are as before.
``build_whatif`` runs ``analysis.whatif.advice`` once; the terminal, Markdown,
HTML and JSON renderers (``cli/advise.py``, ``report/whatif.py``) take the
record only. docs/whatif.md says what each change is assumed to do.

Two makers: ``traceparse advise`` (its own capacity, every search), and the
reports' section ``whatif`` (``records.sections.PROFILE_SECTIONS``):
``whatif_section`` runs ``report_whatif`` on the Predictor the report's
prediction curves use (``Profile.predictor()``: one calibration, its sizes),
once per profile (``records.cache``), and hands the record to the views.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from traceparse.errors import UsageError
from traceparse.records.cache import once_per_source

if TYPE_CHECKING:
    from traceparse.analysis.predict import Predictor
    from traceparse.analysis.whatif import Facts

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
    # The request the capture ended in, asked again in every peak above
    # (``Predictor.failed``); None where the capture did not run out of memory.
    failed_request: str | None = None
    # The largest batch the program fits in the capacity without any change (as
    # ``predict`` answers it), the same on each of the allocator's rows; None where
    # not searched, no capacity is known, or even 1 does not fit.
    captured_largest_batch: int | None = None


@dataclass(frozen=True)
class WhatIfRecord:
    """Every change ``advise`` tries, ranked per allocator by bytes saved."""

    path: str
    rows: tuple[WhatIfRow, ...]
    # False: the largest batch each change allows was not searched (the report's
    # replay budget); ``largest_batch`` is then null on every row.
    searched: bool = True
    # True: the report left the changes out (their replays are past its budget,
    # ``report_predicts``); ``rows`` is then empty and ``traceparse advise`` gives them.
    left_out: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "whatif_version": WHATIF_VERSION,
            "path": self.path,
            "searched": self.searched,
            **({"left_out": True} if self.left_out else {}),
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
    facts: Facts | None = None,
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
            failed_request=r.get("failed_request"),
            captured_largest_batch=(
                None
                if r.get("captured_largest_batch") is None
                else int(r["captured_largest_batch"])
            ),
        )
        for r in advice(predictor, keys, capacity, search=search, facts=facts)
    )
    return WhatIfRecord(path, rows, searched=search)


# Allocator-model replays one change's search for the largest batch takes, rounded
# up: 4 to 8 per allocator (counted on keras_train, layers_cnn, predict_xla_128 and
# gpu_alexnet_v100_64; ``analysis.whatif.advice``, the line-guided ``_largest``).
SEARCH_REPLAYS = 10


def report_search(events: int, searches: int) -> bool:
    """Whether the report searches the largest batch each change allows: when the
    ``searches`` (changes x allocators; a replay serves every allocator, but each
    search probes batches of its own) of ``SEARCH_REPLAYS`` replays of the
    capture's ``events`` each stay within what the report's curve may replay
    (``predict_capacity.REPORT_REPLAY_EVENTS``), so the what-ifs at most double
    the report's replays instead of multiplying them by the changes tried."""
    from traceparse.analysis.predict.capacity import REPORT_REPLAY_EVENTS

    return events * searches * SEARCH_REPLAYS <= REPORT_REPLAY_EVENTS


# Counter replays one change takes at the captured batch (its point and its
# bounds' low and high counters): 28 for the 6 changes on a make_dense capture,
# 4.7 each (``analysis.whatif.advice`` with the replays counted), rounded up.
CHANGE_REPLAYS = 5
# The events the report's what-ifs may replay in all (changes x replays x the
# capture's events): a counter replay costs about a third of an allocator-model
# one, so three times the curve's budget. Past it the section is left out and
# says how to get it, rather than making the report many times the summary.
REPORT_WHATIF_EVENTS = 3 * 8_000_000


def report_predicts(events: int, changes: int) -> bool:
    """Whether the report predicts its what-ifs: ``changes`` x ``CHANGE_REPLAYS``
    counter replays of the capture's ``events`` within ``REPORT_WHATIF_EVENTS``."""
    return events * changes * CHANGE_REPLAYS <= REPORT_WHATIF_EVENTS


def report_whatif(predictor: Predictor | None, path: str) -> WhatIfRecord | None:
    """The reports' what-if section: ``advice`` on every allocator ``predictor`` (the
    report's own) predicts, against each allocator's capacity in the capture. Each
    change at the captured batch is one counter replay of the capture's events
    and its bounds (``WhatIf.point``, ``extremes``); the largest batch it allows
    takes allocator-model replays at several batches, so it is searched only
    within the report's budget (``report_search``). None without a predictor or
    an allocator it predicts."""
    from traceparse.analysis.whatif import candidates, facts_of

    if predictor is None or not predictor.rows:
        return None
    facts = facts_of(predictor)
    events = len(predictor.base.timeline)
    changes = len(candidates(facts))
    if not report_predicts(events, changes):
        return WhatIfRecord(path, (), searched=False, left_out=True)
    # Each change's search, and the unchanged program's its largest batches are read against.
    search = report_search(events, (changes + 1) * len(predictor.rows))
    return build_whatif(predictor, path, list(predictor.rows), None, search=search, facts=facts)


class WhatIfSource(Protocol):
    """What the section is built from (``Profile`` has it)."""

    @property
    def path(self) -> str: ...
    def predictor(self) -> Predictor: ...


def report_predictor(source: WhatIfSource | Any) -> Predictor | None:
    """``source``'s own Predictor (the one its report's curves use); None where the
    captured batch size cannot be read, and for a stand-in without one."""
    own = getattr(source, "predictor", None)
    if not callable(own):
        return None
    try:
        found: Predictor = own()
    except UsageError:
        return None
    return found


def whatif_section(source: WhatIfSource | Any) -> WhatIfRecord | None:
    """The what-if section of ``source`` (a ``Profile``), built once per profile by
    ``report_whatif`` on its own Predictor; None where none can be made (no batch
    size read, no memory events) and for a stand-in without a predictor."""

    def build() -> WhatIfRecord | None:
        predictor = report_predictor(source)
        return None if predictor is None else report_whatif(predictor, str(source.path))

    return once_per_source(source, "whatif", build)
