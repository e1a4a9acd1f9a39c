"""Limits on inputs, each with a clear error (docs/robustness.md): gzip that expands
too far, files past protobuf's size limit, things that are not files, and inputs
that are opened read-only and never modified."""

from __future__ import annotations

import builtins
import gzip
import os
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, fixture_file

import traceparse
from traceparse.cli import app as cli

# The module that holds the limits read_trace uses.
from traceparse.core import loading as load_module
from traceparse.decode import xspace as decode
from traceparse.errors import EXIT_INPUT
from traceparse.files.discover import (
    MAX_DECOMPRESSED_BYTES,
    MAX_PROTOBUF_BYTES,
    CaptureFile,
    read_bytes,
)

RUN = "plugins/profile/2026_01_01_00_00_00"


@contextmanager
def peak_memory() -> Iterator[list[int]]:
    """The peak of Python and numpy allocations inside the block, in bytes."""
    found: list[int] = []
    tracemalloc.start()
    try:
        yield found
    finally:
        found.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


def gzip_bomb(size: int) -> bytes:
    """A small .gz that expands to ``size`` bytes."""
    return gzip.compress(b"\0" * size, compresslevel=9, mtime=0)


def capture(path: Path) -> CaptureFile:
    return CaptureFile(str(path.parent), "h", str(path), "memory_profile.json")


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["--quiet", *argv])
    return code, capsys.readouterr().err


# -- gzip ---------------------------------------------------------------------------


def test_gzip_that_expands_past_the_limit_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "h.memory_profile.json.gz"
    path.write_bytes(gzip_bomb(64 * 2**20))
    assert path.stat().st_size < 2**20
    with peak_memory() as peak, pytest.raises(traceparse.CaptureTooLargeError) as info:
        read_bytes(capture(path), limit=4 * 2**20)
    assert "expands past 4 MiB when decompressed" in str(info.value)
    assert str(path) in str(info.value)
    # Expanded a chunk at a time: nowhere near the 64 MiB it would take.
    assert peak[0] < 12 * 2**20, peak


def test_gzip_within_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "h.memory_profile.json.gz"
    path.write_bytes(gzip.compress(b"x" * 3_000_000, mtime=0))
    assert read_bytes(capture(path), limit=3_000_000) == b"x" * 3_000_000
    with pytest.raises(traceparse.CaptureTooLargeError):
        read_bytes(capture(path), limit=2_999_999)


def test_load_refuses_a_gzip_bomb_with_exit_code_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(load_module, "MAX_DECOMPRESSED_BYTES", 2**20)
    run = tmp_path / RUN
    run.mkdir(parents=True)
    (run / "h.memory_profile.json.gz").write_bytes(gzip_bomb(8 * 2**20))
    with pytest.raises(traceparse.CaptureTooLargeError, match="expands past 1 MiB"):
        traceparse.load(tmp_path)
    code, err = run_cli(["summary", str(tmp_path)], capsys)
    assert code == EXIT_INPUT
    assert err.count("\n") == 1 and "expands past" in err and "h.memory_profile.json.gz" in err


def test_the_decompression_limit_leaves_room_for_real_profiles() -> None:
    # xprof's memory profiles hold 1000 timeline points plus the peak step: tiny.
    real = gzip.decompress(fixture_file("legacy").read_bytes())
    assert len(real) * 1000 < MAX_DECOMPRESSED_BYTES <= MAX_PROTOBUF_BYTES


