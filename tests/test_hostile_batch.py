"""A batch's OUTDIR and stored results, crafted (docs/robustness.md, "Batch results"):
links planted under OUTDIR never lead a batch outside it, resume sees every file
the analysis reads (the inventory too), and a stored result that is damaged is
redone while one that is not a regular file is refused without being read."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from bounded import check_bounds, run_bounded
from conftest import FIXTURES, fixture_file

import traceparse
from traceparse.batching import BatchResult
from traceparse.batching.lock import LOCK_NAME
from traceparse.batching.store import MAX_RESULT_BYTES
from traceparse.core.sidecars import BATCH, SOURCES

INVENTORY = next((FIXTURES / "keras_inventory").rglob("*.variables.json"))


def logdir(tmp_path: Path, name: str = "leak") -> Path:
    root = tmp_path / "logs"
    shutil.copytree(FIXTURES / name, root / name)
    return root


def victim(tmp_path: Path) -> dict[Path, bytes]:
    """Files outside OUTDIR that a followed link would reach, with their bytes."""
    place = tmp_path / "victim"
    place.mkdir()
    files = {}
    for name in ("report.md", "report.html", "report.json", "result.json", "summary.md"):
        files[place / name] = f"not yours: {name}\n".encode()
        (place / name).write_bytes(files[place / name])
    (place / "captures").mkdir()
    return files


def untouched(files: dict[Path, bytes]) -> None:
    place = next(iter(files)).parent
    for path, data in files.items():
        assert path.read_bytes() == data, path
    # Nothing was added either (no report, no temporary, no capture directory).
    assert sorted(p.name for p in place.iterdir()) == sorted([*(p.name for p in files), "captures"])
    assert list((place / "captures").iterdir()) == []


def capture_dir(out: Path) -> Path:
    (found,) = (out / "captures").iterdir()
    return found


def test_links_planted_under_outdir_lead_nowhere(tmp_path: Path) -> None:
    logs, out = logdir(tmp_path), tmp_path / "out"
    files = victim(tmp_path)
    place = next(iter(files)).parent
    first = run_bounded([["batch", str(logs), "-o", str(out)]], cwd=tmp_path)
    check_bounds(first, problems=0)
    mine = capture_dir(out)
    # The capture's directory, its files, the summaries and the lock, all links.
    shutil.rmtree(mine)
    mine.symlink_to(place, target_is_directory=True)
    (out / "summary.md").unlink()
    (out / "summary.md").symlink_to(place / "summary.md")
    (out / LOCK_NAME).unlink()
    (out / LOCK_NAME).symlink_to(place / "result.json")
    os.utime(next(logs.rglob("*.xplane.pb")))  # changed: the capture is redone
    again = run_bounded([["batch", str(logs), "-o", str(out)]], cwd=tmp_path)
    check_bounds(again, problems=0)
    assert again[0].code == 0
    untouched(files)
    assert not mine.is_symlink() and mine.is_dir()
    assert {p.name for p in mine.iterdir()} >= {"report.md", "report.html", "result.json"}
    assert not (out / "summary.md").is_symlink()
    # OUTDIR/captures itself as a link, and links at the report names inside it.
    shutil.rmtree(out / "captures")
    (out / "captures").symlink_to(place / "captures", target_is_directory=True)
    third = traceparse.batch(logs, out, jobs=0, force=True)
    assert third.ok == 1
    untouched(files)
    mine = capture_dir(out)
    for name in ("report.md", "report.html"):
        (mine / name).unlink()
        (mine / name).symlink_to(place / name)
    fourth = traceparse.batch(logs, out, jobs=0, force=True)
    assert fourth.ok == 1
    untouched(files)
    assert not (mine / "report.md").is_symlink()


def test_a_fifo_planted_at_a_summary_does_not_block(tmp_path: Path) -> None:
    logs, out = logdir(tmp_path), tmp_path / "out"
    traceparse.batch(logs, out, jobs=0)
    (out / "summary.md").unlink()
    os.mkfifo(out / "summary.md")
    results = run_bounded([["batch", str(logs), "-o", str(out)]], cwd=tmp_path)
    check_bounds(results, problems=0)
    assert (out / "summary.md").is_file()


@pytest.mark.parametrize("how", ["stat", "hash"])
def test_resume_sees_the_inventory_come_go_and_change(tmp_path: Path, how: str) -> None:
    logs, out = logdir(tmp_path, "keras_inventory"), tmp_path / "out"
    inventory = next(logs.rglob("*.variables.json"))
    kept = inventory.read_bytes()

    def run() -> tuple[int, int]:
        result = traceparse.batch(logs, out, jobs=0, fingerprint=how)  # type: ignore[arg-type]
        assert result.ok == 1
        return result.analysed, int(result.table["variable_bytes"].fillna(0).sum())

    analysed, named = run()
    assert analysed == 1 and named > 0
    assert run()[0] == 0  # unchanged: reused
    inventory.unlink()
    analysed, without = run()
    assert analysed == 1 and without == 0  # the result no longer names the variables
    inventory.write_bytes(kept)
    assert run() == (1, named)
    os.mkfifo(tmp_path / "fifo")
    inventory.unlink()
    inventory.symlink_to(tmp_path / "fifo")  # never opened: the check cannot block
    assert run() == (1, 0)
    assert run()[0] == 0


def test_a_result_with_an_integer_past_int64_is_redone(tmp_path: Path) -> None:
    logs, out = logdir(tmp_path), tmp_path / "out"
    assert traceparse.batch(logs, out, jobs=0).ok == 1
    result = capture_dir(out) / "result.json"
    record = json.loads(result.read_text())
    record["rows"][0]["peak_bytes"] = 2**64
    result.write_text(json.dumps(record))
    again = traceparse.batch(logs, out, jobs=0)
    assert again.ok == 1 and again.analysed == 1
    assert json.loads(result.read_text())["rows"][0]["peak_bytes"] < 2**63


@pytest.mark.parametrize("kind", ["fifo", "device", "too large", "link to a good result"])
def test_a_result_that_is_not_a_regular_file_is_redone_unread(tmp_path: Path, kind: str) -> None:
    logs, out = logdir(tmp_path), tmp_path / "out"
    assert traceparse.batch(logs, out, jobs=0).ok == 1
    result = capture_dir(out) / "result.json"
    good = result.read_bytes()
    result.unlink()
    if kind == "fifo":
        os.mkfifo(result)
    elif kind == "device":
        result.symlink_to("/dev/zero")
    elif kind == "too large":
        result.write_bytes(good[:-2] + b" " * MAX_RESULT_BYTES + b"}\n")
    else:
        (tmp_path / "elsewhere.json").write_bytes(good)
        result.symlink_to(tmp_path / "elsewhere.json")
    finished = threading.Event()
    outcome: list[BatchResult] = []

    def batch() -> None:
        outcome.append(traceparse.batch(logs, out, jobs=0))
        finished.set()

    start = time.monotonic()
    threading.Thread(target=batch, daemon=True).start()
    assert finished.wait(60), f"a {kind} as result.json blocked the batch"
    assert time.monotonic() - start < 30
    assert outcome[0].ok == 1 and outcome[0].analysed == 1
    assert result.is_file() and not result.is_symlink()
    assert json.loads(result.read_bytes()) == json.loads(good)


def test_a_fifo_under_a_capture_name_is_refused_when_hashing(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "plugins" / "profile" / "2026_01_01_00_00_00"
    logs.mkdir(parents=True)
    shutil.copy(fixture_file("leak"), logs / "a.xplane.pb")
    os.mkfifo(logs / "b.xplane.pb")
    results = run_bounded(
        [["batch", str(tmp_path / "logs"), "-o", str(tmp_path / "out"), "--hash"]],
        cwd=tmp_path,
    )
    check_bounds(results, problems=1)
    assert results[0].code == 3


@pytest.mark.parametrize("how", ["stat", "hash"])
def test_resume_sees_the_source_record_come_go_and_change(tmp_path: Path, how: str) -> None:
    """Issue 46: a source record added, removed or changed since the last run redoes
    the capture (its report names the source lines), as every record beside a
    capture does (core.sidecars.SIDECARS)."""
    logs, out = logdir(tmp_path, "sources_fit"), tmp_path / "out"
    record = next(logs.rglob(f"*{SOURCES.suffix}"))
    kept = record.read_bytes()

    def run() -> tuple[int, str]:
        result = traceparse.batch(logs, out, jobs=0, fingerprint=how)  # type: ignore[arg-type]
        assert result.ok == 1
        return result.analysed, (capture_dir(out) / "report.json").read_text()

    analysed, named = run()
    assert analysed == 1 and "sources_model.py" in named  # the line that made the tensors
    assert run()[0] == 0  # unchanged: reused
    record.unlink()
    analysed, without = run()
    assert analysed == 1 and "sources_model.py" not in without
    assert run()[0] == 0
    record.write_bytes(kept)  # added back
    analysed, again = run()
    assert analysed == 1 and "sources_model.py" in again
    record.write_bytes(b"changed")  # unusable now: ignored with a diagnostic
    analysed, damaged = run()
    assert (
        analysed == 1
        and "sources_model.py" not in damaged
        and "source lines were ignored" in damaged
    )
    # The batch record (issue 47) counts the same way.
    batch = record.with_name(record.name.replace(SOURCES.suffix, BATCH.suffix))
    batch.write_text(
        '{"format": "traceparse.batch", "version": 1, "batch_size": 8, "how": "given"}'
    )
    assert run()[0] == 1
    assert run()[0] == 0
