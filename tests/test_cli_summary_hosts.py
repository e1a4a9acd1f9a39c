"""``traceparse summary`` of a run with two hosts opens with one overview of the run.

The command loads one profile per run and host; the summary still starts with
one table of every host and allocator of the run, the fullest flagged, and
no host's block repeats an overview of its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from traceparse.cli.app import main

REPO = Path(__file__).resolve().parent.parent


def _xplane(fixture: str) -> Path:
    (found,) = (REPO / "fixtures" / fixture).rglob("*.xplane.pb")
    return found


def test_a_two_host_run_opens_with_one_overview(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_12_01_10_00_00"
    run.mkdir(parents=True)
    shutil.copy(_xplane("layers_cnn"), run / "worker-a.xplane.pb")  # peak 482 MiB
    shutil.copy(_xplane("keras_train"), run / "worker-b.xplane.pb")  # peak 28 MiB
    assert main(["summary", str(tmp_path / "logs"), "--top", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "Run 2026_12_01_10_00_00: 2 hosts"
    assert out.count("Allocators (") == 1
    overview = out.index("Allocators (2;")
    assert (
        overview
        < out.index("Allocator mklcpu on worker-a")
        < out.index("Allocator mklcpu on worker-b")
    )
    rows = [line for line in lines if line.startswith("worker-")]
    assert [r.split()[:3] for r in rows] == [
        ["worker-a", "mklcpu", "482"],
        ["worker-b", "mklcpu", "28"],
    ]
    assert rows[0].endswith("<- fullest") and "fullest" not in rows[1]


def test_a_one_host_run_is_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(REPO / "fixtures/keras_train"), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert not out.startswith("Run ") and "Allocators (" not in out
