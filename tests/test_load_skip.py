"""Issue 36 item 7: ``load_all(errors="skip")`` leaves a bad capture file out and
names it in ``diagnostics``; by default it still raises."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, fixture_file

import traceparse


def _logdir_with_a_loose_corrupt_file(tmp_path: Path) -> tuple[Path, Path]:
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "two_runs", logs)
    # Outside plugins/profile/: a half-copied capture left beside the runs.
    loose = logs / "old" / "worker.xplane.pb"
    loose.parent.mkdir()
    shutil.copy(fixture_file("corrupt"), loose)
    return logs, loose


def test_by_default_the_first_bad_file_raises(tmp_path: Path) -> None:
    logs, loose = _logdir_with_a_loose_corrupt_file(tmp_path)
    with pytest.raises(traceparse.CorruptCaptureError, match=str(loose)):
        traceparse.load_all(logs)


def test_skip_keeps_every_good_capture_and_names_the_bad_one(tmp_path: Path) -> None:
    logs, loose = _logdir_with_a_loose_corrupt_file(tmp_path)
    good = traceparse.load_all(FIXTURES / "two_runs")
    profiles = traceparse.load_all(logs, errors="skip")
    assert [p.run for p in profiles] == [p.run for p in good] and len(good) == 2
    for mine, theirs in zip(profiles, good, strict=True):
        assert len(mine.allocations) == len(theirs.allocations)
    (line,) = profiles.diagnostics
    assert line.startswith(f"skipped {loose}: not a readable XSpace") and "\n" not in line
    assert traceparse.load_all(FIXTURES / "two_runs", errors="skip").diagnostics == []


def test_skip_of_nothing_but_bad_files_is_an_empty_list(tmp_path: Path) -> None:
    bad = tmp_path / "h.xplane.pb"
    bad.write_bytes(b"")
    profiles = traceparse.load_all(bad, errors="skip")
    assert profiles == [] and len(profiles.diagnostics) == 1 and "empty" in profiles.diagnostics[0]


def test_a_path_without_captures_still_raises(tmp_path: Path) -> None:
    with pytest.raises(traceparse.NoCaptureError):
        traceparse.load_all(tmp_path, errors="skip")
    with pytest.raises(traceparse.UsageError, match="errors='ignore'"):
        traceparse.load_all(FIXTURES / "two_runs", errors="ignore")  # type: ignore[arg-type]
