"""Capturing a failure (issue 39) with TensorFlow: the exception is unchanged, the
record is written beside the capture, and trouble while saving never hides it.

The out-of-memory runs themselves are the ``fixtures/oom_*`` captures (each
waits 10 s in TensorFlow's allocator); these tests raise ordinary exceptions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import run_traceparse
from helpers.profiler import no_profiler_left_running  # noqa: F401 (autouse)

import traceparse
from traceparse.capture import profile


@pytest.fixture(scope="module")
def tf() -> ModuleType:
    return pytest.importorskip("tensorflow", reason="capturing needs TensorFlow")


def failure_files(logdir: Path) -> list[Path]:
    return sorted(logdir.rglob("*.failure.json"))


def test_the_exception_propagates_unchanged_and_is_recorded(tmp_path: Path, tf: ModuleType) -> None:
    raised = ValueError("boom\x1b[31m")
    with pytest.raises(ValueError) as caught, profile(tmp_path) as cap:
        for step in (1, 2):
            with cap.step(step):
                kept = tf.zeros((256, 1024)) + float(step)  # 1 MiB
                if step == 2:
                    raise raised
    assert caught.value is raised
    assert not getattr(raised, "__notes__", None)  # nothing added to it
    # The innermost frame is still the raise in this test.
    assert caught.traceback[-1].frame.code.name == (
        "test_the_exception_propagates_unchanged_and_is_recorded"
    )
    del kept
    (path,) = failure_files(tmp_path)
    assert path in cap.files
    data = json.loads(path.read_text())
    assert data["exception"] == {
        "type": "ValueError",
        "module": "builtins",
        "message": "boom\x1b[31m",
    }
    assert data["step"] == 2 and data["way"] == "step"
    prof = cap.load()
    f = prof.failure
    assert f is not None and not f.out_of_memory
    assert f.exception_type == "ValueError" and f.step == 2
    assert f.requested_bytes is None and f.shape is None  # nothing to parse: NA
    result = run_traceparse("summary", str(cap.run_dir))
    assert result.returncode == 0, result.stderr
    assert "The run ended in `ValueError` at step 2: boom\\x1b[31m." in result.stdout
    assert "\x1b" not in result.stdout
    # Not out of memory: check judges the budgets alone.
    assert run_traceparse("check", str(cap.run_dir), "--max-peak", "1GiB").returncode == 0


def test_a_failure_while_saving_never_hides_the_exception(
    tmp_path: Path,
    tf: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import traceparse.capture.failure as failure

    def broken(*args: object, **kwargs: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(failure, "write_failure", broken)
    with pytest.raises(KeyError, match="lost"), profile(tmp_path) as cap:
        tf.zeros((256, 1024))
        raise KeyError("lost")
    assert cap.stopped and cap.run_dir is not None
    assert failure_files(tmp_path) == []
    assert "the failure record was not written: [Errno 28]" in capsys.readouterr().err
    assert traceparse.load(cap.run_dir).failure is None  # the capture itself is kept


def test_a_step_that_raised_and_was_handled_is_no_failure(tmp_path: Path, tf: ModuleType) -> None:
    with profile(tmp_path) as cap:
        with pytest.raises(RuntimeError), cap.step(1):
            raise RuntimeError("retry with a smaller batch")
        with cap.step(2):
            tf.zeros((256, 1024))
    assert failure_files(tmp_path) == []
    assert cap.load().failure is None


def test_ctrl_c_and_exit_are_not_failures(tmp_path: Path, tf: ModuleType) -> None:
    with pytest.raises(SystemExit), profile(tmp_path / "exit"):
        tf.zeros((256, 1024))
        raise SystemExit(0)
    with pytest.raises(KeyboardInterrupt), profile(tmp_path / "ctrl_c"):
        raise KeyboardInterrupt
    assert failure_files(tmp_path) == []


def test_a_manual_capture_the_program_dies_in_is_kept_with_its_failure(
    tmp_path: Path, tf: ModuleType
) -> None:
    import subprocess
    import textwrap

    script = tmp_path / "dies.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import tensorflow as tf
            import traceparse
            cap = traceparse.profile({str(tmp_path / "logs")!r}).start()
            kept = tf.zeros((256, 1024))
            raise LookupError("no such shard")
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1 and "LookupError: no such shard" in done.stderr
    (path,) = failure_files(tmp_path / "logs")
    f = traceparse.load(path.parent).failure
    assert f is not None and f.exception_type == "LookupError" and f.way == "profile"
    assert f.message == "no such shard"
