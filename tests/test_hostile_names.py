"""Names that hide or reorder text (bidi overrides, zero-width characters), raw
ESC/BEL, and megabyte names, through every command and both reports
(docs/robustness.md, "Output that cannot be turned against its reader")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bounded import check_bounds, every_command, run_bounded
from test_decode import SpaceBuilder, alloc

from traceparse.output.cells import MAX_NOTE_WIDTH, MAX_REPORT_CELL_WIDTH

# Reads "txt.exe" as "exe.txt", hides a word, rings the bell, clears the screen.
BIDI = "scope/\u202etxt.exe\u202c/\u2066x\u2069/zero\u200bwidth\u200d\ufeff/\x1b[2J\x07/MatMul"
LONG = "outer/" + "\u202eL" * 1_000_000 + "/Add"
RAW = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2060\ufeff\x1b\x07]")


def crafted(directory: Path) -> Path:
    b = SpaceBuilder()
    line = b.line()
    total = 0
    for i, op in enumerate([BIDI, LONG, "plain/Mul"]):
        total += 1024 * (3 - i)
        alloc(b, line, 100 + i, addr=i + 1, size=1024 * (3 - i), total=total, tf_op=op)
    run = directory / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "host.xplane.pb").write_bytes(b.space.SerializeToString())
    return run


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[object]]:
    root = tmp_path_factory.mktemp("names")
    run = crafted(root / "logs")
    return root, run_bounded(every_command([run], root), cwd=root)  # type: ignore[return-value]


def test_every_command_is_bounded_and_shows_no_invisible_character(
    results: tuple[Path, list],  # type: ignore[type-arg]
) -> None:
    root, ran = results
    check_bounds(ran, problems=0)
    for r in ran:
        assert not RAW.search(r.stdout), (r.argv, RAW.search(r.stdout))
        assert not RAW.search(r.stderr), r.argv
        # The megabyte name is cut in every table for people.
        assert max(map(len, r.stdout.splitlines()), default=0) < 10_000, r.argv
    for name in ("report.md", "report.html"):
        text = (root / name).read_text()
        assert not RAW.search(text), (name, RAW.search(text))
        assert "\\u202e" in text  # shown, not dropped
        assert len(text) < 2_000_000, name  # not a copy of the name per row


def test_markdown_cells_are_capped(results: tuple[Path, list]) -> None:  # type: ignore[type-arg]
    root, _ = results
    text = (root / "report.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    for row in rows:
        cells = row.strip("|").split(" | ")
        # A cell holds at most the capped name, each of its characters escaped
        # (\u202e is six characters), plus the code span's fences.
        assert all(len(cell) <= 6 * MAX_REPORT_CELL_WIDTH + 10 for cell in cells), len(row)


def test_report_cells_and_diagnostics_are_capped() -> None:
    from traceparse.output.cells import note_line
    from traceparse.report.view import _notes

    note = "x: " + "\u202e" * 5_000_000
    assert len(note_line(note)) == MAX_NOTE_WIDTH
    assert "\u202e" not in note_line(note)
    assert [len(n) for n in _notes([note, "short"])] == [MAX_NOTE_WIDTH, 5]
