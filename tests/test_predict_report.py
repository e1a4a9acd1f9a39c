"""The prediction at other batch sizes in the reports (issue 40): the HTML plot of
the predicted peak against the batch size and the JSON's numbers, checked
against ``Profile.predict`` and ``capacity_fit`` (computed apart, one batch at a
time), and a capture whose batch size cannot be read."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, run_traceparse

import traceparse
from traceparse.analysis.predict import capacity_fit
from traceparse.core.profile import predictor_of
from traceparse.output.units import format_bytes
from traceparse.report import render_html, render_json

TITLE = "Predicted peak against batch size"


def load(name: str) -> traceparse.Profile:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traceparse.load(FIXTURES / name)


@pytest.mark.parametrize("name", ["batch_128", "predict_xla_64"])
def test_report_json_carries_the_prediction_of_profile_predict(name: str) -> None:
    profile = load(name)
    (record,) = json.loads(render_json([profile], "0"))["profiles"][0]["summary"]
    prediction = record["prediction"]
    fresh = load(name)  # its own Predictor for every batch: nothing shared with the report
    captured = fresh.predict()
    batch = int(captured["from_batch"].iloc[0])
    assert prediction["captured_batch"] == batch
    assert prediction["captured_peak_bytes"] == record["peak_bytes"]
    assert prediction["capacity_bytes"] == record["capacity_bytes"]
    sizes = [point["batch_size"] for point in prediction["curve"]]
    # A quarter of the captured batch to eight times it, then on to the largest that fits.
    assert sizes[:6] == [batch // 4, batch // 2, batch, batch * 2, batch * 4, batch * 8]
    assert sizes == sorted(set(sizes)) and sizes[-1] == prediction["largest_batch"]
    for point in prediction["curve"]:
        (row,) = fresh.predict(point["batch_size"]).to_dict("records")
        assert point["peak_bytes"] == row["predicted_peak_bytes"]
        assert point["low_bytes"] == row["low_bytes"]
        assert point["high_bytes"] == row["high_bytes"]
    # At the captured batch the prediction is the capture itself.
    assert prediction["curve"][2]["peak_bytes"] == record["peak_bytes"]
    # The largest batch that fits is `traceparse predict --capacity`'s answer.
    capacity = int(record["capacity_bytes"])
    fit = capacity_fit(predictor_of(fresh), ("localhost", record["allocator"]), capacity, batch)
    assert prediction["largest_batch"] == fit.largest
    assert prediction["largest_peak_bytes"] == fit.largest_peak_bytes <= capacity
    (above,) = fresh.predict(fit.largest + 1).to_dict("records")  # type: ignore[operator]
    assert above["predicted_peak_bytes"] > capacity


@pytest.mark.parametrize("name", ["batch_128", "predict_xla_64"])
def test_report_html_plots_the_prediction_with_the_capacity(name: str) -> None:
    profile = load(name)
    (record,) = profile.summary(predict=True)
    prediction = record.prediction
    assert prediction is not None
    # Made only when asked: the terminal, the gate and Markdown do not replay.
    assert profile.summary()[0].prediction is None
    page = render_html([profile], "0")
    assert page.count(f"<h4>{TITLE}</h4>") == 1
    largest = prediction["largest_batch"]
    # The plot marks the captured batch and the largest that fits, and draws the capacity.
    assert f"captured: batch {prediction['captured_batch']}" in page
    assert f"largest that fits: {largest}" in page
    assert f"capacity {format_bytes(record.capacity_bytes)}" in page
    peak = format_bytes(prediction["largest_peak_bytes"])
    assert f"the largest batch size that fits: {largest} (peak {peak})" in page


def test_report_command_writes_the_prediction(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    proc = run_traceparse("report", str(FIXTURES / "batch_128"), "-o", str(target), "-q")
    assert proc.returncode == 0, proc.stderr
    (record,) = json.loads(target.read_text())["profiles"][0]["summary"]
    assert record["prediction"]["captured_batch"] == 128


def test_a_capture_whose_batch_cannot_be_read_reports_without_a_prediction() -> None:
    profile = load("batch_128")
    # The same capture with no shapes recorded (as when the tracer level is low).
    allocations = profile.allocations
    bare = allocations.assign(shape=pd.Series(pd.NA, index=allocations.index))
    profile.__dict__["_prediction_input"] = replace(profile._prediction_input, allocations=bare)
    (record,) = profile.summary(predict=True)
    assert record.prediction is None and record.to_dict()["prediction"] is None
    (summary,) = json.loads(render_json([profile], "0"))["profiles"][0]["summary"]
    assert summary["prediction"] is None and summary["peak_bytes"] == record.peak_bytes
    page = render_html([profile], "0")
    assert TITLE not in page and "What the bytes in use at the peak are" in page
