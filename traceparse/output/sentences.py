"""The sentences about an analysis's numbers: the leak verdict and an allocator's notes.

The analyses return figures (``LeakReport.allocators``, ``AllocatorRecord``);
what a person reads about them is made here, once, for the terminal, the
reports and the gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from traceparse.output.units import format_bytes, is_missing, plural
from traceparse.records import LeakVerdict, Note
from traceparse.records.terms import MAX_BATCH, MIN_STEPS, STEP_ID

if TYPE_CHECKING:
    from traceparse.records.terms import LeakReport


class SummaryFigures(Protocol):
    """The figures of an allocator's record that its notes are made from."""

    @property
    def host(self) -> str: ...
    @property
    def allocator(self) -> str: ...
    @property
    def peak_bytes(self) -> int | None: ...
    @property
    def capacity_bytes(self) -> int | None: ...
    @property
    def heap_bytes(self) -> int | None: ...
    @property
    def attribution(self) -> dict[str, int]: ...
    @property
    def peak_events(self) -> int: ...
    @property
    def lifetime_peak_bytes(self) -> int | None: ...
    @property
    def peak_repeats(self) -> Mapping[str, Any] | None: ...
    @property
    def leak(self) -> Mapping[str, Any]: ...
    @property
    def notes(self) -> tuple[Note, ...]: ...
    def to_dict(self) -> dict[str, Any]: ...


MARK_STEPS = (
    f"mark at least {MIN_STEPS} steps with cap.step(n), or, inside Keras fit, with "
    "traceparse.MemoryCallback (traceparse.profile() marks fit's batches itself), or "
    "tf.profiler.experimental.Trace('train', step_num=n, _r=1)"
)


def leak_reason(row: Mapping[str, Any]) -> str | None:
    """Why an allocator's growth was not judged (None when it was)."""
    if not row:
        return (
            "the capture has no steps (no step markers and no step ids), so growth cannot "
            f"be judged; {MARK_STEPS}"
        )
    if str(row.get("source", "")) == STEP_ID:
        return (
            "the capture has no step markers, so growth cannot be judged (TensorFlow's step "
            f"ids number single executions, not training steps); {MARK_STEPS}"
        )
    if LeakVerdict.of(row["verdict"]) not in (LeakVerdict.GROWING, LeakVerdict.STABLE):
        return (
            f"{plural(int(row['steps']), 'step')} is too few to judge growth; it takes at "
            f"least {MIN_STEPS} (the first is warm-up)"
        )
    return None


def leak_sentence(row: Mapping[str, Any], *, name: str | None = None) -> str:
    """One allocator's leak verdict (a row of ``LeakReport.allocators``) in one sentence.

    ``name`` starts the sentence ("GPU_0_bfc on host1 is growing: …").
    """
    reason = leak_reason(row)
    if reason is not None:
        return f"{name}: {reason}." if name else f"{reason[:1].upper()}{reason[1:]}."
    who = f"{name} " if name else "Memory "
    verdict = str(row["verdict"])
    total = int(row["total_growth_bytes"])
    judged, grew = int(row["judged_steps"]), int(row["grew_steps"])
    span = f"steps {row['first_step']}–{row['last_step']}"
    if verdict == LeakVerdict.GROWING:
        text = (
            f"{who}is growing: {format_bytes(total)} more in use after {span} "
            f"({format_bytes(row['growth_bytes_per_step'])} per step, "
            f"up in {grew} of {judged} steps)"
        )
        if int(row["suspect_bytes"]):
            op = row["top_suspect_op"]
            op_text = "an unnamed op" if is_missing(op) else str(op)
            text += (
                f"; {int(row['suspect_count'])} allocations made after the first step are "
                f"still live at the end ({format_bytes(row['suspect_bytes'])}), the most "
                f"from {op_text} ({format_bytes(row['top_suspect_bytes'])})"
            )
        return text + "."
    if total > 0:
        # Up overall but not step over step: a one-time rise (a cache), not a leak.
        return (
            f"{who}is stable: in use rose {format_bytes(total)} over {span}, but in only "
            f"{grew} of {judged} steps, so it is a one-time rise, not steady growth."
        )
    return (
        f"{who}is stable: {format_bytes(total)} change in use over {span} "
        f"(up in {grew} of {judged} steps)."
    )


def leak_line(row: Mapping[str, Any], verdict: str, *, name: str | None = None) -> str:
    """The leak check on one line: the sentence, which states a verdict it judged;
    the verdict and why it was not judged otherwise."""
    sentence = leak_sentence(row, name=name)
    return sentence if leak_reason(row) is None else f"{verdict}: {sentence}"


def leak_growth(row: Mapping[str, Any]) -> str:
    """The growth figure that goes with the verdict: per step only when it is growing."""
    if is_missing(row.get("total_growth_bytes")):
        return "-"
    if LeakVerdict.of(row["verdict"]) == LeakVerdict.GROWING or int(row["total_growth_bytes"]) <= 0:
        return f"{format_bytes(row['growth_bytes_per_step'], signed=True)} per step"
    # A one-time rise: "+8 MiB per step" next to "stable" would contradict the verdict.
    return (
        f"{format_bytes(row['total_growth_bytes'], signed=True)} over "
        f"{plural(int(row['judged_steps']), 'step')}, no steady growth"
    )


