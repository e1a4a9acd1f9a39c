"""Issue 36 item 5: a path that is not a capture gets what it is and what to give
instead (files/wrong.py), never "not a readable XSpace ... copy the file again"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, fixture_file, run_traceparse

import traceparse

INVENTORY = next((FIXTURES / "keras_inventory").rglob("*.variables.json"))
LOGS = "<logdir>/plugins/profile/<run>/<host>.xplane.pb"


def _script(path: Path) -> None:
    path.write_text("import tensorflow as tf\n\nprint(tf.ones((2, 2)))\n")


def _inventory(path: Path) -> None:
    shutil.copy(INVENTORY, path)


def _json(path: Path) -> None:
    path.write_text(json.dumps({"loss": [0.5, 0.25]}))


def _baseline(path: Path) -> None:
    path.write_text(json.dumps({"format": "traceparse.baseline", "version": 1}))


def _events(path: Path) -> None:
    # A TFRecord: length, its CRC, the record, its CRC (the bytes do not matter here).
    path.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00\xa3\x7fK\x22\t\x00\x00\x80")


def _text(path: Path) -> None:
    path.write_text("step,loss\n1,0.5\n2,0.25\n")


# (file name, how it is made, words the message must hold)
CASES = [
    ("train.py", _script, ["a Python script", "traceparse run train.py"]),
    ("localhost.variables.json", _inventory, ["traceparse.variables record", "xplane.pb"]),
    ("metrics.json", _json, ["a JSON file", LOGS]),
    ("baseline.json", _baseline, ["baseline", "--baseline baseline.json", "traceparse diff"]),
    ("events.out.tfevents.1764000000.host.1.v2", _events, ["TensorBoard event file", LOGS]),
    ("losses.csv", _text, ["a text file", LOGS]),
]


@pytest.mark.parametrize(("name", "make", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_file_that_is_not_a_capture_says_what_it_is(
    tmp_path: Path, name: str, make: object, words: list[str]
) -> None:
    path = tmp_path / name
    make(path)  # type: ignore[operator]
    with pytest.raises(traceparse.InputError) as info:
        traceparse.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert "XSpace" not in message and "copy the file again" not in message
    for word in words:
        assert word in message, message
    assert info.value.exit_code == 3


def test_the_command_line_says_it_in_one_line(tmp_path: Path) -> None:
    _script(tmp_path / "myscript.py")
    done = run_traceparse("summary", "myscript.py", cwd=tmp_path)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr == (
        "traceparse: error: myscript.py: a Python script, not a profiler capture; run it "
        "under the profiler with `traceparse run myscript.py`, then give the logdir it writes\n"
    )


def test_a_renamed_capture_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "capture.pb"
    shutil.copy(fixture_file("leak"), path)
    assert len(traceparse.load(path).allocations)


def test_a_url_is_judged_by_its_name() -> None:
    fsspec = pytest.importorskip("fsspec")
    fsspec.filesystem("memory").pipe("/wrong/train.py", b"print(1)\n")
    with pytest.raises(traceparse.InputError, match="a Python script"):
        traceparse.load("memory://wrong/train.py")


def _tensorboard_only(root: Path) -> None:
    (root / "train").mkdir()
    _events(root / "train" / "events.out.tfevents.1764000000.host.1.v2")


def _empty_profile(root: Path) -> None:
    (root / "plugins" / "profile" / "2026_01_01_00_00_00").mkdir(parents=True)
    (root / "plugins" / "profile" / "2026_01_01_00_00_00" / "host.trace.json.gz").write_bytes(b"")


def _notes(root: Path) -> None:
    _text(root / "notes.csv")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_tensorboard_only, ["TensorBoard log directory without a profile", "profile_batch"]),
        (_empty_profile, ["plugins/profile/ holds no .xplane.pb"]),
        (_notes, ["a directory with no plugins/profile/", "traceparse run"]),
    ],
    ids=["tensorboard logdir", "empty profile run", "other files"],
)
def test_a_directory_without_a_capture_says_what_it_holds(
    tmp_path: Path, make: object, words: list[str]
) -> None:
    make(tmp_path)  # type: ignore[operator]
    with pytest.raises(traceparse.NoCaptureError) as info:
        traceparse.load(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{tmp_path}: no profiler capture here: "), message
    for word in words:
        assert word in message, message
