"""The record of one allocator of one host: every figure any output shows, built once.

``analysis.summary.build_records`` makes one ``AllocatorRecord`` per (host,
allocator) from the breakdown and the other analyses. Every renderer (terminal,
Markdown, HTML, notebook, JSON, batch rows, the pytest plugin) and the CI gate
read these records and nothing else, so a figure is derived in one place:

- the attribution is keyed by ``Part``; "live at the peak" is the sum of the
  ``LIVE_PARTS`` (every byte an allocation made during the capture holds,
  XLA buffers and slab slack included), computed here once;
- the leak verdict is a ``LeakVerdict``, the step unit a ``StepUnit``;
- ranked tables are kept whole: a renderer cuts rows, once, and says how
  many it left out.

Optional sections (the variables from before the capture, and any added
later) are fields that default to None and are named in ``OPTIONAL_FIELDS``:
``to_dict`` leaves them out when None, so a capture without one reports as
before. Fields whose ``metadata`` has ``json=False`` are inputs of renderers
that the JSON already carries elsewhere (the profile's layers, steps).

Adding a section (a failure, source lines, a prediction):

1. here, one field ``name: T | None = None`` on ``AllocatorRecord`` and its
   name in ``OPTIONAL_FIELDS`` (a frame, or a dataclass whose fields are
   plain values: the JSON is ``to_dict``, made plain by
   ``output.jsonvalues.json_value``);
2. in ``analysis/summary.py`` ``build_summaries``, one keyword argument (the
   profile's table, None when absent; ``Profile._summaries`` passes it) and the
   field filled from the allocator's rows (``owned(frame, host, allocator)``),
   whole: renderers cut rows;
3. in ``report/view.py``, one function of the record: a table,
   ``(record, top) -> TableView`` appended to ``TABLES`` (``_table`` cuts to
   ``top`` and counts the rest; no rows: not shown), or facts said before the
   allocator's own, ``(record) -> list[Fact]`` in ``LEADS``. The terminal
   summary, Markdown and HTML walk the view, so they show it; the notebook
   shows the tables whose keys are in ``report/notebook.py`` ``_HOLDERS``
   (and every ``LEADS`` fact); the gate reads the figures it compares from
   the record (``gate/figures.py`` ``figures_of_record``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

import pandas as pd

__all__ = [
    "LIVE_PARTS",
    "OPTIONAL_FIELDS",
    "AllocatorRecord",
    "LeakVerdict",
    "Note",
    "Part",
    "StepUnit",
    "live_at_peak_bytes",
    "notes_of",
    "owned",
    "step_unit",
]


class _Words(str, Enum):
    """An enum whose members are their values wherever a string is (``str()``,
    f-strings, JSON, comparisons with ``"growing"``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Part(_Words):
    """The parts the bytes in use at an allocator's peak split into, in report order
    (``analysis/attribution.py`` says what each is)."""

    SHAPE_EXPLAINED = "shape_explained_bytes"
    XLA_BUFFER = "xla_buffer_bytes"
    XLA_SLACK = "xla_slack_bytes"
    SHAPE_UNKNOWN = "shape_unknown_bytes"
    UNEXPLAINED_REQUEST = "unexplained_request_bytes"
    PADDING = "padding_bytes"
    VARIABLE = "variable_bytes"
    XLA_PARAMETER = "xla_parameter_bytes"
    BEFORE_CAPTURE = "before_capture_bytes"
    RESERVED = "reserved_bytes"


# What allocations made during the capture hold at the peak: the rest is from
# before the capture (named or not) or the allocator's reservation.
LIVE_PARTS = (
    Part.SHAPE_EXPLAINED,
    Part.XLA_BUFFER,
    Part.XLA_SLACK,
    Part.SHAPE_UNKNOWN,
    Part.UNEXPLAINED_REQUEST,
    Part.PADDING,
)


def live_at_peak_bytes(parts: Mapping[str, int]) -> int:
    """Bytes the allocations live at the peak hold: the sum of ``LIVE_PARTS``."""
    return int(sum(int(parts.get(part, 0) or 0) for part in LIVE_PARTS))


class LeakVerdict(_Words):
    """What the leak check found (``analysis/leaks.py``); ``UNKNOWN`` when not judged."""

    GROWING = "growing"
    STABLE = "stable"
    TOO_FEW_STEPS = "too few steps"
    NO_MEMORY_EVENTS = "no memory events"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, value: Any) -> LeakVerdict:
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            return cls.UNKNOWN
        try:
            return cls(str(value))
        except ValueError:
            return cls.UNKNOWN


