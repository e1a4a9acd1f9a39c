"""Outputs never damage what is not ours: devices, links, inputs, other people's files."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import fixture_file, run_traceparse

import traceparse
from traceparse import cli
from traceparse.batching.lock import sweep_temporaries
from traceparse.files.atomic import atomic_write


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["--quiet", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """A copy of the leak fixture's capture, in a run directory of its own."""
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    target = run / "localhost.xplane.pb"
    shutil.copy2(fixture_file("leak"), target)
    return target


def _null_device(directory: Path) -> Path:
    """A character device like /dev/null (1, 3), made in a temporary directory."""
    if not hasattr(os, "mknod") or os.geteuid() != 0:
        pytest.skip("making a device needs root")
    path = directory / "null"
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return path


# -- 1. devices, FIFOs, /dev/stdout and links ------------------------------------------


@pytest.mark.parametrize("argv", [["report", "--format", "md"], ["ops", "--format", "csv"]])
def test_a_device_as_output_is_written_to_not_replaced(
    tmp_path: Path, capture: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    device = _null_device(tmp_path)
    before = os.lstat(device)
    command, *options = argv
    code, _, err = run_cli([command, str(capture), *options, "-o", str(device)], capsys)
    assert code == 0, err
    after = os.lstat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino
    assert after.st_rdev == before.st_rdev
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "null"]  # no temporary


