"""The batch a capture recorded (issue 47, item 1): ``<host>.batch.json``.

A crafted record is one diagnostic naming the file and the capture loads without
it; a good one is the batch ``predict`` starts from, before anything read off the
shapes, and the prediction says so. The captures themselves are made with
TensorFlow in ``test_batch_capture.py`` (slow).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, run_traceparse

import traceparse
from traceparse.capture.batch import BatchRecorder
from traceparse.core.sidecars import BATCH
from traceparse.decode.batch import (
    MAX_BATCH_BYTES,
    MAX_STEPS,
    MAX_VALUES,
    BatchProblem,
    batch_budget,
    decode_batch,
)
from traceparse.files.discover import CaptureFile, read_bytes

IGNORED = "the recorded batch size was ignored"
# A small eager capture whose batch (128) the shapes give (test_predict.py).
SOURCE = next((FIXTURES / "batch_128").rglob("*.xplane.pb")).parent
HOST = next(SOURCE.glob("*.xplane.pb")).name.removesuffix(".xplane.pb")


def record(**fields: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format": "traceparse.batch",
        "version": 1,
        "tensorflow": "2.21.0",
        "started_ns": None,
        "stopped_ns": None,
        "batch_size": 96,
        "how": "given",
        "steps": [[1, 96], [2, 96]],
    }
    document.update(fields)
    return document


def capture_with(tmp_path: Path, data: bytes | None) -> Path:
    run = tmp_path / "logs" / "plugins" / "profile" / SOURCE.name
    shutil.copytree(SOURCE, run)
    if data is not None:
        (run / f"{HOST}{BATCH.suffix}").write_bytes(data)
    return tmp_path / "logs"


def start_ns() -> int:
    trace = traceparse.load(SOURCE).traces[0]
    assert trace.start_ns is not None
    return trace.start_ns


CRAFTED: dict[str, bytes] = {
    "not JSON": b"{not json",
    "not UTF-8": b"\xff\xfe{}",
    "another format": json.dumps(record(format="traceparse.sources")).encode(),
    "a later version": json.dumps(record(version=2)).encode(),
    "a list": b"[1, 2, 3]",
    "a negative batch": json.dumps(record(batch_size=-64)).encode(),
    "a zero batch": json.dumps(record(batch_size=0)).encode(),
    "a boolean batch": json.dumps(record(batch_size=True)).encode(),
    "a fractional batch": json.dumps(record(batch_size=64.5)).encode(),
    "a batch past int32": json.dumps(record(batch_size=2**31)).encode(),
    "a batch as text": json.dumps(record(batch_size="64")).encode(),
    "an unknown way": json.dumps(record(how="guessed")).encode(),
    "a batch without its way": json.dumps(record(how=None)).encode(),
    "steps not a list": json.dumps(record(steps={"1": 64})).encode(),
    "a step of three": json.dumps(record(steps=[[1, 64, 3]])).encode(),
    "a step's size zero": json.dumps(record(steps=[[1, 0]])).encode(),
    "a negative step": json.dumps(record(steps=[[-1, 64]])).encode(),
    "too many steps": json.dumps(record(steps=[[1, 1]] * (MAX_STEPS + 1))).encode(),
    "nested too deeply": b"[" * 100_000 + b"]" * 100_000,
    "past its size limit": json.dumps(record(pad=" " * MAX_BATCH_BYTES)).encode(),
    "a time past int64": json.dumps(record(started_ns=2**63)).encode(),
    # 3 MB of empty lists: within the size limit, refused before it is parsed.
    "a million empty lists": b"[" + b"[]," * 1_000_000 + b"[]]",
    "too many values": json.dumps(record(pad=[0] * (MAX_VALUES + 1))).encode(),
}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_a_crafted_record_is_one_diagnostic_and_the_capture_loads(
    tmp_path: Path, name: str
) -> None:
    logs = capture_with(tmp_path, CRAFTED[name])
    profile = traceparse.load(logs)
    path = next(logs.rglob(f"*{BATCH.suffix}"))
    notes = [d for d in profile.diagnostics() if IGNORED in d]
    assert len(notes) == 1, profile.diagnostics()
    assert notes[0].startswith(f"{path}: {IGNORED}: ") and "\n" not in notes[0]
    assert len(notes[0]) < 400  # a crafted value is quoted short
    assert profile.recorded_batch is None
    assert int(profile.predict()["from_batch"].iloc[0]) == 128  # read off the shapes


def test_a_record_too_costly_to_parse_is_refused_while_it_is_read(tmp_path: Path) -> None:
    """The budget runs on the text as the reader reads it (``read_bytes(scan=)``),
    so json.loads never sees it (issue 52's bound, for the batch record too)."""
    logs = capture_with(tmp_path, CRAFTED["a million empty lists"])
    found = next(logs.rglob(f"*{BATCH.suffix}"))
    capture = CaptureFile(str(found.parent), HOST, str(found), "batch")
    with pytest.raises(BatchProblem, match="lists and objects, more than a batch record"):
        read_bytes(capture, BATCH.limit, scan=batch_budget())
    # The recorder's own largest record passes the same budget.
    largest = record(steps=[[2**62 + i, MAX_STEPS] for i in range(MAX_STEPS)])
    batch_budget()(json.dumps(largest, indent=1).encode())


def test_a_version_that_is_not_printable_text_is_dropped(tmp_path: Path) -> None:
    """A lone surrogate (what json.dumps writes for undecodable text) or a bidi
    override in the TensorFlow version is dropped; the batch is still used."""
    start = start_ns()
    for n, version in enumerate(("2.21\udcff", "2.21\u202e0")):
        # ensure_ascii: the surrogate travels as its \\u escape, as a writer's would.
        text = json.dumps(
            record(tensorflow=version, started_ns=start - 10**9, stopped_ns=start + 60 * 10**9)
        )
        profile = traceparse.load(capture_with(tmp_path / str(n), text.encode()))
        recorded = profile.recorded_batch
        assert recorded is not None and recorded.batch_size == 96
        assert recorded.tensorflow is None


@pytest.mark.parametrize("kind", ["a directory", "a FIFO", "a link loop"])
def test_a_record_that_is_not_a_file_is_refused_without_reading(tmp_path: Path, kind: str) -> None:
    logs = capture_with(tmp_path, None)
    path = next(logs.rglob("*.xplane.pb")).with_name(f"{HOST}{BATCH.suffix}")
    if kind == "a directory":
        path.mkdir()
    elif kind == "a FIFO":
        os.mkfifo(path)
    else:
        path.symlink_to(path)
    profile = traceparse.load(logs)
    notes = [d for d in profile.diagnostics() if IGNORED in d]
    assert len(notes) == 1 and notes[0].startswith(f"{path}: "), profile.diagnostics()
    assert profile.recorded_batch is None


def test_a_record_of_another_run_is_ignored(tmp_path: Path) -> None:
    hour = 3600 * 10**9
    start = start_ns()
    stale = record(started_ns=start + hour, stopped_ns=start + 2 * hour)
    profile = traceparse.load(capture_with(tmp_path, json.dumps(stale).encode()))
    (note,) = [d for d in profile.diagnostics() if IGNORED in d]
    assert "another capture" in note
    assert profile.recorded_batch is None


def test_the_command_line_says_it_in_one_line_and_goes_on(tmp_path: Path) -> None:
    logs = capture_with(tmp_path, CRAFTED["a negative batch"])
    done = run_traceparse("summary", str(logs))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert f"{IGNORED}: batch_size is -64, not a positive count" in done.stdout + done.stderr


def test_the_recorded_batch_comes_before_the_shapes(tmp_path: Path) -> None:
    """A record that says 96 beats the 128 the shapes suggest: it is what the steps
    were fed. The prediction says where its batch came from."""
    start = start_ns()
    good = record(started_ns=start - 10**9, stopped_ns=start + 60 * 10**9)
    profile = traceparse.load(capture_with(tmp_path, json.dumps(good).encode()))
    assert not [d for d in profile.diagnostics() if IGNORED in d]
    recorded = profile.recorded_batch
    assert recorded is not None and recorded.batch_size == 96 and recorded.how == "given"
    assert recorded.steps == ((1, 96), (2, 96))
    row = profile.predict(192).iloc[0]
    assert int(row["from_batch"]) == 96
    assert int(row["found_batch"]) == 128  # what the shapes alone would have said
    evidence = str(row["batch_evidence"])
    assert evidence.startswith("recorded by the capture")
    # What the user gives still wins over the record.
    given = profile.predict(192, from_batch=128).iloc[0]
    assert int(given["from_batch"]) == 128
    assert not str(given["batch_evidence"]).startswith("recorded")
    # The shapes disagree with the record (128), and the evidence says what they
    # say, as for a batch given that they disagree with.
    assert evidence.endswith(f"; read off the capture: {given['batch_evidence']}")


def test_a_record_without_a_batch_leaves_the_shapes_to_say_it(tmp_path: Path) -> None:
    empty = record(batch_size=None, how=None, steps=[])
    profile = traceparse.load(capture_with(tmp_path, json.dumps(empty).encode()))
    assert not [d for d in profile.diagnostics() if IGNORED in d]
    assert profile.recorded_batch is None
    assert int(profile.predict().iloc[0]["from_batch"]) == 128


def test_the_recorder_writes_what_the_reader_reads(tmp_path: Path) -> None:
    """The capture side's record (without TensorFlow: the notes a run would make)."""
    recorder = BatchRecorder()
    for step, size in ((3, 32), (4, 32), (5, 4)):  # a partial last batch
        recorder.note(size, "keras", step)
        recorder.note(1, "function", step)  # a keras way outranks a function's
    recorder.note(0, "keras", 6)  # not a batch: never noted
    recorder.note(True, "keras", 7)
    recorder.stopped_ns = recorder.started_ns + 1
    path = recorder.write(tmp_path, "host")
    assert path == str(tmp_path / f"host{BATCH.suffix}")
    read = decode_batch(Path(path).read_bytes(), path)
    assert (read.batch_size, read.how) == (32, "keras")
    assert read.steps == ((3, 32), (4, 32), (5, 4))
    # A tie between steps goes to the larger size (an epoch's last batch is the smaller).
    tie = BatchRecorder()
    tie.note(16, "function", 1)
    tie.note(4, "function", 2)
    assert tie.to_json(None)["batch_size"] == 16
    # Given, it is the batch whatever the steps saw.
    given = BatchRecorder(given=8)
    given.note(16, "function", 1)
    document = given.to_json(None)
    assert (document["batch_size"], document["how"], document["steps"]) == (8, "given", [])
    # Nothing seen: no batch, and no way.
    assert BatchRecorder().to_json(None)["batch_size"] is None
    with pytest.raises(BatchProblem):
        decode_batch(b"{}", "x")
