"""``traceparse.batch``: many captures, failures kept, resumable, byte-identical summaries.

Most tests run with ``jobs=0`` (in this process) to stay fast; the ones that
matter for process isolation use real spawned workers.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import FIXTURES
from helpers.batch import GOOD, capture_files, make_tree, summary_bytes

import traceparse
from traceparse.batching import COLUMNS, BatchResult, tasks
from traceparse.batching.lock import LOCK_NAME, output_lock
from traceparse.batching.summary import SUMMARY_FILES
from traceparse.errors import UsageError
from traceparse.files.atomic import TEMPORARY_PREFIX
from traceparse.files.discover import find_captures


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Good captures, plus one corrupt and one without memory events."""
    return make_tree(tmp_path / "logs", [*GOOD, "corrupt", "no_memory"])


def by_path(result: BatchResult) -> dict[str, pd.DataFrame]:
    return {str(path): rows for path, rows in result.table.groupby("path")}


# -- the must-show test: a mixed tree ---------------------------------------------


def test_mixed_tree_keeps_every_good_capture_and_lists_the_failure(
    tree: Path, tmp_path: Path
) -> None:
    result = traceparse.batch(tree, tmp_path / "out", jobs=2)

    files = capture_files(tree)
    assert result.captures == len(files) == 7
    groups = by_path(result)
    assert sorted(groups) == sorted(str(f) for f in files)
    for name in GOOD:
        for file in capture_files(tree / name):
            rows = groups[str(file)]
            assert list(rows["status"]) == ["ok"] * len(rows)
            assert (rows["allocator"] == "mklcpu").all()
            assert (rows["peak_bytes"] > 0).all()
            assert rows["allocations"].notna().all()
            report = tmp_path / "out" / rows["report"].iloc[0]
            assert {p.name for p in report.iterdir()} == {
                "report.md",
                "report.html",
                "report.json",
                "result.json",
            }
    corrupt = groups[str(capture_files(tree / "corrupt")[0])]
    assert list(corrupt["status"]) == ["error"]
    reason = corrupt["message"].iloc[0]
    assert "not a readable XSpace" in reason and "\n" not in reason
    assert pd.isna(corrupt["allocator"].iloc[0]) and pd.isna(corrupt["peak_bytes"].iloc[0])
    empty = groups[str(capture_files(tree / "no_memory")[0])]
    assert list(empty["status"]) == ["empty"]
    assert "no memory events" in empty["message"].iloc[0]

    assert result.exit_code == 3
    assert (result.ok, result.empty, result.errors) == (5, 1, 1)
    assert result.failed == [(str(capture_files(tree / "corrupt")[0]), reason)]