def test_a_fifo_as_output_gets_the_bytes(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as handle:
            received.append(handle.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    atomic_write(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert received == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_block_device_is_refused(tmp_path: Path, capture: Path) -> None:
    if not hasattr(os, "mknod") or os.geteuid() != 0:
        pytest.skip("making a device needs root")
    device = tmp_path / "disk"
    os.mknod(device, stat.S_IFBLK | 0o600, os.makedev(7, 200))  # a loop device number
    with pytest.raises(traceparse.UsageError, match="block device"):
        atomic_write(device, "x")
    assert stat.S_ISBLK(os.lstat(device).st_mode)


def test_a_stdout_link_reaches_stdout_and_stays_a_link(tmp_path: Path, capture: Path) -> None:
    # Built like /dev/stdout (a link to /proc/self/fd/1), but in a temporary
    # directory: a version without the fix replaces this link, not the system's.
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    done = run_traceparse("report", str(capture), "--format", "md", "-o", str(link))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# ")
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["logs", "stdout"]


@pytest.mark.parametrize(
    ("path", "fd"),
    [("/dev/stdout", 1), ("/dev/stderr", 2), ("/dev/fd/1", 1), ("/proc/self/fd/7", 7)],
)
def test_stream_paths_are_their_descriptors(path: str, fd: int) -> None:
    from traceparse.files import atomic

    assert atomic._follow_links(path)[1] == fd


def test_writing_to_a_stream_path_keeps_the_offset(tmp_path: Path) -> None:
    # `cmd -o /dev/fd/1 >> log`: appended, not written over from the start
    # (/dev/fd is a link to /proc/self/fd, where a rename cannot go).
    log = tmp_path / "log"
    log.write_text("earlier line\n")
    code = (
        "from traceparse.files.atomic import atomic_write\n"
        "print('before', flush=True)\n"
        "atomic_write('/dev/fd/1', 'written\\n')\n"
    )
    with open(log, "a") as handle:
        subprocess.run([sys.executable, "-c", code], stdout=handle, check=True)
    assert log.read_text() == "earlier line\nbefore\nwritten\n"


def test_a_link_is_written_through_atomically(
    tmp_path: Path, capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "reports" / "real.md"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "link.md"
    link.symlink_to(os.path.join("reports", "real.md"))
    code, _, err = run_cli(["report", str(capture), "-o", str(link)], capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == os.path.join("reports", "real.md")
    assert real.read_text().startswith("# ")
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.md"]


def test_a_dangling_link_creates_the_file_it_names(tmp_path: Path) -> None:
    link = tmp_path / "link.md"
    link.symlink_to("made.md")
    atomic_write(link, "new\n")
    assert link.is_symlink() and (tmp_path / "made.md").read_text() == "new\n"


def test_a_link_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(traceparse.UsageError):
        atomic_write(tmp_path / "a", "x")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


# -- 3. an input as the output --------------------------------------------------------


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "inside-a-directory"])
def test_an_input_as_output_is_refused_and_kept(
    tmp_path: Path, capture: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    original = capture.read_bytes()
    source = str(capture)
    if how == "same":
        target = capture
    elif how == "symlink":
        target = tmp_path / "link.xplane.pb"
        target.symlink_to(capture)
    elif how == "hardlink":
        target = tmp_path / "other-name.md"
        os.link(capture, target)
    else:
        target = capture
        source = str(tmp_path / "logs")
    for argv in (["report", source, "--format", "md"], ["ops", source, "--format", "csv"]):
        code, _, err = run_cli([*argv, "-o", str(target)], capsys)
        assert code == 2, err
        assert "input" in err and str(target) in err
        assert capture.read_bytes() == original
    if how == "symlink":
        assert target.is_symlink()


def test_every_device_link_and_capture_untouched_together(
    tmp_path: Path, capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's check: a device, a link and an input capture as -o targets."""
    device = _null_device(tmp_path)
    link = tmp_path / "to-capture"
    link.symlink_to(capture)
    original = capture.read_bytes()
    device_before = os.lstat(device)
    for target in (device, link, capture):
        run_cli(["report", str(capture), "--format", "md", "-o", str(target)], capsys)
    after = os.lstat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == device_before.st_ino
    assert link.is_symlink() and os.readlink(link) == str(capture)
    assert capture.read_bytes() == original


# -- 2. batch removes only its own temporaries -----------------------------------------


def test_batch_sweep_keeps_other_peoples_tmp_files(tmp_path: Path, capture: Path) -> None:
    out = tmp_path / "shared"
    (out / "captures" / "x").mkdir(parents=True)
    theirs = [out / ".draft.tmp", out / "captures" / "x" / ".notes.md.abc.tmp"]
    for path in theirs:
        path.write_text("someone else's\n")
    result = traceparse.batch(tmp_path / "logs", out, jobs=0)
    assert result.ok == 1
    for path in theirs:
        assert path.read_text() == "someone else's\n"


def test_batch_sweep_removes_what_a_killed_write_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "captures" / "x").mkdir(parents=True)
    real = out / "captures" / "x" / "result.json"
    # A writer killed between its write and its rename leaves its temporary file.
    code = (
        "import os, sys\n"
        "from traceparse.files.atomic import atomic_write\n"
        "os.replace = lambda src, dst: os._exit(0)\n"
        "atomic_write(sys.argv[1], '{}')\n"
    )
    subprocess.run([sys.executable, "-c", code, str(real)], check=True)
    leftovers = list(real.parent.iterdir())
    assert len(leftovers) == 1 and leftovers[0].name != "result.json"
    assert sweep_temporaries(str(out)) == 1
    assert list(real.parent.iterdir()) == []


# -- 10. paths that are not files ------------------------------------------------------


def test_output_naming_a_directory_says_so(
    tmp_path: Path, capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["report", str(capture), "-o", str(tmp_path) + "/"], capsys)
    assert code == 2 and "is a directory" in err, err
    code, _, err = run_cli(["report", str(capture), "-o", str(tmp_path / "missing") + "/"], capsys)
    assert code == 2 and "directory" in err and "Not a directory" not in err, err


def test_output_under_a_file_says_so(
    tmp_path: Path, capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.write_text("x")
    code, _, err = run_cli(["report", str(capture), "-o", str(plain / "x.md")], capsys)
    assert code == 2, err
    assert "File exists" not in err and "not a directory" in err, err
    assert plain.read_text() == "x"
