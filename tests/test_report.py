"""Reports on real captures: golden Markdown and JSON, the HTML page's content,
hostile names, empty captures, several runs, and writing the file.

Golden files live in tests/golden/report/; regenerate them with
``TRACEPARSE_UPDATE_GOLDEN=1 pytest tests/test_report.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, REPO
from helpers.report import (
    HOSTILE,
    VERSION,
    assert_tables_well_formed,
    flat,
    hostile_profile,
    keras_profile,
    markdown_tokens,
)

import traceparse
from traceparse import UsageError
from traceparse.report import render_html, render_json, render_markdown, write_report
from traceparse.report.interact import SCRIPT, SCRIPT_HASH

GOLDEN = Path(__file__).parent / "golden" / "report"

# Names a model author controls (op names, name scopes, hosts), chosen to break
# out of HTML, Markdown code spans, table cells, links, math and comments.


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01T00:00:00Z


def normalise(text: str) -> str:
    """Drop what changes between machines and re-captures: paths, run timestamps."""
    text = text.replace(str(FIXTURES), "fixtures").replace(str(REPO), "<repo>")
    return re.sub(r"\b\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\b", "<run>", text)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    text = normalise(text)
    if os.environ.get("TRACEPARSE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with TRACEPARSE_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} differs from {path}; if the change is intended, regenerate with "
        "TRACEPARSE_UPDATE_GOLDEN=1 and review the diff"
    )


# -- golden files ---------------------------------------------------------------------


def test_markdown_golden() -> None:
    check_golden("keras_train.md", render_markdown([keras_profile()], VERSION))


def test_json_golden() -> None:
    check_golden("keras_train.json", render_json([keras_profile()], VERSION))


# -- Markdown -------------------------------------------------------------------------


def test_markdown_headline_comes_first() -> None:
    text = render_markdown([keras_profile()], VERSION)
    summary = keras_profile().summary()[0]
    first_table = text.split("\n\n")[2]
    assert first_table.startswith("| Run | Host | Allocator | Peak | Capacity | Utilisation")
    assert "**" in first_table and "MiB" in first_table
    assert text.index("Leak check") < text.index("#### ")
    assert str(summary.allocator) in first_table


def test_markdown_tables_are_well_formed() -> None:
    assert assert_tables_well_formed(render_markdown([keras_profile()], VERSION)) >= 5


def test_markdown_hostile_names_stay_in_their_cells() -> None:
    text = render_markdown([hostile_profile()], VERSION)
    tokens = flat(markdown_tokens(text))
    # Raw HTML: only the report's own anchors and folds.
    allowed = re.compile(
        r'^(<a id="run-\d+-\d+">|</a>|</?details>|<summary>[^<>]*</summary>|</?sub>)\s*$'
    )
    for token in tokens:
        if getattr(token, "type", "") in ("html_inline", "html_block"):
            for line in str(getattr(token, "content", "")).strip().splitlines():
                assert allowed.match(line), f"raw HTML from a name: {line!r}"
    # No links but the report's own, no images, no headings from names.
    for token in tokens:
        kind = getattr(token, "type", "")
        assert kind != "image"
        if kind == "link_open":
            assert str(dict(getattr(token, "attrs", {})).get("href", "")).startswith("#run-")
    # Every hostile name comes back exactly (line breaks as spaces) in a code span.
    spans = {
        str(getattr(t, "content", "")) for t in tokens if getattr(t, "type", "") == "code_inline"
    }
    for name in HOSTILE:
        flat_name = re.sub(r"[\r\n]+", " ", name)
        assert any(flat_name in span for span in spans), name
    assert assert_tables_well_formed(text) >= 5


def test_markdown_says_plainly_when_there_are_no_memory_events() -> None:
    profile = traceparse.load(FIXTURES / "no_memory")
    text = render_markdown([profile], VERSION)
    assert "No memory to report" in text
    assert "no memory events" in text
    assert "| Op |" not in text and "####" not in text


# -- HTML -----------------------------------------------------------------------------


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.handlers: list[tuple[str, str]] = []
        self.urls: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append((tag, name))
            if name in ("src", "href", "xlink:href", "action") and value:
                self.urls.append(value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_html(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def test_html_is_self_contained_with_charts_and_tables() -> None:
    text = render_html([keras_profile()], VERSION)
    page = parse_html(text)
    assert text.startswith("<!doctype html>")
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    # One script, the report's own (sorting, filtering), allowed by its hash only.
    assert page.tags.count("script") == 1 and f"<script>{SCRIPT}</script>" in text
    assert (
        f"script-src '{SCRIPT_HASH}'" in text
        and "unsafe-inline'" not in text.split("script-src")[1][:80]
    )
    assert all(u.startswith("#") for u in page.urls), page.urls  # nothing fetched
    assert page.tags.count("svg") >= 4  # timeline, ops, scopes, attribution
    assert 'class="chart timeline"' in text
    assert page.tags.count("table") >= 5
    body = " ".join(page.text)
    assert "MiB" in body and "ms" in body and "Leak check" in body


def test_html_escapes_hostile_names() -> None:
    text = render_html([hostile_profile()], VERSION)
    page = parse_html(text)
    assert page.tags.count("script") == 1 and "img" not in page.tags  # only the report's
    assert page.handlers == []
    assert all(u.startswith("#") for u in page.urls), page.urls
    body = "".join(page.text)
    assert HOSTILE[0] in body and HOSTILE[1] in body
    assert text.lower().count("<script") == 1 and f"<script>{SCRIPT}</script>" in text


# -- JSON -----------------------------------------------------------------------------


def test_json_has_schema_version_summaries_and_tables() -> None:
    document = json.loads(render_json([keras_profile()], VERSION))
    assert list(document)[:2] == ["schema_version", "generator"]
    assert document["schema_version"] == 1
    (profile,) = document["profiles"]
    assert set(profile["tables"]) == {"peak", "attribution", "ops", "layers", "steps"}
    summary = profile["summary"][0]
    layers = profile["tables"]["layers"]
    assert sum(r["live_at_peak_bytes"] for r in layers) == summary["peak_bytes"]
    prof = keras_profile()
    assert summary["peak_bytes"] == prof.summary()[0].peak_bytes
    assert len(profile["tables"]["ops"]) == len(prof.ops)
    assert len(profile["tables"]["peak"]) == len(prof.peak)


def test_json_writes_unknowns_as_null() -> None:
    from traceparse.report.jsonreport import frame_records, jsonable

    frame = pd.DataFrame(
        {
            "a": pd.array([1, None], dtype="Int64"),
            "b": [1.5, float("nan")],
            "c": pd.Categorical(["x", None]),
        }
    )
    assert frame_records(frame) == [{"a": 1, "b": 1.5, "c": "x"}, {"a": None, "b": None, "c": None}]
    assert jsonable(float("inf")) is None
    text = render_json([hostile_profile()], VERSION)
    assert "NaN" not in text
    json.loads(text)


def test_json_for_a_capture_without_memory_events() -> None:
    document = json.loads(render_json([traceparse.load(FIXTURES / "no_memory")], VERSION))
    (profile,) = document["profiles"]
    assert profile["summary"] == []
    assert any("no memory events" in d for d in profile["diagnostics"])


# -- write_report ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_write_report_returns_and_writes_the_text(fmt: str, tmp_path: Path) -> None:
    target = tmp_path / "out" / f"report.{fmt}"
    text = write_report([keras_profile()], fmt, target)  # type: ignore[arg-type]
    assert target.read_text(encoding="utf-8") == text
    assert write_report([keras_profile()], fmt) == text  # type: ignore[arg-type]


def test_write_report_rejects_an_unknown_format() -> None:
    with pytest.raises(UsageError, match="unknown report format 'pdf'"):
        write_report([keras_profile()], "pdf")  # type: ignore[arg-type]


def test_a_section_per_run_host_and_allocator() -> None:
    profiles = traceparse.load_all(FIXTURES / "two_runs")
    assert len(profiles) >= 2
    text = render_markdown(profiles, VERSION)
    sections = sum(len(p.summary()) for p in profiles)
    assert text.count("\n### ") == sections
    assert text.count("\n## Run ") == len(profiles)
    document = json.loads(render_json(profiles, VERSION))
    assert len(document["profiles"]) == len(profiles)
    html = render_html(profiles, VERSION)
    assert html.count('class="chart timeline"') == sections


def test_importing_traceparse_does_not_import_matplotlib() -> None:
    code = (
        "import sys, traceparse, traceparse.report, traceparse.report.html, "
        "traceparse.report.plots\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