class Note(_Words):
    """What a reader should know about an allocator's figures, as data
    (``output.sentences.allocator_notes`` says each in words)."""

    NO_CAPACITY = "no_capacity"  # the events carry no bytes_available
    LOST_FREES = "lost_frees"  # live allocations hold more than the counter
    # Bytes from before the capture that no inventoried variable (or, without an
    # inventory, no XLA parameter) names, or nothing could name.
    BEFORE_CAPTURE_NOT_A_VARIABLE = "before_capture_not_a_variable"
    BEFORE_CAPTURE_NOT_A_PARAMETER = "before_capture_not_a_parameter"
    BEFORE_CAPTURE = "before_capture"
    # Several events reach the peak, or several instants come within 1% of it
    # (``peak_repeats``): the figures are the latest's at the maximum.
    PEAK_REPEATED = "peak_repeated"
    PEAKED_BEFORE_CAPTURE = "peaked_before_capture"  # its lifetime peak is higher


def notes_of(record: AllocatorRecord) -> tuple[Note, ...]:
    """The notes that apply to ``record``'s figures, in the order a report lists them."""
    notes: list[Note] = []
    if record.capacity_bytes is None:
        notes.append(Note.NO_CAPACITY)
    before = record.attribution.get(Part.BEFORE_CAPTURE, 0)
    if before < 0:
        notes.append(Note.LOST_FREES)
    elif before > 0 and Part.VARIABLE in record.attribution:
        notes.append(Note.BEFORE_CAPTURE_NOT_A_VARIABLE)
    elif before > 0 and Part.XLA_PARAMETER in record.attribution:
        notes.append(Note.BEFORE_CAPTURE_NOT_A_PARAMETER)
    elif before > 0:
        notes.append(Note.BEFORE_CAPTURE)
    if record.peak_events > 1 or record.peak_repeats:
        notes.append(Note.PEAK_REPEATED)
    lifetime = record.lifetime_peak_bytes
    if lifetime is not None and lifetime > (record.heap_bytes or 0):
        notes.append(Note.PEAKED_BEFORE_CAPTURE)
    return tuple(notes)


class StepUnit(_Words):
    """What a capture's steps count: marked steps, or single executions (no markers)."""

    STEP = "step"
    EXECUTION = "execution"


def owned(frame: pd.DataFrame, host: str, allocator: str) -> pd.DataFrame:
    """The rows of one (host, allocator): the one way every analysis and view slices
    an allocator. A frame without a host (or allocator) column is not sliced by it;
    rows whose host or allocator is NA belong to no allocator."""
    mask = pd.Series(True, index=frame.index)
    for column, value in (("host", host), ("allocator", allocator)):
        if column in frame.columns:
            mask &= (frame[column].astype(object) == value).fillna(False).astype(bool)
    return frame[mask.to_numpy(dtype=bool)]


def step_unit(
    steps: pd.DataFrame | None, host: str | None = None, allocator: str | None = None
) -> StepUnit:
    """``EXECUTION`` where the allocator's steps (every allocator's, without ``host``
    and ``allocator``) all come from TensorFlow's step ids (no step markers:
    ``tables.build`` renumbers them 1, 2, ... in time order). The one place the
    word is decided."""
    from traceparse.analysis.steps import STEP_ID

    if steps is None or steps.empty or "source" not in steps.columns:
        return StepUnit.STEP
    mine = steps if host is None or allocator is None else owned(steps, host, allocator)
    sources = set(mine["source"].astype(str))
    return StepUnit.EXECUTION if sources == {STEP_ID} else StepUnit.STEP


# The metadata of a field the JSON does not carry (the profile's own tables carry it).
_NOT_IN_JSON = {"json": False}


