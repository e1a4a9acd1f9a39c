"""The record of one allocator of one host: every figure any output shows, built once.

``records.build.build_records`` makes one ``AllocatorRecord`` per (host,
allocator) from the breakdown and the other analyses (``Profile.summary()``
hands them out). Every renderer (terminal, Markdown, HTML, notebook, JSON,
batch rows, the pytest plugin) and the CI gate read these records, so a
figure is derived in one place:

- the attribution is keyed by ``Part``; "live at the peak" is the sum of the
  ``LIVE_PARTS`` (every byte an allocation made during the capture holds,
  XLA buffers and slab slack included), computed here once;
- the leak verdict is a ``LeakVerdict``, the step unit a ``StepUnit``;
- ranked tables are kept whole: a renderer cuts rows, once, and says how
  many it left out.

**One JSON.** ``to_dict()`` is what every command writes for an allocator
(``summary``, ``report``, ``oom``, ``predict`` and ``baseline``, through
``output.sentences.summary_record``): every key always, a section not
computed (``SECTIONS``: a prediction, the gate's figures, the variables from
before the capture) present and null, and ``record_version``
(``RECORD_VERSION``). ``docs/record-schema.json`` is generated from the
fields (``records/schema.py``). Fields whose ``metadata`` has ``json=False``
are inputs of renderers that the JSON already carries elsewhere (the
profile's layers, steps).

Adding a section (a failure, source lines, a prediction):

1. here, one field ``name: T | None = section("what it holds")`` on
   ``AllocatorRecord`` (a frame, or a dict of plain values: the JSON is
   ``to_dict``, made plain by ``output.jsonvalues.json_value``), and
   ``make schema`` to write the schema again;
2. in ``records/build.py`` ``build_records``, one keyword argument (the
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

from collections.abc import Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from enum import Enum
from typing import Any, Protocol, TypeVar

import numpy as np
import pandas as pd

from traceparse.analysis import leaks
from traceparse.analysis.steps import STEP_ID
from traceparse.tables.select import equal_to

__all__ = [
    "LIVE_PARTS",
    "OPTIONAL_FIELDS",
    "RECORD_VERSION",
    "SECTIONS",
    "AllocatorRecord",
    "LeakVerdict",
    "Note",
    "Part",
    "StepUnit",
    "doc",
    "fullest",
    "json_fields",
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

    # The words analysis/leaks.py judges with, so the two cannot drift apart.
    GROWING = leaks.GROWING
    STABLE = leaks.STABLE
    TOO_FEW_STEPS = leaks.TOO_FEW
    NO_MEMORY_EVENTS = leaks.NO_EVENTS
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
    mask = np.ones(len(frame), dtype=bool)
    for column, value in (("host", host), ("allocator", allocator)):
        if column in frame.columns:
            mask &= equal_to(frame[column], value, missing_matches=False)
    return frame[mask]


def step_unit(
    steps: pd.DataFrame | None, host: str | None = None, allocator: str | None = None
) -> StepUnit:
    """``EXECUTION`` where the allocator's steps (every allocator's, without ``host``
    and ``allocator``) all come from TensorFlow's step ids (no step markers:
    ``tables.build`` renumbers them 1, 2, ... in time order). The one place the
    word is decided."""
    if steps is None or steps.empty or "source" not in steps.columns:
        return StepUnit.STEP
    mine = steps if host is None or allocator is None else owned(steps, host, allocator)
    sources = set(mine["source"].astype(str))
    return StepUnit.EXECUTION if sources == {STEP_ID} else StepUnit.STEP


# The version of ``AllocatorRecord.to_dict()``'s layout, written in every record as
# ``record_version``: bump it when a key is renamed or removed, or changes meaning
# (adding a key is fine); docs/record-schema.json says what each key holds.
RECORD_VERSION = 1


def doc(text: str, *, json: bool = True, section: bool = False) -> dict[str, Any]:
    """A field's metadata: its meaning (the schema's description); ``json=False``: a
    renderer's input the JSON carries elsewhere (the profile's tables); ``section``:
    made only when asked or when the capture has what it needs, None otherwise and
    then null in the JSON (``SECTIONS`` lists them)."""
    return {"doc": text, "json": json, "section": section}


@dataclass
class AllocatorRecord:
    """One allocator of one host. ``to_dict()`` gives its JSON (frames stay frames;
    ``traceparse.output.jsonvalues.json_value`` makes plain values of them)."""

    host: str = field(metadata=doc("The host whose capture this is."))
    allocator: str = field(metadata=doc("The allocator's name (GPU_0_bfc, mklcpu, ...)."))
    peak_bytes: int = field(
        metadata=doc("Bytes in use at the allocator's peak (reserved + allocated).")
    )
    peak_time_ps: int = field(
        metadata=doc("When the peak was reached, picoseconds from the capture start.")
    )
    peak_step: int | None = field(
        metadata=doc("The step the peak fell in; null outside every step.")
    )
    capacity_bytes: int | None = field(
        metadata=doc("What the allocator could hold then (in use + available); null when unknown.")
    )
    utilisation: float | None = field(
        metadata=doc("peak_bytes / capacity_bytes, 0..1; null without one.")
    )
    heap_bytes: int = field(metadata=doc("Bytes the allocator handed out at the peak."))
    reserved_bytes: int = field(metadata=doc("Bytes the allocator reserved at the peak."))
    fragmentation: float | None = field(
        metadata=doc("The allocator's fragmentation at the peak, 0..1.")
    )
    allocations: int = field(metadata=doc("Allocations the capture records on this allocator."))
    live_at_peak: int = field(metadata=doc("Allocations live at the peak."))
    # Ranked tables, whole: a renderer cuts them.
    top_tensors: pd.DataFrame = field(
        repr=False, metadata=doc("Every tensor (and XLA buffer) live at the peak, largest first.")
    )
    top_ops: pd.DataFrame = field(
        repr=False, metadata=doc("Every op holding bytes at the peak, largest first.")
    )
    top_scopes: pd.DataFrame = field(
        repr=False, metadata=doc("Every name scope holding bytes at the peak, largest first.")
    )
    attribution: dict[str, int] = field(
        metadata=doc("The bytes in use at the peak by part (Part); they sum to peak_bytes.")
    )
    leak_verdict: LeakVerdict = field(metadata=doc("The leak check's verdict (LeakVerdict)."))
    growth_bytes_per_step: float | None = field(
        metadata=doc("Bytes in use added per step; null when not judged.")
    )
    leak: dict[str, Any] = field(
        metadata=doc(
            "The leak check's figures (a row of LeakReport.allocators); empty when not judged."
        )
    )
    peak_events: int = field(
        metadata=doc("How many events reach the peak (the figures are the last one's).")
    )
    lifetime_peak_bytes: int | None = field(
        metadata=doc(
            "The allocator's own peak since it started (peak_bytes_in_use); null when not recorded."
        )
    )
    live_at_peak_bytes: int = field(
        default=0,
        metadata=doc(
            "Bytes the allocations live at the peak hold (the LIVE_PARTS), XLA's included."
        ),
    )
    step_unit: StepUnit = field(
        default=StepUnit.STEP,
        metadata=doc("What the steps count: marked steps, or single executions."),
    )
    notes: tuple[Note, ...] = field(
        default=(),
        metadata=doc(
            "What a reader should know about these figures (Note), said by the renderers."
        ),
    )
    before_capture: dict[str, Any] | None = field(
        default=None,
        repr=False,
        metadata=doc(
            "What was allocated before the capture, split by the variable inventory: "
            "weight_bytes / weight_variables, optimizer_bytes / optimizer_variables / optimizer "
            "(its name), other_bytes / other_variables, variable_bytes (the attribution's "
            "part), unnamed_bytes (before_capture_bytes). Without one but with XLA programs "
            "that ran: xla_parameter_bytes (the part), xla_parameters, xla_programs, "
            "xla_program (its name when one), xla_parameter_shapes, unnamed_bytes.",
            section=True,
        ),
    )
    top_variables: pd.DataFrame | None = field(
        default=None,
        repr=False,
        metadata=doc(
            "The variables the inventory names on this allocator, largest first.",
            section=True,
        ),
    )
    prediction: dict[str, Any] | None = field(
        default=None,
        repr=False,
        metadata=doc(
            "The peak predicted at other batch sizes (docs/predict.md), where the captured "
            "batch size can be read off the capture: captured_batch, captured_peak_bytes, "
            "capacity_bytes, largest_batch / largest_peak_bytes (the largest batch whose "
            "predicted peak fits the capacity; null without one) and curve (batch_size, "
            "peak_bytes, low_bytes, high_bytes: a quarter of the captured batch to eight "
            "times it, and the largest), held (what was held when the capture started, kept "
            "at every size: held_before_bytes, own_held_bytes, the model's variables in it, "
            "other_held_bytes, earlier_layer / earlier_layers, the evidence of other models "
            "built first in the process), failed_request (the request the capture ran out "
            "of memory at, asked again at every size; null without one) and "
            "unseen_after_failure (what the step holds after it is not in the capture: "
            "largest_batch then gets past that request). Made by "
            "Profile.summary(predict=True), the report and the predict command.",
            section=True,
        ),
    )
    peak_repeats: dict[str, Any] | None = field(
        default=None,
        repr=False,
        metadata=doc(
            "Where the peak repeats (within 1% of it at several instants): instants (how "
            "many), opened (how many were broken down, the highest), near (the 1%), steps "
            "(those reaching it), low_bytes / high_bytes (the instants' bytes in use), layers "
            "and ops (what holds memory at the instants: low_bytes, high_bytes and at how "
            "many instants, those held at every one first). Null when the peak is reached "
            "once: its figures then describe the only instant.",
            section=True,
        ),
    )
    gate: dict[str, Any] | None = field(
        default=None,
        repr=False,
        metadata=doc(
            "The figures the CI gate compares (gate/figures.py), made by the baseline: "
            "padding_at_peak_bytes, allocated_bytes, steps, and ops (per op: "
            "live_at_peak_bytes, allocated_bytes, count, requested_bytes, "
            "live_at_peak_requested_bytes, shapes).",
            section=True,
        ),
    )
    # Renderers' inputs the JSON carries elsewhere (the profile's own tables).
    ops: pd.DataFrame | None = field(
        default=None,
        repr=False,
        metadata=doc(
            "Every op of the allocator (bytes at the peak, allocated, count).", json=False
        ),
    )
    layers: pd.DataFrame | None = field(
        default=None,
        repr=False,
        metadata=doc(
            "The allocator's rows of Profile.layers() holding bytes at the peak.", json=False
        ),
    )
    xla_programs: pd.DataFrame | None = field(
        default=None, repr=False, metadata=doc("Its XLA programs at the peak.", json=False)
    )
    xla_buffers: pd.DataFrame | None = field(
        default=None, repr=False, metadata=doc("Its XLA buffers at the peak.", json=False)
    )
    steps: pd.DataFrame | None = field(
        default=None, repr=False, metadata=doc("Its steps.", json=False)
    )

    @property
    def name(self) -> str:
        return f"{self.allocator} on {self.host}"

    @property
    def before_capture_share(self) -> float | None:
        """The share of the peak held by bytes from before the capture (the part
        ``before_capture_bytes``); None without a peak."""
        before = int(self.attribution.get(Part.BEFORE_CAPTURE, 0))
        return before / self.peak_bytes if self.peak_bytes else None

    @property
    def fullness(self) -> tuple[float, int]:
        """How full the allocator got, to rank allocators by: use of capacity (-1
        without one), then peak bytes. The one rule that flags the fullest (``fullest``)."""
        used = -1.0 if self.utilisation is None else float(self.utilisation)
        return used, int(self.peak_bytes or 0)

    def to_dict(self) -> dict[str, Any]:
        """Every field the JSON carries, by name, after ``record_version``; a section
        not made is there and None (so every output has the same keys)."""
        out: dict[str, Any] = {"record_version": RECORD_VERSION}
        for item in json_fields():
            out[item.name] = getattr(self, item.name)
        return out


class _Ranked(Protocol):
    @property
    def fullness(self) -> tuple[float, int]: ...


R = TypeVar("R", bound=_Ranked)


def fullest(records: Sequence[R]) -> R | None:
    """The fullest of ``records`` by ``AllocatorRecord.fullness`` (the first on a tie);
    None when there are none."""
    return max(records, key=lambda r: r.fullness) if records else None


def json_fields() -> list[Field[Any]]:
    """The fields ``to_dict`` writes, in order."""
    return [item for item in fields(AllocatorRecord) if item.metadata.get("json", True)]


# Sections made only when asked or when the capture has what they need: None
# otherwise (null in the JSON). A new one is a field whose metadata is ``doc(..., section=True)``.
SECTIONS = tuple(item.name for item in fields(AllocatorRecord) if item.metadata.get("section"))
# The name the sections had when to_dict left them out while None.
OPTIONAL_FIELDS = SECTIONS
