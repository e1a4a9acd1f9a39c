"""Output that cannot be turned against its reader, end to end: a capture file whose
op, scope, allocator, region, shape, step and host names are hostile, through the
real command line, into CSV, Markdown, HTML (checked in headless Chromium too),
JSON and the terminal."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.report import assert_tables_well_formed, flat, markdown_tokens
from helpers.space import SpaceBuilder, alloc, free

from traceparse.cli import app as cli
from traceparse.report.escape import one_line
from traceparse.report.interact import SCRIPT

# Names a model author (or whoever made the file) controls.
OPS = [
    "<script>window.__pwned=1</script>/MatMul",
    "<img src=x onerror=window.__pwned=1>/dense/MatMul",
    "a|b`c``d|`/pipes/Add",
    "` leading backtick/x/Op",
    '=HYPERLINK("http://evil.example","x")',
    "+SUM(1+1)*cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "\t=1+1",
    "\r=1+1",
    "\x1b[31mred\x1b]0;title\x07/ansi/Mul",
    "[x](https://evil.example) ![i](https://evil.example/i.png)/md/Op",
]
HOST = "=1+2|`h`<img src=x onerror=window.__pwned=1>"
ALLOCATOR = "<b>GPU</b>|`bfc`"
REGION = "<i>temp</i>|x"
MARKER = "<script>window.__pwned=2</script>"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"^-?\d+(\.\d+)?(e[+-]?\d+)?$")


def hostile_capture(directory: Path) -> Path:
    """A capture file with every name hostile: 4 marked steps, one allocation per op."""
    b = SpaceBuilder()
    b.plane.event_metadata[3].name = MARKER  # the step markers' name
    line = b.line()
    total = 0
    sizes = [1024 * (len(OPS) - i) for i in range(len(OPS))]  # the first ops hold most
    for i, op in enumerate(OPS):
        step = i % 4
        if i < 4:
            b.event(line, 3, step * 10_000, step_num=step, _r=1).duration_ps = 9_000
        size = sizes[i]
        total += size
        t = step * 10_000 + 100 + i
        alloc(b, line, t, addr=i + 1, size=size, total=total, tf_op=op, shape="[<script>]")
        event = line.events[-1]
        for stat in event.stats:
            if stat.metadata_id == b.stat_id("allocator_name"):
                stat.ref_value = b.ref(ALLOCATOR)
        event.stats.add(metadata_id=b.stat_id("region_type"), ref_value=b.ref(REGION))
        event.stats.add(metadata_id=b.stat_id("data_type"), int64_value=1)
    for i in range(4, len(OPS)):  # the last step frees more than it allocates
        total -= sizes[i]
        free(b, line, 35_000 + i, addr=i + 1, size=sizes[i], total=total)
        line.events[-1].stats[0].ref_value = b.ref(ALLOCATOR)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{HOST}.xplane.pb"
    path.write_bytes(b.space.SerializeToString())
    return path


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_capture(tmp_path_factory.mktemp("hostile"))


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main(["--quiet", "--no-color", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


# -- CSV ------------------------------------------------------------------------------


def assert_no_formula(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    for row in rows:
        for cell in row:
            if cell.startswith(FORMULA_START):
                assert NUMBER.match(cell), f"a cell a spreadsheet would run: {cell!r}"
    return rows


@pytest.mark.parametrize("command", ["ops", "allocations", "scopes", "steps", "peak"])
def test_csv_cells_that_could_be_formulas_are_neutralised(
    command: str, capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = assert_no_formula(run([command, str(capture), "--format", "csv"], capsys))
    cells = {cell for row in rows for cell in row}
    assert "'" + HOST in cells
    if command in ("ops", "allocations"):
        # The name is kept, behind an apostrophe, so the reader still sees it.
        for op in OPS:
            shown = "'" + op if op.startswith(FORMULA_START) else op
            assert shown.replace("\r", "\n") in cells, op  # a CR cannot end the row


def test_csv_written_to_a_file_is_neutralised_too(
    capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ops.csv"
    run(["ops", str(capture), "-o", str(out)], capsys)
    rows = assert_no_formula(out.read_text(encoding="utf-8"))
    assert any("'" + OPS[4] in row for row in rows)


def test_negative_numbers_stay_numbers(capsys: pytest.CaptureFixture[str], capture: Path) -> None:
    rows = assert_no_formula(run(["steps", str(capture), "--format", "csv"], capsys))
    header, *body = rows
    growth = [row[header.index("growth_bytes")] for row in body]
    assert any(cell.startswith("-") for cell in growth), growth


# -- Markdown -------------------------------------------------------------------------


def test_markdown_keeps_pipes_and_backticks_inside_their_cells(
    capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = run(["report", str(capture), "--format", "md"], capsys)
    assert assert_tables_well_formed(text) >= 5
    tokens = flat(markdown_tokens(text))
    allowed = re.compile(
        r'^(<a id="run-\d+-\d+">|</a>|</?details>|<summary>[^<>]*</summary>|</?sub>)\s*$'
    )
    for token in tokens:
        kind = getattr(token, "type", "")
        assert kind != "image"
        if kind in ("html_inline", "html_block"):
            for line in str(getattr(token, "content", "")).strip().splitlines():
                assert allowed.match(line), f"raw HTML from a name: {line!r}"
        if kind == "link_open":
            assert str(dict(getattr(token, "attrs", {})).get("href", "")).startswith("#run-")
    spans = {
        str(getattr(t, "content", "")) for t in tokens if getattr(t, "type", "") == "code_inline"
    }
    # Each name comes back exactly, in one code span (line breaks as spaces).
    for name in [HOST, ALLOCATOR, *OPS[:4]]:
        assert one_line(name) in spans, name
    assert "a|b`c``d|`" in spans  # the scope of "a|b`c``d|`/pipes/Add"
    # In headings and lists (outside tables) nothing would undo a "\|": none is written.
    assert not [span for span in spans if "\\|" in span]


# -- HTML -----------------------------------------------------------------------------


class Page(HTMLParser):
    """The elements, attributes and text of a page, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend((name, value or "") for name, value in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def html_report(tmp_path_factory: pytest.TempPathFactory, capture: Path) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert cli.main(["--quiet", "report", str(capture), "-o", str(out)]) == 0
    return out


def test_html_report_escapes_every_name(html_report: Path) -> None:
    page = Page()
    text = html_report.read_text(encoding="utf-8")
    page.feed(text)
    # One script: the report's own (sort and filter), the only one its policy allows.
    assert page.tags.count("script") == 1 and f"<script>{SCRIPT}</script>" in text
    assert "img" not in page.tags and "b" not in page.tags
    assert not [name for name, _ in page.attributes if name.startswith("on")]
    for name, value in page.attributes:
        if name in ("href", "src", "xlink:href", "action"):
            assert value.startswith(("#", "data:")), (name, value)
    text = html.unescape("".join(page.text))
    for name in [HOST, ALLOCATOR, MARKER, REGION, *OPS[:3]]:
        assert one_line(name) in text, name


def test_html_report_runs_nothing_in_chromium(html_report: Path, tmp_path: Path) -> None:
    from helpers.browser import open_in_chromium, screenshot_path

    shot = screenshot_path(tmp_path, "report-hostile-capture.png")
    found = open_in_chromium(html_report, shot, tmp_path / "chromium-profile")
    assert found["problems"] == []
    assert not found["pwned"]
    assert found["scripts"] == 1 and found["handlers"] == 0  # the report's own script
    assert found["resources"] == []
    for name in [HOST, ALLOCATOR, OPS[0], OPS[1]]:
        assert one_line(name) in found["text"], name


# -- JSON and the terminal ------------------------------------------------------------


def test_json_keeps_names_exactly(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = json.loads(run(["ops", str(capture), "--format", "json"], capsys))
    assert {row["op"] for row in rows} == set(OPS)
    assert {row["host"] for row in rows} == {HOST}


@pytest.mark.parametrize("command", ["ops", "summary"])
def test_terminal_output_carries_no_control_characters(
    command: str, capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run([command, str(capture)], capsys)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out), repr(out[:200])
