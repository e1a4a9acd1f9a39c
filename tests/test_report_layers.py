"""The layers table in the reports and as ``traceparse layers``, on the layer fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from conftest import FIXTURES, run_traceparse

import traceparse
from traceparse.analysis.naming import BEFORE_CAPTURE
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


def test_long_layer_names_keep_both_ends_on_the_chart_and_show_whole_on_hover() -> None:
    """Layer names that differ only at the start or at the end stay apart on the
    axis (cut in the middle), and each label's hover title is the full name."""
    import html
    import re

    from traceparse.report.layer_plots import LABEL_LIMIT, LAYER_PARTS, layers_svg

    stem = "transformer_block_with_a_long_descriptive_name"
    names = [f"encoder_{stem}_attention_11", f"decoder_{stem}_attention_11", f"encoder_{stem}_mlp"]
    frame = pd.DataFrame({"layer": names, **{c: [3 << 20, 2 << 20, 1 << 20] for c in LAYER_PARTS}})
    svg = layers_svg(frame, label="layers", salt="t")
    titles = [html.unescape(t) for t in re.findall(r"<title>(.*?)</title>", svg)]
    assert titles == names
    # The label's own text (real SVG text, svg.fonttype "none"), in its group.
    shown = []
    for i in range(len(names)):
        group = svg[svg.index(f'<g id="t-label-{i}">') :]
        found = re.search(r"<text [^>]*>(.*?)</text>", group)
        assert found is not None
        shown.append(html.unescape(found.group(1)))
    assert len(set(shown)) == len(names)
    for full, label in zip(names, shown, strict=True):
        assert len(label) <= LABEL_LIMIT and "…" in label
        head, tail = label.split("…")
        assert full.startswith(head) and full.endswith(tail)
    short = layers_svg(frame.assign(layer=["conv_a", "conv_b", "dense_1"]), label="l", salt="s")
    assert ">conv_a</text>" in short and "<title>conv_a</title>" in short
