"""The README's tour reproduces: every ``$ traceparse ...`` in a console block that reads
a fixture prints exactly what the README shows (stdout, then stderr; ``echo $?`` the code).

Commands that capture (``run``), write files (``-o``) or append to a CI file are
skipped: they print nothing to compare.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import REPO, run_traceparse

BLOCK = re.compile(r"```console\n(.*?)```", re.S)


def tour() -> list[tuple[list[str], str, int | None]]:
    """(arguments, expected output, expected exit code or None) per command shown."""
    found: list[tuple[list[str], str, int | None]] = []
    for block in BLOCK.findall((REPO / "README.md").read_text()):
        current: list[str] | None = None
        lines: list[str] = []
        code: int | None = None
        expecting_code = False
        for line in [*block.splitlines(), "$ end"]:
            if line.startswith("$ "):
                if current is not None:
                    found.append((current, "\n".join(lines), code))
                words = shlex.split(line[2:])
                current, lines, code = None, [], None
                expecting_code = words == ["echo", "$?"]
                if words[:1] == ["traceparse"] and _comparable(words):
                    current = words[1:]
                continue
            if expecting_code and found:
                found[-1] = (found[-1][0], found[-1][1], int(line))
                expecting_code = False
            elif current is not None:
                lines.append(line)
    return found


def _comparable(words: list[str]) -> bool:
    reads_a_fixture = any(w.startswith("fixtures/") for w in words)
    return reads_a_fixture and words[1] != "run" and "-o" not in words and ">>" not in words


TOUR = tour()


def test_the_tour_has_commands() -> None:
    assert len(TOUR) >= 5, TOUR


@pytest.mark.parametrize(("args", "expected", "code"), TOUR, ids=[" ".join(a) for a, _, _ in TOUR])
def test_the_readme_tour_reproduces(args: list[str], expected: str, code: int | None) -> None:
    result = run_traceparse(*args, env={"COLUMNS": "200"})
    shown = (result.stdout + result.stderr).rstrip("\n")
    assert shown == expected.rstrip("\n")
    assert result.returncode == (0 if code is None else code)


def test_the_tours_capture_runs_the_shipped_example(tmp_path: Path) -> None:
    """The tour's first command works as written: the script exists and runs under `run`."""
    text = (REPO / "README.md").read_text()
    runs = [line[2:] for line in text.splitlines() if line.startswith("$ traceparse run ")]
    assert runs, "the tour no longer shows traceparse run"
    words = shlex.split(runs[0])
    script = next(w for w in words[2:] if w.endswith(".py"))
    assert (REPO / script).is_file(), f"the tour runs {script}, which is not shipped"
    assert ". .venv/bin/activate" in text  # how to get traceparse on PATH after make demo
    pytest.importorskip("tensorflow")
    args = [*words[1:2], "--logdir", str(tmp_path / "logs"), *words[2:]]
    result = run_traceparse(*args, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("trained 1 epoch")
    assert "Peak in use" in result.stderr
    # No raw TensorFlow step id reaches a person (they are 18-19 digit numbers).
    assert not re.search(r"\d{12,}", result.stderr), result.stderr