def test_all_good_captures_exit_0(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak", "no_memory"])
    result = traceparse.batch([tree], tmp_path / "out", jobs=0, reports=())
    assert result.exit_code == 0
    assert list(result.table["status"]) == ["ok", "empty"]


def test_summary_files_agree_and_have_the_contract_columns(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = traceparse.batch(tree, out, jobs=0, reports=["md"])
    assert result.files == [str(out / name) for name in SUMMARY_FILES]
    from_csv = pd.read_csv(out / "summary.csv")
    from_parquet = pd.read_parquet(out / "summary.parquet")
    assert list(from_csv.columns) == list(from_parquet.columns) == list(COLUMNS)
    assert len(from_csv) == len(from_parquet) == len(result.table) == 7
    assert from_parquet["peak_bytes"].dtype == "Int64"
    pd.testing.assert_frame_equal(from_parquet, result.table, check_dtype=False)
    # One row per (capture, host, allocator), sorted by them.
    table = result.table
    keys = list(zip(table["path"], table["host"], table["allocator"].fillna(""), strict=True))
    assert keys == sorted(keys)
    markdown = (out / "summary.md").read_text()
    assert "7 captures: 5 ok, 1 without memory events, 1 failed." in markdown
    assert "## Failed" in markdown and "not a readable XSpace" in markdown
    assert "`mklcpu`" in markdown


def test_attribution_parts_sum_to_the_peak(tree: Path, tmp_path: Path) -> None:
    from traceparse.analysis import PARTS

    result = traceparse.batch(tree, tmp_path / "out", jobs=0, reports=())
    ok = result.table[result.table["status"] == "ok"]
    assert (ok[PARTS].sum(axis=1) == ok["peak_bytes"]).all()
    leak = ok[ok["path"].str.contains("/leak/")]
    assert list(leak["leak_verdict"]) == ["growing"]


# -- resuming ----------------------------------------------------------------------


def count_analyses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = tasks._analyse

    def counted(task: tasks.Task) -> Any:
        calls.append(task.capture.path)
        return original(task)

    monkeypatch.setattr(tasks, "_analyse", counted)
    return calls


def test_resumed_batch_redoes_nothing_and_is_byte_identical(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    calls = count_analyses(monkeypatch)
    first = traceparse.batch(tree, out, jobs=0, reports=["md", "json"])
    assert len(calls) == first.analysed == 7
    before = summary_bytes(out)
    results = {p: p.stat().st_mtime_ns for p in out.rglob("result.json")}

    calls.clear()
    second = traceparse.batch(tree, out, jobs=0, reports=["md", "json"])
    assert calls == []
    assert (second.analysed, second.reused) == (0, 7)
    assert summary_bytes(out) == before
    assert {p: p.stat().st_mtime_ns for p in out.rglob("result.json")} == results
    assert second.exit_code == 3  # the corrupt capture is still reported

    # With worker processes too: nothing changed, so no pool is even started.
    third = traceparse.batch(tree, out, jobs=2, reports=["md", "json"])
    assert (third.analysed, third.reused) == (0, 7)
    assert summary_bytes(out) == before


def test_changed_input_is_redone_and_force_redoes_all(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    traceparse.batch(tree, out, jobs=0, reports=())
    calls = count_analyses(monkeypatch)
    leak = capture_files(tree / "leak")[0]
    os.utime(leak, ns=(leak.stat().st_atime_ns, leak.stat().st_mtime_ns + 10**9))
    result = traceparse.batch(tree, out, jobs=0, reports=())
    assert calls == [str(leak)]
    assert (result.analysed, result.reused) == (1, 6)

    calls.clear()
    result = traceparse.batch(tree, out, jobs=0, reports=(), force=True)
    assert len(calls) == 7 and result.reused == 0


def test_more_reports_than_before_redoes_the_captures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = make_tree(tmp_path / "logs", ["leak"])
    out = tmp_path / "out"
    traceparse.batch(tree, out, jobs=0, reports=["md"])
    calls = count_analyses(monkeypatch)
    traceparse.batch(tree, out, jobs=0, reports=["md"])
    assert calls == []
    traceparse.batch(tree, out, jobs=0, reports=["md", "json"])
    assert len(calls) == 1
    assert next(out.rglob("report.json")).is_file()


def test_content_hash_ignores_mtime_but_sees_new_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = make_tree(tmp_path / "logs", ["leak", "eager_ops"])
    out = tmp_path / "out"
    traceparse.batch(tree, out, jobs=0, reports=(), fingerprint="hash")
    calls = count_analyses(monkeypatch)
    leak = capture_files(tree / "leak")[0]
    os.utime(leak, ns=(0, 0))
    assert traceparse.batch(tree, out, jobs=0, reports=(), fingerprint="hash").reused == 2
    assert calls == []
    # Same size, other bytes: only a content hash notices when mtime is restored.
    eager = capture_files(tree / "eager_ops")[0]
    stat = eager.stat()
    shutil.copyfile(capture_files(tree / "leak")[0], eager)
    os.utime(eager, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = traceparse.batch(tree, out, jobs=0, reports=(), fingerprint="hash")
    assert calls == [str(eager)] and result.analysed == 1


def test_transient_errors_are_retried_content_errors_are_not(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    leak = str(capture_files(tree / "leak")[0])
    original = tasks._analyse

    def flaky(task: tasks.Task) -> Any:
        if task.capture.path == leak:
            raise RuntimeError("boom")
        return original(task)

    monkeypatch.setattr(tasks, "_analyse", flaky)
    # An unexpected exception is still only one row, and the batch goes on.
    first = traceparse.batch(tree, out, jobs=0, reports=())
    assert dict(first.failed)[leak] == "internal error: RuntimeError: boom"
    assert first.ok == 4

    calls = count_analyses(monkeypatch)  # wraps `flaky`: the leak capture still fails
    traceparse.batch(tree, out, jobs=0, reports=())
    assert calls == [leak]  # the corrupt capture is not retried; the internal error is


# -- failures that are not captures ---------------------------------------------------


def test_missing_root_is_a_row_and_the_rest_goes_on(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak"])
    missing = tmp_path / "nope"
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    result = traceparse.batch([tree, missing, empty_dir], tmp_path / "out", jobs=0, reports=())
    assert result.exit_code == 3
    assert result.ok == 1 and result.captures == 1
    reasons = dict(result.failed)
    assert reasons[str(missing)].startswith("no such file or directory")
    assert reasons[str(empty_dir)].startswith("no profiler capture here")
    assert set(result.table["status"]) == {"ok", "error"}
    markdown = (tmp_path / "out" / "summary.md").read_text()
    assert "1 capture: 1 ok, 0 without memory events, 0 failed; 2 roots could not be" in markdown


def test_overlapping_roots_analyse_each_capture_once(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["two_runs"])
    result = traceparse.batch(
        [tree, tree / "two_runs", capture_files(tree)[0]], tmp_path / "out", jobs=0, reports=()
    )
    assert result.captures == 2 and len(result.table) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reports": ["pdf"]}, "unknown report format 'pdf'"),
        ({"jobs": -1}, "--jobs must be 0 or more"),
        ({"fingerprint": "md5"}, "unknown fingerprint"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        traceparse.batch(tmp_path, tmp_path / "out", **kwargs)


def test_output_that_is_a_file_or_a_url_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        traceparse.batch(tmp_path, file, jobs=0)
    with pytest.raises(UsageError, match="not a URL"):
        traceparse.batch(tmp_path, "s3://bucket/out", jobs=0)


# -- safety ---------------------------------------------------------------------------


def test_a_second_batch_into_the_same_outdir_is_refused(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak"])
    out = tmp_path / "out"
    out.mkdir()
    with output_lock(str(out)):
        with pytest.raises(UsageError, match="another traceparse batch is writing here"):
            traceparse.batch(tree, out, jobs=0, reports=())
        assert not (out / "summary.csv").exists()
    # The lock is released with its holder, and the lock file is harmless.
    assert traceparse.batch(tree, out, jobs=0, reports=()).ok == 1
    assert (out / LOCK_NAME).exists()


def test_leftover_temporary_files_are_swept(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak"])
    out = tmp_path / "out"
    (out / "captures" / "x").mkdir(parents=True)
    # Only this tool's own temporary names (tests/test_safety_outputs.py keeps others').
    leftovers = [
        out / f"{TEMPORARY_PREFIX}summary.csv.abc123.tmp",
        out / "captures" / "x" / f"{TEMPORARY_PREFIX}result.json.q.tmp",
    ]
    for path in leftovers:
        path.write_text("half")
    traceparse.batch(tree, out, jobs=0, reports=())
    assert not any(p.exists() for p in leftovers)
    assert not list(out.rglob("*.tmp"))


def test_csv_cells_that_look_like_formulas_are_neutralised(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    shutil.copy(capture_files(FIXTURES / "leak")[0], run / "=HYPERLINK(1).xplane.pb")
    shutil.copy(capture_files(FIXTURES / "leak")[0], run / "@SUM(1).xplane.pb")
    out = tmp_path / "out"
    result = traceparse.batch(tmp_path / "logs", out, jobs=0, reports=())
    assert sorted(result.table["host"]) == ["=HYPERLINK(1)", "@SUM(1)"]  # the API keeps them
    rows = list(csv.DictReader(io.StringIO((out / "summary.csv").read_text())))
    assert sorted(row["host"] for row in rows) == ["'=HYPERLINK(1)", "'@SUM(1)"]
    assert all(not row[c].startswith(("=", "+", "@")) for row in rows for c in row)


def test_inputs_are_opened_read_only_and_left_unchanged(tree: Path, tmp_path: Path) -> None:
    import hashlib
    import subprocess
    import sys
    import textwrap

    def snapshot() -> dict[str, tuple[str, int]]:
        return {
            str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(tree.rglob("*"))
            if p.is_file()
        }

    before = snapshot()
    # An audit hook sees every open() of the batch (in this process: jobs=0).
    code = textwrap.dedent(
        """
        import os, sys
        root = os.path.realpath(sys.argv[1])
        bad = []
        def hook(event, args):
            if event == "open" and isinstance(args[0], str):
                path = os.path.realpath(args[0])
                flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
                mode = args[1] or ""
                writes = any(c in str(mode) for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR)
                if path.startswith(root) and writes:
                    bad.append((path, mode, flags))
        sys.addaudithook(hook)
        import traceparse
        result = traceparse.batch(sys.argv[1], sys.argv[2], jobs=0)
        print(result.captures, bad)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tree), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "7 []"
    assert snapshot() == before


def test_directory_names_are_safe_unique_and_stable() -> None:
    from traceparse.files.discover import CaptureFile

    def capture(path: str) -> CaptureFile:
        run_dir, name = path.rsplit("/", 1)
        return CaptureFile(run_dir, name.split(".")[0], path, "xplane")

    a = capture("/a/job 1/plugins/profile/2026_01_01_00_00_00/host:0.xplane.pb")
    b = capture("/b/job 1/plugins/profile/2026_01_01_00_00_00/host:0.xplane.pb")
    name = tasks.directory_name(a)
    assert name.startswith("job_1-2026_01_01_00_00_00-host_0-")
    assert name != tasks.directory_name(b)
    assert name == tasks.directory_name(a)
    evil = capture("/x/../../etc/plugins/profile/r/..xplane.pb")
    assert "/" not in tasks.directory_name(evil)
    assert not tasks.directory_name(evil).startswith(".")


def test_a_redone_capture_keeps_no_report_of_its_old_input(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak"])
    out = tmp_path / "out"
    traceparse.batch(tree, out, jobs=0, reports=["md", "html"])
    leak = capture_files(tree)[0]
    os.utime(leak, ns=(leak.stat().st_atime_ns, leak.stat().st_mtime_ns + 10**9))
    traceparse.batch(tree, out, jobs=0, reports=["md"])
    assert sorted(p.name for p in out.rglob("report.*")) == ["report.md"]


def test_at_most_two_captures_per_worker_are_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import Future, ThreadPoolExecutor

    from traceparse.batching import runners

    outstanding = [0, 0]  # now, most

    class Recording(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
            outstanding[0] += 1
            outstanding[1] = max(outstanding)
            return super().submit(fn, *args, **kwargs)

    def done(outcome: tasks.Outcome) -> None:
        outstanding[0] -= 1

    monkeypatch.setattr(runners, "_pool", lambda jobs, started: Recording(max_workers=jobs))
    for i in range(3):
        make_tree(tmp_path / f"logs{i}", GOOD)
    work = [
        tasks.task_for(c, str(tmp_path / "out"), reports=(), fingerprint="stat", force=True)
        for c in find_captures(tmp_path)
    ]
    assert len(work) == 15
    runners.run_local(work, 2, done)
    assert outstanding == [0, 4]


@pytest.mark.parametrize("how", ["stat", "hash"])
def test_a_sources_record_added_removed_or_changed_redoes_its_capture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: Any
) -> None:
    """Issue 46: the fingerprint covers every record the registry marks
    (``core.sidecars.SIDECARS``), the source lines too: a stored result with stale
    source lines is never reused."""
    tree = make_tree(tmp_path / "logs", ["sources_run", "leak"])
    out = tmp_path / "out"
    traceparse.batch(tree, out, jobs=0, reports=(), fingerprint=how)
    calls = count_analyses(monkeypatch)
    (record,) = (tree / "sources_run").rglob("*.sources.json.gz")
    kept = tmp_path / record.name
    capture = str(capture_files(tree / "sources_run")[0])

    def again() -> list[str]:
        calls.clear()
        traceparse.batch(tree, out, jobs=0, reports=(), fingerprint=how)
        return list(calls)

    assert again() == []
    shutil.move(record, kept)  # removed
    assert again() == [capture]
    shutil.copy2(kept, record)  # added back
    assert again() == [capture]
    # Changed: other bytes of the same size and time (a stat fingerprint sees the
    # size and time only, so it is given a longer file).
    stat = record.stat()
    data = bytearray(record.read_bytes())
    data[-1] ^= 0xFF
    record.write_bytes(bytes(data) + (b"" if how == "hash" else b"\0"))
    os.utime(record, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert again() == [capture]
    assert again() == []
