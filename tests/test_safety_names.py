"""Hostile and odd names from captures and paths: shown inert everywhere, processed normally."""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path

import pytest
from helpers.space import SpaceBuilder, alloc, free

from traceparse.cli import app as cli
from traceparse.output import terminal

# Clears the screen, plants a hyperlink, sets the window title; then a newline.
EVIL = "\x1b[2J\x1b]8;;http://evil.example\x07link\x1b]8;;\x07\x9b31m\x1b]0;title\x07"
OP = f"scope/{EVIL}\nforged row/MatMul"
MARKUP_OP = "[link=http://evil.example]click[/link]/Add"
# What must never reach a reader's terminal: ESC, BEL, CSI, and rich's markup.
RAW = re.compile(r"\x1b\]|\x07|\x1b\[2J|\x9b|http://evil\.example\x07")


def hostile_capture(directory: Path, host: str = "host") -> Path:
    b = SpaceBuilder()
    line = b.line()
    total = 0
    for i, op in enumerate([OP, MARKUP_OP, "plain/Mul"]):
        total += 1024 * (3 - i)
        alloc(b, line, 100 + i, addr=i + 1, size=1024 * (3 - i), total=total, tf_op=op)
    free(b, line, 1_000, addr=3, size=1024, total=total - 1024)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{host}.xplane.pb"
    path.write_bytes(b.space.SerializeToString())
    return path


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_capture(tmp_path_factory.mktemp("names") / f"run{EVIL}")


def _assert_inert(text: str) -> None:
    assert not RAW.search(text), repr(RAW.search(text))
    assert "\x1b]8;" not in text


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


COMMANDS = [
    ["summary"],
    ["ops"],
    ["allocations"],
    ["peak"],
    ["scopes"],
    ["report", "--format", "md"],
]


@pytest.mark.parametrize("rich", [False, True], ids=["plain", "rich"])
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_names_from_a_capture_are_inert_on_every_output(
    capture: Path,
    argv: list[str],
    rich: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if rich:
        pytest.importorskip("rich")
        monkeypatch.setattr(terminal, "_isatty", lambda stream: True)
        monkeypatch.setenv("FORCE_COLOR", "1")
    command, *options = argv
    code, out, err = _run([command, str(capture), *options], capsys)
    assert code == 0, err
    _assert_inert(out)
    _assert_inert(err)
    if command != "report":
        # No line starts with what followed the newline in the op name.
        assert not any(line.lstrip().startswith("forged row") for line in out.splitlines())
    if rich:
        assert "\x1b]8;" not in out  # rich made no hyperlink from the markup name


@pytest.mark.parametrize("rich", [False, True], ids=["plain", "rich"])
def test_diff_names_are_inert(
    capture: Path,
    rich: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    if rich:
        pytest.importorskip("rich")
        monkeypatch.setattr(terminal, "_isatty", lambda stream: True)
    other = hostile_capture(tmp_path / "other")
    code, out, err = _run(["diff", str(other), str(capture)], capsys)
    assert code == 0, err
    _assert_inert(out)
    _assert_inert(err)


def test_errors_and_warnings_show_paths_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / f"gone{EVIL}\nforged line"
    code, out, err = _run(["summary", str(missing)], capsys)
    assert code == 3
    _assert_inert(err)
    assert len(err.strip().splitlines()) == 1, err
    empty = tmp_path / f"empty{EVIL}"
    empty.mkdir(parents=True)
    code, out, err = _run(["batch", str(empty), "-o", str(tmp_path / "out"), "-j", "0"], capsys)
    _assert_inert(out + err)


def test_csv_neutralises_a_formula_after_a_line_feed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pandas as pd

    from traceparse.output.export import to_csv

    text = to_csv(pd.DataFrame({"op": ["\n=cmd()", "\r=cmd()", "\r\n=1+1", "ok"]}))
    cells = [row[0] for row in csv.reader(io.StringIO(text, newline=""))][1:]
    for cell in cells[:3]:
        assert cell.startswith("'"), repr(cell)
    assert cells[3] == "ok"


# -- 6. file names that are not UTF-8 ----------------------------------------------------


@pytest.fixture
def non_utf8_tree(tmp_path: Path) -> Path:
    if os.uname().sysname != "Linux":
        pytest.skip("needs a filesystem that takes any bytes in names")
    root = tmp_path / "root"
    run = os.path.join(os.fsencode(root), b"job\xff", b"plugins", b"profile", b"2026_01_01")
    os.makedirs(run)
    data = hostile_capture(tmp_path / "src").read_bytes()
    with open(os.path.join(run, b"h\xfeost.xplane.pb"), "wb") as handle:
        handle.write(data)
    return root


@pytest.mark.parametrize(
    "argv",
    [["summary"], ["ops"], ["peak"], ["report", "--format", "md"], ["report", "--format", "json"]],
    ids=lambda a: "-".join(a),
)
def test_non_utf8_names_are_processed_and_shown_escaped(
    non_utf8_tree: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    command, *options = argv
    code, out, err = _run([command, str(non_utf8_tree), *options], capsys)
    assert code == 0, err
    out.encode("utf-8")  # printable as it is: no lone surrogates
    assert "\\xfe" in out or "\\udcfe" in out or command in ("ops",), out[:500]


def test_non_utf8_names_in_html_and_batch(
    non_utf8_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "r.html"
    code, _, err = _run(["report", str(non_utf8_tree), "-o", str(html)], capsys)
    assert code == 0, err
    html.read_text(encoding="utf-8")
    for _ in range(2):  # and again, resuming
        code, _, err = _run(
            ["batch", str(non_utf8_tree), "-o", str(tmp_path / "b"), "-j", "0"], capsys
        )
        assert code == 0, err
        text = (tmp_path / "b" / "summary.csv").read_text(encoding="utf-8")
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        assert len(rows) == 1 and rows[0]["status"] == "ok" and "\\xfe" in rows[0]["path"]
