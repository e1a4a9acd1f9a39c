"""The words and JSON of a prediction at another batch size (``traceparse predict``).

Renders numbers made by ``analysis/predict.py`` and ``analysis/predict_capacity.py``;
computes nothing itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from traceparse.output.jsonvalues import json_value
from traceparse.output.sentences import SummaryFigures, summary_record
from traceparse.output.units import format_bytes
from traceparse.records import owned
from traceparse.records.terms import MAX_BATCH, POOLED_BELOW

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal
    from traceparse.records.terms import Fit

ROLE_ORDER = (
    *("weight", "optimizer_state", "optimizer_update", "activation", "gradient"),
    *("other", "unknown"),
)
_ROLE_WORDS = {
    "weight": "weights",
    "optimizer_state": "optimizer state",
    "optimizer_update": "optimizer update",
    "unknown": "unknown",
    "activation": "activations",
    "gradient": "gradients",
    "other": "other",
}


def headline(row: pd.Series) -> str:
    """One sentence: the predicted peak at the batch, its bounds, from what."""
    source = f"captured at batch {row['from_batch']}"
    if not pd.isna(row.get("other_batch")):
        source += f" and {int(row['other_batch'])} (fitted through both)"
    change = row.get("change")
    changed = f" with {change}" if isinstance(change, str) else ""
    return (
        f"{row['allocator']} ({row['host']}): predicted peak at batch {row['batch_size']}"
        f"{changed}: "
        f"{format_bytes(row['predicted_peak_bytes'])} (between "
        f"{format_bytes(row['low_bytes'])} and {format_bytes(row['high_bytes'])}); "
        f"{source}, where the peak was {format_bytes(row['captured_peak_bytes'])}"
    )


def batch_line(row: pd.Series) -> str | None:
    """Which evidence gave the captured batch size (``batch_evidence``)."""
    evidence = row.get("batch_evidence")
    if evidence is None or (isinstance(evidence, float) and pd.isna(evidence)):
        return None
    return f"The captured batch size {row['from_batch']}: {evidence}."


def _count(row: pd.Series, column: str) -> int | None:
    value = row.get(column)
    return None if value is None or pd.isna(value) else int(value)


# Without evidence of earlier models, what was held before the capture beyond the
# model's own variables is said when it is at least this share of the captured peak.
HELD_SHARE = 0.05


def held_line(row: pd.Series) -> str | None:
    """What the allocator held when the capture started beyond the model's own
    variables (``held_before_bytes``, ``own_held_bytes``, ``other_held_bytes``),
    with the evidence of earlier models in the process (``earlier_layer``) and
    what a fresh process leaves out where one is asked (``dropped_held_bytes``);
    None when it is little."""
    held, own = _count(row, "held_before_bytes"), _count(row, "own_held_bytes")
    other, peak = _count(row, "other_held_bytes"), _count(row, "captured_peak_bytes")
    earlier, layer = _count(row, "earlier_layers"), row.get("earlier_layer")
    if held is None or own is None or not other or not peak:
        return None
    if not earlier and other < HELD_SHARE * peak:
        return None
    mine = (
        f"the model's own variables are {format_bytes(own)} of it, the other"
        if own
        else "none of it named as the model's variables (no inventory, no weight gradient "
        "of theirs recorded); all of it"
    )
    dropped = _count(row, "dropped_held_bytes")
    kept = "" if dropped else ", and kept at every batch size"
    text = (
        f"Held when the capture started{kept}: {format_bytes(held)}; {mine} {format_bytes(other)} "
    )
    if earlier and isinstance(layer, str):
        text += (
            f"is earlier work in this process: Keras had built {earlier} layers of its kind "
            f"before this model's {layer}, so other models were made first"
        )
        if dropped:
            return text + (
                f". In a fresh process (asked) they are not: the prediction leaves out "
                f"{format_bytes(dropped)}."
            )
        return text + (
            ", and what they still hold stays held. A fresh process would not hold it; "
            "another run in this one may hold more or less."
        )
    return text + (
        "was made before the step (earlier work in this process, or data or variables the "
        "capture does not name)."
    )


def moment(row: pd.Series) -> str:
    step = "no step" if pd.isna(row["step"]) else f"step {row['step']}"
    if row.get("peak_at_failure") is True:
        return (
            f"at {step}, the request the capture ended in, asked again: "
            f"{row['failed_request']}, {format_bytes(row['failed_request_bytes'])} on top of "
            f"{format_bytes(row['predicted_peak_bytes'] - row['failed_request_bytes'])} in use"
        )
    op = "an op the capture does not name" if pd.isna(row["op"]) else str(row["op"])
    return f"at {step}, after {op}"


def failed_line(row: pd.Series) -> str | None:
    """The request the capture ended in, where the peak is elsewhere: it is asked
    again at every batch size, and fits beside the rest there."""
    request = row.get("failed_request")
    if not isinstance(request, str) or row.get("peak_at_failure") is True:
        return None
    return (
        f"The capture ended in a refused request, {request}; at batch {row['batch_size']} it "
        f"asks {format_bytes(row['failed_request_bytes'])}, and the peak lies elsewhere."
    )


def unseen_line(row: pd.Series) -> str | None:
    """What a CPU capture cannot show about a larger batch, when that is asked."""
    below = row.get("pooled_below_bytes")
    if below is None or pd.isna(below) or row["batch_size"] <= row["from_batch"]:
        return None
    grows_in = format_bytes(-(-int(below) * int(row["from_batch"]) // int(row["batch_size"])))
    return (
        f"Not predicted: {row['allocator']} sends requests under "
        f"{format_bytes(POOLED_BELOW)} to oneDNN's pool, "
        f"which records nothing, so tensors of under {format_bytes(int(below))} per example "
        f"are not in this capture at batch {row['from_batch']}; at batch "
        f"{row['batch_size']} those of {grows_in} per example and more reach the allocator, "
        "and neither the prediction nor its bounds hold them (on a small model they can "
        "be much of the peak: docs/predict.md). A capture at a batch nearer the one asked "
        "shows them."
    )


def role_lines(row: pd.Series) -> list[tuple[str, str]]:
    return [(_ROLE_WORDS[r], format_bytes(row[f"{r}_bytes"])) for r in ROLE_ORDER]


# How far from the captured batch a prediction has been measured: the pairs in
# docs/predict.md (PREDICT_RESULTS, PREDICT_WILD) lie within 8x of each other.
# Further out the shapes are scaled past anything checked: say so.
MEASURED_RATIO = 8


def extrapolation_note(largest: int, captured: int | None) -> str | None:
    """The caveat for a largest batch more than MEASURED_RATIO times the captured one."""
    if captured is None or captured < 1 or largest <= MEASURED_RATIO * captured:
        return None
    return (
        f"That is {largest / captured:,.0f}x the captured batch ({captured}): an "
        f"extrapolation past the {MEASURED_RATIO}x the predictions were measured over "
        "(docs/predict.md); capture at a batch nearer it to confirm."
    )


def fit_lines(fit: Fit, captured: int | None = None) -> list[str]:
    """The capacity answer in sentences; ``captured`` (the captured batch) adds a
    caveat when the largest batch lies far past it."""
    cap = format_bytes(fit.capacity_bytes)
    lines = []
    past = fit.unseen_after_failure
    if fit.largest is None:
        lines.append(
            f"Not even a batch of 1 gets past the request that failed in {cap}."
            if past
            else f"Not even a batch of 1 fits in {cap}."
        )
    elif fit.largest >= MAX_BATCH:
        lines.append(
            f"Any batch size fits in {cap} by the prediction (tried up to {MAX_BATCH:,}): "
            "what grows with the batch here is too small to fill it."
        )
    else:
        lines.append(
            f"The largest batch size that gets past the request that failed: {fit.largest} "
            f"({format_bytes(fit.largest_peak_bytes)} of {cap} at it); larger ones are "
            "predicted not to fit. What the step holds after that request is not in this "
            "capture: capture at a batch that gets past it to see the rest."
            if past
            else f"The largest batch size that fits: {fit.largest} (peak "
            f"{format_bytes(fit.largest_peak_bytes)} of {cap})."
        )
        far = extrapolation_note(fit.largest, captured)
        if far:
            lines.append(far)
        sure = "none" if fit.largest_sure is None else str(fit.largest_sure)
        possible = "none" if fit.largest_possible is None else str(fit.largest_possible)
        verb = "gets past that request" if past else "fits"
        lines.append(
            f"Within the bounds: {verb} whatever the allocator does up to {sure}; "
            f"cannot fit above {possible}."
        )
    if fit.refused_here:
        lines.append(
            f"Batch {fit.batch_size} does not fit: the capture ran out of memory at batch "
            f"{fit.refused_batch}"
            + (" (this one)" if fit.batch_size == fit.refused_batch else "")
            + f"; by the bytes in use it needs {format_bytes(fit.peak_bytes)} of {cap}"
            + (
                ", so the allocator's free memory was in pieces smaller than the request "
                "(fragmentation)."
                if fit.over_bytes <= 0
                else f" ({format_bytes(fit.over_bytes)} over)."
            )
        )
    elif fit.fits and past:
        lines.append(
            f"Batch {fit.batch_size} gets past the request that failed: "
            f"{format_bytes(fit.peak_bytes)} of {cap} ({format_bytes(-fit.over_bytes)} to "
            "spare) up to it; whether the rest of the step fits, this capture cannot say."
        )
    elif fit.fits:
        lines.append(
            f"Batch {fit.batch_size} fits: {format_bytes(fit.peak_bytes)} of {cap} "
            f"({format_bytes(-fit.over_bytes)} to spare)."
        )
    else:
        lines.append(
            f"Batch {fit.batch_size} does not fit: {format_bytes(fit.peak_bytes)} is "
            f"{format_bytes(fit.over_bytes)} over {cap}."
        )
    if len(fit.growing):
        parts = [
            f"{g['layer']} {_ROLE_WORDS.get(str(g['role']), g['role'])} "
            f"{'+' if g['growth_bytes'] > 0 else '-'}{format_bytes(abs(g['growth_bytes']))}"
            for g in fit.growing.head(5).to_dict("records")
        ]
        how = "grows" if fit.growing["growth_bytes"].iloc[0] > 0 else "shrinks"
        lines.append(f"What {how} most from the capture: " + ", ".join(parts) + ".")
    return lines


def render(
    term: Terminal,
    table: pd.DataFrame,
    breakdown: pd.DataFrame,
    fits: Sequence[Fit],
    *,
    top: int = 8,
) -> None:
    """The prediction per allocator: headline, moment, parts by role, the largest
    layers, and the capacity answer."""
    by_key = {(f.host, f.allocator): f for f in fits}
    for _, row in table.iterrows():
        term.heading(f"{row['allocator']} ({row['host']})")
        term.line(headline(row))
        evidence = batch_line(row)
        if evidence:
            term.line(evidence)
        held = held_line(row)
        if held:
            term.line(held)
        assumed = row.get("assumptions")
        if isinstance(assumed, str):
            term.line(f"What {row['change']} is assumed to do (docs/whatif.md):")
            term.bullets(assumed.splitlines())
        term.line(f"The predicted peak is {moment(row)}.")
        failed = failed_line(row)
        if failed:
            term.line(failed)
        unseen = unseen_line(row)
        if unseen:
            term.line(unseen)
        term.fields(role_lines(row))
        mine = owned(breakdown, str(row["host"]), str(row["allocator"])).head(top)
        if len(mine):
            term.text_table(
                ["layer", "role", "bytes", "captured", "basis"],
                [
                    [
                        str(r["layer"]),
                        str(r["role"]),
                        format_bytes(r["bytes"]),
                        format_bytes(r["captured_bytes"]),
                        str(r["basis"]),
                    ]
                    for r in mine.to_dict("records")
                ],
                right=[False, False, True, True, False],
                title=f"Largest parts at the predicted peak (top {top})",
                key="layer",
            )
        fit = by_key.get((row["host"], row["allocator"]))
        if fit is not None:
            term.bullets(fit_lines(fit, int(row["from_batch"])))
        term.line()


def as_json(
    table: pd.DataFrame,
    breakdown: pd.DataFrame,
    fits: Sequence[Fit],
    records: Sequence[SummaryFigures] = (),
) -> dict[str, Any]:
    """The prediction as plain JSON values: per allocator, its parts, its capacity
    answer, and its record (``allocators``: as every command writes an allocator,
    its ``prediction`` section the curve of this prediction)."""
    return {
        "predictions": json_value(table),
        "breakdown": json_value(breakdown),
        "capacity": [json_value(f.as_dict()) for f in fits],
        "allocators": [summary_record(r) for r in records],
    }
