"""Finding and loading captures, and the errors for bad inputs."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, fixture_file, run_traceparse

import traceparse
from traceparse.files.discover import find_captures


def test_a_file_a_run_directory_and_a_logdir_give_the_same_profile() -> None:
    path = fixture_file("keras_train")
    by_file = traceparse.load(path)
    by_run = traceparse.load(path.parent)
    by_logdir = traceparse.load(FIXTURES / "keras_train")
    assert by_file.run == by_run.run == by_logdir.run == path.parent.name
    assert by_file.allocations.equals(by_logdir.allocations)
    assert by_run.hosts == ["localhost"]


def test_keras_callback_layout_is_found_from_the_logdir() -> None:
    prof = traceparse.load(FIXTURES / "keras_callback")
    assert "/train/plugins/profile/" in prof.path
    assert len(prof.allocations) > 0


def test_load_takes_the_newest_run_and_load_all_gives_every_run_oldest_first() -> None:
    runs = sorted(p.name for p in (FIXTURES / "two_runs/plugins/profile").iterdir())
    assert len(runs) == 2
    assert traceparse.load(FIXTURES / "two_runs").run == runs[-1]
    profiles = traceparse.load_all(FIXTURES / "two_runs")
    assert [p.run for p in profiles] == runs
    # The second run made bigger tensors.
    sizes = [int(p.allocations["requested_bytes"].max()) for p in profiles]
    assert sizes[0] < sizes[1]


def test_load_all_over_many_logdirs_sorts_runs_by_time() -> None:
    profiles = traceparse.load_all(FIXTURES / "two_runs")
    captures = find_captures(FIXTURES)
    assert [c.run for c in captures] == sorted(c.run for c in captures)
    assert all(p.run for p in profiles)


def test_a_run_with_an_xplane_and_a_memory_profile_reads_the_xplane() -> None:
    prof = traceparse.load(FIXTURES / "both")
    assert prof.format == "xplane"
    assert prof.path.endswith(".xplane.pb")


@pytest.mark.parametrize(
    ("name", "fmt"), [("legacy", "memory_profile.json"), ("legacy_binary", "memory_profile")]
)
def test_pre_converted_memory_profiles_fill_the_same_tables(name: str, fmt: str) -> None:
    legacy = traceparse.load(FIXTURES / name)
    assert legacy.format == fmt
    assert any("pre-converted" in d for d in legacy.diagnostics())
    # The legacy fixtures were converted by xprof from the eager_ops capture.
    original = traceparse.load(FIXTURES / "eager_ops").allocations
    converted = legacy.allocations
    keys = [
        "allocator",
        "address",
        "op",
        "region",
        "dtype",
        "shape",
        "requested_bytes",
        "allocated_bytes",
    ]
    assert len(converted) == len(original)
    left = original[keys].astype(object).sort_values(keys[:2]).reset_index(drop=True)
    right = converted[keys].astype(object).sort_values(keys[:2]).reset_index(drop=True)
    assert left.equals(right)
    assert converted["free_ps"].notna().sum() == original["free_ps"].notna().sum()


def test_loading_never_imports_tensorflow() -> None:
    code = (
        "import sys, traceparse; traceparse.load(sys.argv[1]).allocations;"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(FIXTURES / "keras_train")], check=True, cwd=REPO
    )


def test_import_is_lean_and_the_public_names_stay_functions() -> None:
    # `import traceparse` (and so the pytest plugin, loaded in every pytest run)
    # must not pull in pandas; the public names load on first use and stay the
    # functions even after the modules behind them are imported.
    code = (
        "import sys, traceparse, traceparse.integrations.pytest_plugin;"
        "assert 'pandas' not in sys.modules, 'pandas imported';"
        "import traceparse.batching.runners, traceparse.core.loading;"
        "assert callable(traceparse.batch) and callable(traceparse.load);"
        "assert traceparse.load.__module__ == 'traceparse.core.loading';"
        "assert sorted(traceparse.__all__) == dir(traceparse);"
        "assert all(hasattr(traceparse, name) for name in traceparse.__all__)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_inputs_are_not_modified(tmp_path: Path) -> None:
    copy = shutil.copytree(FIXTURES / "keras_train", tmp_path / "logs")
    before = {
        p: (p.stat().st_mtime_ns, p.read_bytes()) for p in Path(copy).rglob("*") if p.is_file()
    }
    assert len(traceparse.load(copy).allocations) > 0
    after = {
        p: (p.stat().st_mtime_ns, p.read_bytes()) for p in Path(copy).rglob("*") if p.is_file()
    }
    assert before == after


# Bad inputs: each raises its own TraceparseError subclass naming the file.


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(traceparse.CaptureNotFoundError, match="nope: no such file"):
        traceparse.load(missing)


def test_directory_without_captures(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(traceparse.NoCaptureError, match=str(tmp_path)) as info:
        traceparse.load(tmp_path)
    assert "plugins/profile" in str(info.value)
    assert info.value.exit_code == 3


@pytest.mark.parametrize("name", ["corrupt", "not_a_capture"])
def test_corrupt_and_foreign_files(name: str) -> None:
    path = fixture_file(name)
    with pytest.raises(traceparse.CorruptCaptureError) as info:
        traceparse.load(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(b"")
    with pytest.raises(traceparse.CorruptCaptureError, match="empty"):
        traceparse.load(path)


def test_every_truncation_of_a_real_capture_fails_cleanly_or_loads(tmp_path: Path) -> None:
    data = fixture_file("leak").read_bytes()
    path = tmp_path / "host.xplane.pb"
    for cut in range(1, len(data), max(1, len(data) // 97)):
        path.write_bytes(data[:cut])
        try:
            prof = traceparse.load(path)
            assert isinstance(prof.diagnostics(), list)
        except traceparse.TraceparseError as exc:
            assert str(path) in str(exc)


def test_a_corrupt_gzip_memory_profile(tmp_path: Path) -> None:
    run = tmp_path / "plugins/profile/2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "h.memory_profile.json.gz").write_bytes(b"\x1f\x8b\x08 not really gzip")
    with pytest.raises(traceparse.CorruptCaptureError, match="gzip"):
        traceparse.load(tmp_path)
    (run / "h.memory_profile.json.gz").write_bytes(gzip.compress(b"{not json"))
    with pytest.raises(traceparse.CorruptCaptureError, match="memory_profile JSON"):
        traceparse.load(tmp_path)


def test_unreadable_file(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can read files without read permission")
    path = tmp_path / "h.xplane.pb"
    path.write_bytes(fixture_file("leak").read_bytes())
    path.chmod(0)
    with pytest.raises(traceparse.InputError, match="cannot read"):
        traceparse.load(path)


def test_fsspec_memory_filesystem() -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    source = fixture_file("leak")
    fs.pipe(f"/logs/plugins/profile/{source.parent.name}/localhost.xplane.pb", source.read_bytes())
    prof = traceparse.load("memory://logs")
    local = traceparse.load(source)
    assert prof.allocations.drop(columns="host").equals(local.allocations.drop(columns="host"))
    with pytest.raises(traceparse.CaptureNotFoundError):
        traceparse.load("memory://missing")


def _empty_memory_profile(tmp_path: Path) -> Path:
    """What xprof writes for a capture without memory events (a laptop run without a GPU)."""
    xprof = pytest.importorskip(
        "xprof.convert.raw_to_tool_data", reason="needs tensorboard-plugin-profile (xprof)"
    )
    data, _ = xprof.xspace_to_tool_data([str(fixture_file("no_memory"))], "memory_profile", {})
    text = data.decode() if isinstance(data, bytes) else str(data)
    assert '"memoryProfilePerAllocator":{}' in text, text  # the real thing, not a guess
    run = tmp_path / "plugins/profile/2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "h.memory_profile.json.gz").write_bytes(gzip.compress(text.encode()))
    return run / "h.memory_profile.json.gz"


def test_an_empty_memory_profile_is_valid_and_empty(tmp_path: Path) -> None:
    path = _empty_memory_profile(tmp_path)
    prof = traceparse.load(path)
    assert prof.allocations.empty and prof.peak.empty and prof.summary() == []
    assert any("no memory events" in note for note in prof.diagnostics())
    result = run_traceparse("summary", str(path))
    assert result.returncode == 0, result.stderr
    assert "no memory events" in result.stdout + result.stderr


def test_a_memory_profile_without_allocators_or_hosts_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "plugins/profile/2026_01_01_00_00_00/h.memory_profile.json.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(b'{"memoryIds": [], "hloModules": []}'))
    with pytest.raises(traceparse.CorruptCaptureError, match="not a memory profile"):
        traceparse.load(path)
