"""The prediction at other batch sizes as an HTML section (issue 40).

``prediction_section`` renders one allocator's prediction (its headline, the
capacity answer and the plot of the predicted peak against the batch size)
as a ``<section>`` the HTML report can place under the allocator;
``prediction_page`` wraps sections in a page of their own (``traceparse
predict -o FILE.html``). ``record_prediction_svg`` and its caption draw the
curve a record carries (``AllocatorRecord.prediction``) in the HTML report.
Numbers come from ``analysis/predict*.py``; the words from ``output/predict.py``
(the caption of the report's plot is made here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from traceparse.output.predict import (
    extrapolation_note,
    fit_lines,
    headline,
    held_line,
    moment,
    role_lines,
)
from traceparse.output.units import format_bytes
from traceparse.records.terms import MAX_BATCH
from traceparse.report.escape import html_text as esc
from traceparse.report.plots import prediction_svg
from traceparse.report.style import CSP, STYLE

if TYPE_CHECKING:
    from traceparse.records.terms import Fit


def prediction_section(row: pd.Series, curve: pd.DataFrame, fit: Fit | None) -> str:
    """One allocator's prediction: headline, parts by role, capacity answer, plot."""
    captured = None
    if not pd.isna(row["captured_peak_bytes"]):
        captured = (int(row["from_batch"]), int(row["captured_peak_bytes"]))
    largest = None
    if fit is not None and fit.largest is not None and fit.largest_peak_bytes is not None:
        largest = (fit.largest, fit.largest_peak_bytes)
    svg = prediction_svg(
        curve["batch_size"].tolist(),
        curve["peak_bytes"].tolist(),
        curve["low_bytes"].tolist(),
        curve["high_bytes"].tolist(),
        capacity_bytes=None if fit is None else fit.capacity_bytes,
        captured=captured,
        largest=largest,
        label=f"predicted peak of {row['allocator']} against batch size",
        salt=f"prediction-{row['host']}-{row['allocator']}",
    )
    roles = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in role_lines(row))
    held = held_line(row)
    lines = fit_lines(fit, int(row["from_batch"])) if fit else []
    answer = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return "\n".join(
        [
            '<section class="prediction">',
            f"<h3>Predicted peak at batch {esc(str(row['batch_size']))}: "
            f"{esc(str(row['allocator']))}</h3>",
            f"<p>{esc(headline(row))}. The predicted peak is {esc(moment(row))}.</p>",
            f"<p>{esc(held)}</p>" if held else "",
            f"<table>{roles}</table>",
            f"<ul>{answer}</ul>" if answer else "",
            f'<div class="chart">{svg}</div>',
            "</section>",
        ]
    )


def record_prediction_svg(prediction: Mapping[str, Any], label: str, salt: str) -> str:
    """The plot of a record's ``prediction`` (``AllocatorRecord.prediction``): the
    predicted peak over its curve, the capacity line, the captured batch and the
    largest batch that fits marked."""
    curve = prediction["curve"]
    captured = None
    if prediction.get("captured_peak_bytes") is not None:
        captured = (int(prediction["captured_batch"]), int(prediction["captured_peak_bytes"]))
    largest = None
    found, peak = prediction.get("largest_batch"), prediction.get("largest_peak_bytes")
    if found is not None and peak is not None and found < MAX_BATCH:
        largest = (int(found), int(peak))
    return prediction_svg(
        [int(n) for n in curve["batch_size"]],
        [int(n) for n in curve["peak_bytes"]],
        [int(n) for n in curve["low_bytes"]],
        [int(n) for n in curve["high_bytes"]],
        capacity_bytes=prediction.get("capacity_bytes"),
        captured=captured,
        largest=largest,
        label=label,
        salt=salt,
    )


def record_prediction_caption(prediction: Mapping[str, Any]) -> str:
    """What the plot of a record's ``prediction`` shows, in sentences."""
    batch = prediction["captured_batch"]
    text = (
        f"The peak predicted at each batch size from the capture at batch {batch} "
        "(by the allocations' shapes, replayed in their order; shaded: the bounds)."
    )
    failed = prediction.get("failed_request")
    if failed:
        text += (
            f" The capture ran out of memory at batch {batch}, at {failed}: every size "
            "asks that request again at its moment, and no size from there up fits."
        )
    capacity = prediction.get("capacity_bytes")
    largest = prediction.get("largest_batch")
    left_out = prediction.get("left_out")
    if capacity is None:
        text += " The capture gives no capacity to fit in."
    elif left_out and not left_out["searched"]:
        text += f" Dashed: the capacity, {format_bytes(capacity)}."
    elif largest is None:
        text += f" Not even a batch of 1 fits in the capacity, {format_bytes(capacity)}."
    elif largest >= MAX_BATCH:
        text += (
            f" Any batch size fits in the capacity, {format_bytes(capacity)}, by the "
            f"prediction (tried up to {MAX_BATCH:,})."
        )
    elif prediction.get("unseen_after_failure"):
        text += (
            f" Dashed: the capacity, {format_bytes(capacity)}; the largest batch size "
            f"that gets past the request the capture ran out of memory at: {largest} "
            f"({format_bytes(prediction['largest_peak_bytes'])} at it). What the step "
            "holds after that request is not in the capture."
        )
    else:
        text += (
            f" Dashed: the capacity, {format_bytes(capacity)}; the largest batch size "
            f"that fits: {largest} (peak {format_bytes(prediction['largest_peak_bytes'])})."
        )
        far = extrapolation_note(int(largest), int(batch))
        if far:
            text += " " + far
    if left_out:  # the report's replay budget (analysis/predict_capacity.report_budget)
        sizes = ", ".join(str(n) for n in left_out["batch_sizes"])
        missing = [f"batch sizes {sizes}"] if sizes else []
        if not left_out["searched"]:
            missing.append("the search for the largest batch that fits")
        text += (
            f" Left out to keep the report near the time reading the capture takes (its "
            f"{left_out['events']:,} memory events replayed at {left_out['replayed']} batch "
            f"sizes): {' and '.join(missing)}; traceparse predict PATH --batch N "
            "--capacity SIZE gives them."
        )
    return text + " traceparse predict PATH --batch N says what grows (docs/predict.md)."


def prediction_page(title: str, sections: Sequence[str]) -> str:
    """A self-contained page of prediction sections (no script)."""
    return (
        "\n".join(
            [
                "<!doctype html>",
                '<html lang="en">',
                "<head>",
                '<meta charset="utf-8">',
                f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
                f"<title>{esc(title)}</title>",
                f"<style>{STYLE}</style>",
                "</head>",
                "<body><main>",
                f"<h1>{esc(title)}</h1>",
                *sections,
                "<footer>Predicted by traceparse from the capture's allocations (docs/predict.md)."
                "</footer>",
                "</main></body>",
                "</html>",
            ]
        )
        + "\n"
    )