@dataclass
class AllocatorRecord:
    """One allocator of one host. ``to_dict()`` gives its JSON (frames stay frames;
    ``traceparse.output.jsonvalues.json_value`` makes plain values of them)."""

    host: str
    allocator: str
    peak_bytes: int
    peak_time_ps: int
    peak_step: int | None
    capacity_bytes: int | None
    utilisation: float | None  # peak / capacity, 0..1
    heap_bytes: int
    reserved_bytes: int
    fragmentation: float | None
    allocations: int
    live_at_peak: int  # allocations live at the peak
    # Ranked tables, whole: a renderer cuts them.
    top_tensors: pd.DataFrame = field(repr=False)
    top_ops: pd.DataFrame = field(repr=False)
    top_scopes: pd.DataFrame = field(repr=False)
    attribution: dict[str, int]
    leak_verdict: LeakVerdict
    growth_bytes_per_step: float | None
    # The leak check's figures: a row of LeakReport.allocators as plain values
    # (output.sentences.leak_sentence says them in words); empty when not judged.
    leak: dict[str, Any]
    peak_events: int  # how many events reach the peak (the figures are the last one's)
    lifetime_peak_bytes: int | None  # the allocator's own peak since it started
    # Bytes the allocations live at the peak hold (the LIVE_PARTS), XLA's included.
    live_at_peak_bytes: int = 0
    step_unit: StepUnit = StepUnit.STEP
    # What a reader should know about these figures (notes_of), said by the renderers.
    notes: tuple[Note, ...] = ()
    # What was allocated before the capture, split by the variable inventory:
    # weight_bytes / weight_variables, optimizer_bytes / optimizer_variables /
    # optimizer (its name), other_bytes / other_variables, variable_bytes (the
    # attribution's part), unnamed_bytes (before_capture_bytes). Without one but
    # with XLA programs that ran: xla_parameter_bytes (the part), xla_parameters,
    # xla_programs, xla_program (its name when one), xla_parameter_shapes,
    # unnamed_bytes. None otherwise.
    before_capture: dict[str, Any] | None = None
    top_variables: pd.DataFrame | None = field(default=None, repr=False)
    # The peak predicted at other batch sizes (issue 40, docs/predict.md), where the
    # captured batch size can be read off the capture: captured_batch,
    # captured_peak_bytes, capacity_bytes, largest_batch / largest_peak_bytes (the
    # largest batch whose predicted peak fits the capacity; None without one) and
    # curve (batch_size, peak_bytes, low_bytes, high_bytes: a quarter of the
    # captured batch to eight times it, and the largest). None otherwise.
    prediction: dict[str, Any] | None = field(default=None, repr=False)
    # Where the peak repeats (within 1% of it at several instants, issue 48): instants
    # (how many), opened (how many were broken down, the highest), near (the 1%),
    # steps (those reaching it), low_bytes / high_bytes (the instants' bytes in use),
    # layers and ops (what holds memory at the instants: low_bytes, high_bytes and
    # at how many instants, those held at every one first). None when reached once:
    # the figures of the peak then describe the only instant.
    peak_repeats: dict[str, Any] | None = field(default=None, repr=False)
    # Every op of the allocator (bytes at the peak, allocated, count), the gate's figures.
    ops: pd.DataFrame | None = field(default=None, repr=False, metadata=_NOT_IN_JSON)
    # The allocator's rows of Profile.layers() holding bytes at the peak, its
    # XLA programs and buffers at the peak, and its steps.
    layers: pd.DataFrame | None = field(default=None, repr=False, metadata=_NOT_IN_JSON)
    xla_programs: pd.DataFrame | None = field(default=None, repr=False, metadata=_NOT_IN_JSON)
    xla_buffers: pd.DataFrame | None = field(default=None, repr=False, metadata=_NOT_IN_JSON)
    steps: pd.DataFrame | None = field(default=None, repr=False, metadata=_NOT_IN_JSON)

    @property
    def name(self) -> str:
        return f"{self.allocator} on {self.host}"

    def to_dict(self) -> dict[str, Any]:
        """Every field the JSON carries, by name; optional sections only when present."""
        out: dict[str, Any] = {}
        for item in fields(self):
            if item.metadata.get("json", True) is False:
                continue
            value = getattr(self, item.name)
            if value is None and item.name in OPTIONAL_FIELDS:
                continue
            out[item.name] = value
        return out


# Sections present only when the capture has what they need; to_dict leaves
# them out otherwise. A new optional section is one field here (default None)
# and its name in this tuple.
OPTIONAL_FIELDS = ("before_capture", "top_variables", "prediction", "peak_repeats")
