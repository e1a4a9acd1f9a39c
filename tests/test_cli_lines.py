"""Issue 52: ``lines --flame`` names its file honestly and says it wrote it;
``--stack``'s column says what its numbers are."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceparse.cli.app import main

CAPTURE = "fixtures/sources_tape"


@pytest.mark.parametrize("name", ["flame.svg", "flame.png", "flame.json"])
def test_a_flame_named_for_another_format_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # Was: an HTML page written under flame.svg, and no word of it.
    target = tmp_path / name
    assert main(["lines", CAPTURE, "--flame", str(target)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert str(target) in err and "HTML" in err and ".html" in err
    assert not target.exists()


def test_the_flame_is_written_and_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "flame.html"
    assert main(["lines", CAPTURE, "--flame", str(target)]) == 0
    err = capsys.readouterr().err
    assert f"Wrote {target}" in err
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_the_stack_column_says_what_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lines", CAPTURE, "--stack", "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "stack id" in out[1]
    note = next(line for line in out if line.startswith("stack id:"))
    assert "call stack" in note and "Profile.stacks" in note
    # Exports keep the column's own name and no prose.
    assert main(["lines", CAPTURE, "--stack", "--format", "csv"]) == 0
    csv = capsys.readouterr().out
    assert "stack" in csv.splitlines()[0].split(",") and "stack id" not in csv


def test_without_stack_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lines", CAPTURE, "--top", "3"]) == 0
    assert "stack id" not in capsys.readouterr().out