# -- size -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["h.xplane.pb", "h.memory_profile.pb"])
def test_a_file_past_protobufs_limit_is_refused_before_it_is_read(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    with open(path, "wb") as handle:
        handle.truncate(MAX_PROTOBUF_BYTES + 1)  # sparse: no disk, no memory
    started = time.process_time()
    with peak_memory() as peak, pytest.raises(traceparse.CaptureTooLargeError) as info:
        traceparse.load(path)
    assert time.process_time() - started < 5
    assert peak[0] < 16 * 2**20, peak
    message = str(info.value)
    assert str(path) in message and "2 GiB" in message and "protobuf" in message
    assert info.value.exit_code == EXIT_INPUT
    code, err = run_cli(["summary", str(path)], capsys)
    assert code == EXIT_INPUT and "protobuf" in err


def test_decode_refuses_bytes_past_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    data = fixture_file("leak").read_bytes()
    monkeypatch.setattr(decode, "MAX_XSPACE_BYTES", len(data) - 1)
    with pytest.raises(traceparse.CaptureTooLargeError, match=r"x\.xplane\.pb: .*2 GiB"):
        decode.decode_xspace(data, path="x.xplane.pb", host="h")


# -- not files ------------------------------------------------------------------------


def test_a_fifo_named_like_a_capture_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "h.xplane.pb"
    os.mkfifo(path)  # opening it for reading would wait for a writer forever
    with pytest.raises(traceparse.InputError, match=str(path)):
        traceparse.load(path)
    with pytest.raises(traceparse.InputError, match=f"{path}: not a regular file"):
        traceparse.load(tmp_path)


def test_a_link_to_a_device_is_refused(tmp_path: Path) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    (tmp_path / "h.xplane.pb").symlink_to("/dev/zero")  # endless zeros
    with pytest.raises(traceparse.InputError, match=r"h\.xplane\.pb: not a regular file"):
        traceparse.load(tmp_path)


# -- inputs are read-only -------------------------------------------------------------

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every (path, mode) opened through open() or os.open() while the test runs."""
    seen: list[tuple[str, str]] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | os.PathLike):
            seen.append((os.path.realpath(file), mode))
        return real_open(file, mode, *args, **kwargs)

    def spy_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        seen.append((os.path.realpath(path), "w" if flags & _WRITE_FLAGS else "r"))
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    return seen


def _snapshot(root: Path) -> dict[Path, tuple[int, int, bytes]]:
    return {
        p: (p.stat().st_mtime_ns, p.stat().st_mode, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("name", ["keras_train", "legacy"])
def test_inputs_are_opened_read_only_and_left_as_they_were(
    tmp_path: Path,
    name: str,
    opened: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shutil

    logdir = Path(shutil.copytree(FIXTURES / name, tmp_path / "logs"))
    before = _snapshot(logdir)
    opened.clear()  # copying the fixture wrote these files: from here on, only reads
    # The report is written next to the inputs, into the run directory itself.
    run = next(p.parent for p in logdir.rglob("*") if p.is_file())
    out = run / "report.html"
    code, err = run_cli(["report", str(logdir), "-o", str(out)], capsys)
    assert code == 0, err
    inputs = {str(p.resolve()) for p in before}
    modes = [mode for path, mode in opened if path in inputs]
    assert modes, "the inputs were not read through open()"
    assert all(set(mode) <= {"r", "b", "t"} for mode in modes), modes
    after = _snapshot(logdir)
    assert after.pop(out) and after == before
    # Nothing else was left behind: no temporary files of the atomic write.
    assert sorted(p.name for p in run.iterdir()) == sorted(
        [*(p.name for p in before if p.parent == run), "report.html"]
    )


# -- outputs are written atomically ---------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["report", "--format", "html"], ["report", "--format", "md"], ["ops", "--format", "csv"]],
)
def test_a_failed_write_leaves_the_old_output_whole(
    tmp_path: Path,
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out" / "result"
    out.parent.mkdir()
    out.write_text("the previous report\n")

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    command, *options = argv
    code, err = run_cli([command, str(fixture_file("leak")), *options, "-o", str(out)], capsys)
    assert code == 2 and "No space left on device" in err and str(out) in err
    assert out.read_text() == "the previous report\n"
    assert [p.name for p in out.parent.iterdir()] == ["result"]  # no temporary file left
