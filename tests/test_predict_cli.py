"""``traceparse predict``: the command, its JSON, its HTML page and its errors."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURES, run_traceparse

from traceparse.report.plots import prediction_svg


def test_predict_prints_the_peak_its_parts_and_the_largest_batch() -> None:
    proc = run_traceparse(
        "predict", str(FIXTURES / "batch_128"), "--batch", "256", "--capacity", "48MiB"
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "predicted peak at batch 256" in out
    assert "The largest batch size that fits:" in out and "of 48 MiB" in out
    assert "activations" in out and "optimizer state" in out
    assert "Batch 256 does not fit" in out or "Batch 256 fits" in out
    # Which evidence gave the captured batch is said.
    assert "The captured batch size 128: activations and their gradients:" in out
    # On mklcpu, what the pool hid at 128 and reaches the allocator at 256 is said.
    assert "under 2 KiB per example are not in this capture at batch 128" in out
    assert "at batch 256 those of 1 KiB per example and more" in out
    # ... and that the bounds do not hold them either (nothing gives their sizes).
    assert "neither the prediction nor its bounds hold them" in out
    smaller = run_traceparse("predict", str(FIXTURES / "batch_128"), "--batch", "64")
    assert smaller.returncode == 0 and "Not predicted" not in smaller.stdout


def test_predict_json_with_two_captures() -> None:
    proc = run_traceparse(
        "predict",
        str(FIXTURES / "batch_128"),
        "--batch",
        "512",
        "--with",
        str(FIXTURES / "batch_256"),
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (row,) = data["predictions"]
    assert row["batch_size"] == 512 and row["other_batch"] in (128, 256)
    assert row["low_bytes"] <= row["predicted_peak_bytes"] <= row["high_bytes"]
    assert "two captures: affine fit" in row["basis"]
    assert row["batch_evidence"].startswith("activations and their gradients")
    assert sum(r["bytes"] for r in data["breakdown"]) == row["predicted_peak_bytes"]
    (fit,) = data["capacity"]  # the capture's own capacity by default
    assert fit["capacity_bytes"] == row["capacity_bytes"] and fit["fits"] is True


def test_predict_writes_a_page_with_the_plot(tmp_path: Path) -> None:
    page = tmp_path / "predict.html"
    proc = run_traceparse(
        "predict",
        str(FIXTURES / "predict_xla_64"),
        "--batch",
        "256",
        "--capacity",
        "45MiB",
        "-o",
        str(page),
        "-q",
    )
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert text.count("<svg") == 1 and "largest that fits" in text and "capacity 45 MiB" in text
    assert "<script" not in text


def test_predict_errors_are_one_line() -> None:
    missing = run_traceparse("predict", str(FIXTURES / "no_such_dir"), "--batch", "8")
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1
    bad = run_traceparse("predict", str(FIXTURES / "batch_128"), "--batch", "0")
    assert bad.returncode == 2
    unknown = run_traceparse(
        "predict", str(FIXTURES / "batch_128"), "--batch", "8", "--allocator", "GPU_0_bfc"
    )
    assert unknown.returncode != 0 and "GPU_0_bfc" in unknown.stderr
    empty = run_traceparse("predict", str(FIXTURES / "no_memory"), "--batch", "8")
    assert empty.returncode != 0 and "no memory events" in empty.stderr
    assert "no_memory" in empty.stderr and len(empty.stderr.strip().splitlines()) == 1
    # No input tensors and no dimension led in both passes: refused, never assumed.
    weak = run_traceparse("predict", str(FIXTURES / "leak"), "--batch", "8")
    assert weak.returncode == empty.returncode and "--from-batch" in weak.stderr
    assert "leak" in weak.stderr and len(weak.stderr.strip().splitlines()) == 1
    given = run_traceparse("predict", str(FIXTURES / "leak"), "--batch", "8", "--from-batch", "4")
    assert given.returncode == 0 and "given (--from-batch)" in given.stdout


def test_prediction_svg_draws_bounds_capacity_and_marks() -> None:
    svg = prediction_svg(
        [16, 32, 64],
        [10 << 20, 14 << 20, 22 << 20],
        [9 << 20, 12 << 20, 20 << 20],
        [12 << 20, 20 << 20, 40 << 20],
        capacity_bytes=16 << 20,
        captured=(16, 10 << 20),
        largest=(40, 16 << 20),
    )
    assert svg.startswith("<svg") and "capacity 16 MiB" in svg
    assert "largest that fits: 40" in svg and "captured: batch 16" in svg