def leak_message(report: LeakReport) -> str:
    """The whole capture's leak check: one sentence per allocator."""
    if LeakVerdict.of(report.verdict) == LeakVerdict.NO_MEMORY_EVENTS:
        return "The capture has no memory events, so there is no growth to judge."
    if report.allocators.empty:
        return (
            "The capture has no steps (no step markers and no step ids), so growth cannot "
            f"be judged; {MARK_STEPS}."
        )
    return " ".join(
        leak_sentence(row, name=f"{row['allocator']} on {row['host']}")
        for row in report.allocators.to_dict("records")
    )


def allocator_notes(s: SummaryFigures) -> list[str]:
    """What a reader should know about one allocator's figures (its record's
    ``notes``), in sentences."""
    name = f"{s.allocator} on {s.host}"
    before = s.attribution.get("before_capture_bytes", 0)
    said = {
        Note.NO_CAPACITY: "the events carry no bytes_available, so capacity is unknown.",
        Note.LOST_FREES: f"the allocations live at the peak hold {format_bytes(-before)} more "
        "than the allocator's own counter; the capture lost some frees, so some of them "
        "were in fact released.",
        Note.BEFORE_CAPTURE_NOT_A_VARIABLE: f"{format_bytes(before)} at the peak was allocated "
        "before the capture started and is not a variable the inventory names (tensors held "
        "by Python objects, dataset buffers, small variables, allocator rounding); start the "
        "profiler earlier to see which tensors hold it.",
        Note.BEFORE_CAPTURE_NOT_A_PARAMETER: f"{format_bytes(before)} at the peak was "
        "allocated before the capture started and is not a parameter of an XLA program that "
        "ran (the capture has no variable inventory; parameters carry shapes, not names); "
        "profile with traceparse.integrations.keras.MemoryCallback or traceparse.profile() "
        "to name variables.",
        Note.BEFORE_CAPTURE: f"{format_bytes(before)} at the peak was allocated before the "
        "capture started; start the profiler earlier to see which tensors hold it.",
        Note.PEAK_REPEATED: repeated_peak(s),
        Note.PEAKED_BEFORE_CAPTURE: "the allocator's own lifetime peak, "
        f"{format_bytes(s.lifetime_peak_bytes)}, is higher than any point in the capture: "
        "it peaked before the capture started.",
    }
    return [f"{name}: {said[note]}" for note in s.notes]


# Layers a repeated peak's sentence names at most.
_REPEAT_LAYERS = 5


def repeated_peak(s: SummaryFigures) -> str:
    """The peak reached at several instants: where, and what holds memory at every one
    (the same words whichever instant came last)."""
    found = s.peak_repeats
    if not found:
        return (
            f"the peak of {format_bytes(s.peak_bytes)} is reached {s.peak_events} times; "
            "the figures are for the last of them."
        )
    steps = found["steps"]
    word = "steps" if len(steps) > 1 else "step"
    where = f" in {word} {', '.join(map(str, steps))}" if steps else ""
    low, high = int(found["low_bytes"]), int(found["high_bytes"])
    near = f"{100 * float(found['near']):g}%"
    said = (
        f"the peak is reached at {found['instants']} instants within {near} of it "
        f"({_span(low, high)}){where}; the figures are for the latest at the maximum "
        "(traceparse peak or breakdown --at first, last or step N shows another)."
    )
    layers = found["layers"]
    every = layers[(layers["instants"] == found["opened"]).to_numpy(dtype=bool)]
    every = every[~every["layer"].astype(str).str.startswith("(")]
    if len(every):
        named = [
            f"{row['layer']} {_span(int(row['low_bytes']), int(row['high_bytes']))}"
            for row in every.head(_REPEAT_LAYERS).to_dict("records")
        ]
        which = (
            "one"
            if found["opened"] == found["instants"]
            else f"one of the {found['opened']} highest"
        )
        said += f" Held at every {which}: {', '.join(named)}."
    return said


def _span(low: int, high: int) -> str:
    return format_bytes(low) if low == high else f"{format_bytes(low)} to {format_bytes(high)}"


def summary_record(s: SummaryFigures) -> dict[str, Any]:
    """``AllocatorRecord.to_dict()`` plus its leak check and notes in words, as JSON values."""
    from traceparse.output.jsonvalues import json_value

    return json_value(
        {
            **s.to_dict(),
            "leak_message": leak_sentence(s.leak, name=f"{s.allocator} on {s.host}"),
            "diagnostics": allocator_notes(s),
        }
    )


def more_rows(hidden: int, hint: str = "") -> str:
    """The line under a table cut short: ``… 3 more rows (--top 0 shows all)``."""
    text = f"… {hidden} more {'row' if hidden == 1 else 'rows'}"
    return f"{text} ({hint})" if hint else text


def largest_batch_cell(largest: int | None) -> str:
    """A "largest batch that fits" cell: the batch, ``-`` when none was searched or
    none fits, and where the search reached its ceiling without filling the
    capacity, that every batch it tried fits (not a largest batch)."""
    if largest is None:
        return "-"
    if largest >= MAX_BATCH:
        return f"any (tried to {MAX_BATCH:,})"
    return f"{largest:,}"
