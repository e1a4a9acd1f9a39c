"""Issue 36 item 6: ``traceparse run`` keeps TensorFlow's C++ log lines off the
terminal (in LOGDIR/tensorflow.log, named at the end); the script's own output,
its subprocesses' included, stays as it is; ``--verbose`` shows the lines."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from conftest import needs, run_traceparse

from traceparse.capture.tflog import HOLD_S, LogSplit, PipeReader, is_log_line

ABSL = b"W0000 00:00:1764000000.123456   10039 session_manager.cc:55] host_tracer_level\n"
OLD = b"2026-01-01 10:00:00.123456: E tensorflow/core/x.cc:12] out of memory\n"
GUARD = b"I0000 00:00:1796198529.914699   30852 cpu_feature_guard.cc:227] This"
NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"


def _split() -> tuple[LogSplit, io.BytesIO, io.BytesIO]:
    log, out = io.BytesIO(), io.BytesIO()
    return LogSplit(log=log, out=out), log, out


def test_log_lines_are_told_from_the_rest() -> None:
    assert is_log_line(ABSL) and is_log_line(OLD) and is_log_line(NOTICE)
    for other in (b"Epoch 1/3\n", b"W: not a log line\n", b"100%|####| 3/3\n", b"E1 oops\n"):
        assert not is_log_line(other), other


def test_lines_go_where_they_belong_in_order() -> None:
    split, log, out = _split()
    split.feed(
        b"to the user\n"
        + ABSL
        + b"I0000 00:00:1796198529.914699   30852 cpu_feature_guard.cc:227] This"
    )
    split.feed(b" binary is optimized.\nTo enable the following instructions: AVX2.\n")
    split.feed(OLD[:20])  # a line in pieces, as a pipe may give it
    split.feed(OLD[20:] + b"the user again\n")
    split.flush()
    assert out.getvalue() == b"to the user\nthe user again\n"
    assert log.getvalue() == (
        ABSL + GUARD + b" binary is optimized.\nTo enable the following instructions: AVX2.\n" + OLD
    )
    assert (split.lines, split.severe) == (3, 1)


def test_a_line_being_drawn_shows_at_once_or_after_a_pause() -> None:
    split, log, out = _split()
    split.feed(b"\r 40%|####      |")  # a progress bar: cannot be a log line
    assert out.getvalue() == b"\r 40%|####      |"
    split.feed(b"\rW")  # could be a log line: it waits, and shows when nothing follows
    split.feed(b"\n")
    split.feed(b"Waiting")
    assert out.getvalue().endswith(b"\rW\nWaiting")
    split.feed(b"\nWARN")
    assert not out.getvalue().endswith(b"WARN")
    split.flush()  # what the reader does after HOLD_S of quiet
    assert out.getvalue().endswith(b"WARN") and log.getvalue() == b""


def test_the_reader_shows_a_held_line_after_a_pause_and_stops_at_the_end() -> None:
    read_end, write_end = os.pipe()
    split, log, out = _split()
    reader = PipeReader(read_end, split)
    os.write(write_end, b"W")
    deadline = time.monotonic() + 30
    while out.getvalue() != b"W" and time.monotonic() < deadline:
        time.sleep(HOLD_S / 4)
    assert out.getvalue() == b"W"
    os.write(write_end, b"\n" + ABSL)
    os.close(write_end)
    reader.finish(timeout_s=30)
    assert log.getvalue() == ABSL and split.lines == 1


SCRIPT = """\
import os, subprocess, sys
import tensorflow as tf
print("to stdout", flush=True)
print("to stderr from Python", file=sys.stderr, flush=True)
os.write(2, {absl!r})
subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('from a subprocess\\\\n')"])
x = tf.ones((512, 512))
print("sum", float(tf.reduce_sum(x @ x)), flush=True)
"""


@pytest.mark.slow
@needs("tensorflow")
@pytest.mark.parametrize("verbose", [False, True])
def test_run_sends_tensorflows_log_to_a_file(tmp_path: Path, verbose: bool) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(absl=ABSL))
    logs = tmp_path / "logs"
    extra = ["--verbose"] if verbose else []
    done = run_traceparse(
        "run",
        "--logdir",
        str(logs),
        *extra,
        str(script),
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "0"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("to stdout\n") and "sum 134217728.0" in done.stdout
    assert "to stderr from Python\n" in done.stderr and "from a subprocess\n" in done.stderr
    log = logs / "tensorflow.log"
    if verbose:
        assert "session_manager.cc:55] host_tracer_level" in done.stderr
        assert not log.exists()
        return
    lines = log.read_text().splitlines()
    assert "session_manager.cc:55] host_tracer_level" in log.read_text()
    assert all(not is_log_line(line.encode()) for line in done.stderr.splitlines())
    assert "W0000" not in done.stderr and "absl" not in done.stderr
    counted = sum(is_log_line(line.encode()) for line in lines)
    assert f"TensorFlow's log ({counted} lines" in done.stderr and str(log) in done.stderr
