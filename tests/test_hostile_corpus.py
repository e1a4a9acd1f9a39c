"""Every input that ever made traceparse fail (tests/fuzz/corpus/, saved by the fuzz
runs; INDEX.json says what each one did) still fails cleanly or loads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fuzz.harness import exercise
from fuzz.mutations import SUFFIXES

CORPUS = Path(__file__).parent / "fuzz" / "corpus"
FILES = sorted(p for p in CORPUS.iterdir() if p.name.endswith(SUFFIXES))
TIME_BOUND = 30.0


def test_the_corpus_is_indexed() -> None:
    index = json.loads((CORPUS / "INDEX.json").read_text())
    assert FILES, "the regression corpus is empty"
    assert sorted(index) == [p.name for p in FILES]
    for name, entry in index.items():
        assert entry["failure"] and entry["fixed"], name


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_input_fails_cleanly_or_loads(path: Path) -> None:
    started = time.process_time()
    outcome = exercise(path)
    assert time.process_time() - started < TIME_BOUND
    assert outcome == "ok" or outcome.endswith("Error")


def test_corpus_replays_within_the_time_and_memory_bounds(tmp_path: Path) -> None:
    """The same inputs in run_fuzz.py's worker: a bounded address space and an alarm
    (the gzip inputs failed only under a memory limit)."""
    report = tmp_path / "replay.json"
    command = [sys.executable, str(CORPUS.parent / "run_fuzz.py"), "--replay", str(CORPUS)]
    run = subprocess.run(
        [*command, "--report", str(report), "--timeout", str(TIME_BOUND)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = json.loads(report.read_text())["results"]
    assert run.returncode == 0, results
    assert sorted(results) == [p.name for p in FILES]
