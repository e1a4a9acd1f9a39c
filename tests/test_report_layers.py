"""The layers table in the reports and as ``traceparse layers``, on the layer fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from conftest import FIXTURES, run_traceparse

import traceparse
from traceparse.analysis.layer_names import BEFORE_CAPTURE
from traceparse.report import render_html, render_json, render_markdown

VERSION = "0.0.0-test"


def test_markdown_html_and_json_reports_show_the_layers() -> None:
    prof = traceparse.load(FIXTURES / "layers_functional")
    markdown = render_markdown([prof], VERSION)
    section = markdown[markdown.index("#### Layers holding memory at the peak") :]
    section = section[: section.index("\n\n####")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows[0].startswith("| `shared` |")
    assert any(BEFORE_CAPTURE in row for row in rows)
    html = render_html([prof], VERSION)
    chart = html[html.index("<h4>Layers holding memory at the peak</h4><figure") :]
    chart = chart[: chart.index("</figure>")]
    assert "<svg" in chart and "gradients" in chart and "shared" in chart
    tables = json.loads(render_json([prof], VERSION))["profiles"][0]["tables"]
    layers = tables["layers"]
    assert sum(r["live_at_peak_bytes"] for r in layers) == tables["peak"][0]["in_use_bytes"]


def test_a_capture_without_model_layers_has_no_layers_section() -> None:
    prof = traceparse.load(FIXTURES / "leak")
    assert "Layers holding memory" not in render_markdown([prof], VERSION)


def test_the_layers_command_in_json_csv_and_parquet(tmp_path: Path) -> None:
    result = run_traceparse("layers", "fixtures/layers_cnn", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows[0]["layer"] == "conv_a"
    in_use = traceparse.load(FIXTURES / "layers_cnn").peak["in_use_bytes"].sum()
    assert sum(r["live_at_peak_bytes"] for r in rows) == in_use
    target = tmp_path / "layers.parquet"
    assert run_traceparse("layers", "fixtures/layers_cnn", "-o", str(target)).returncode == 0
    frame = pd.read_parquet(target)
    assert frame["layer"].tolist() == [r["layer"] for r in rows]
    table = run_traceparse("layers", "fixtures/layers_sequential", "--by-replica")
    assert table.returncode == 0, table.stderr
    assert "Replica" in table.stdout or "replica" in table.stdout
    assert "dense_1" in table.stdout


def test_the_summary_json_carries_the_layers() -> None:
    result = run_traceparse("summary", "fixtures/layers_sequential", "--format", "json")
    assert result.returncode == 0, result.stderr
    (profile,) = json.loads(result.stdout)
    layers = profile["layers"]
    assert [r["layer"] for r in layers][:2] == ["dense_1", "dense"]
    assert sum(r["live_at_peak_bytes"] for r in layers) == profile["allocators"][0]["peak_bytes"]
