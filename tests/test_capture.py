"""traceparse.capture: real captures with TensorFlow (CPU), in tmp_path.

The profiler is process-wide, so these tests run one capture at a time. The
tensors are 1 MiB: on CPU only allocations of 256 KiB or more reach the BFC
allocator that records memory events.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers.profiler import no_profiler_left_running  # noqa: F401 (autouse)

from traceparse.capture import TENSORFLOW_MISSING, Capture, profile, run_script
from traceparse.errors import CaptureError, UsageError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tf() -> ModuleType:
    return pytest.importorskip("tensorflow", reason="capturing needs TensorFlow")


@pytest.fixture(scope="module")
def xplane_pb2(tf: ModuleType) -> ModuleType:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    return xplane_pb2


def read_events(xplane_pb2: ModuleType, path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(name, stats) of every event in a capture, stats with ref values resolved."""
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    events = []
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                stats = {}
                for stat in event.stats:
                    kind = stat.WhichOneof("value")
                    value = getattr(stat, kind) if kind else None
                    if kind == "ref_value":
                        value = plane.stat_metadata[value].name
                    stats[plane.stat_metadata[stat.metadata_id].name] = value
                events.append((plane.event_metadata[event.metadata_id].name, stats))
    return events


def xplanes(capture: Capture) -> list[Path]:
    return [f for f in capture.files if f.name.endswith(".xplane.pb")]


# --------------------------------------------------------------------------
# profile()
# --------------------------------------------------------------------------


def test_capture_with_steps_writes_xplane_with_markers(
    tmp_path: Path, tf: ModuleType, xplane_pb2: ModuleType
) -> None:
    logdir = tmp_path / "logs"
    older = logdir / "plugins" / "profile" / "2020_01_01_00_00_00" / "old.xplane.pb"
    older.parent.mkdir(parents=True)
    older.write_bytes(b"")

    with profile(logdir) as cap:
        assert cap.running
        for step in range(3):
            with cap.step(step):
                kept = tf.zeros((256, 1024)) + float(step)  # 1 MiB
        with cap.step(7, name="eval"):
            del kept

    assert cap.stopped and not cap.running
    files = xplanes(cap)
    assert len(files) == 1, cap.files
    assert older not in cap.files  # an earlier run in the same logdir is not this capture's
    assert files[0].is_file() and files[0].stat().st_size > 0
    assert cap.run_dir == files[0].parent
    assert cap.run_dir.parent == logdir / "plugins" / "profile"
    assert len(cap.run_dir.name) == len("YYYY_MM_DD_HH_MM_SS")

    events = read_events(xplane_pb2, files[0])
    markers = [(name, s["step_num"], s.get("_r")) for name, s in events if "step_num" in s]
    assert sorted(markers) == [("eval", 7, 1), ("train", 0, 1), ("train", 1, 1), ("train", 2, 1)]
    allocations = [s for name, s in events if name == "MemoryAllocation"]
    assert any(s.get("requested_bytes") == 256 * 1024 * 4 for s in allocations)


def test_exception_in_block_keeps_capture_and_reraises(
    tmp_path: Path, tf: ModuleType, xplane_pb2: ModuleType
) -> None:
    with pytest.raises(RuntimeError, match="boom"), profile(tmp_path) as cap, cap.step(0):
        tf.zeros((256, 1024))
        raise RuntimeError("boom")
    assert cap.stopped
    (path,) = xplanes(cap)
    names = {name for name, _ in read_events(xplane_pb2, path)}
    assert "train" in names
    # The profiler was stopped: a new capture can start.
    with profile(tmp_path / "again") as again:
        pass
    assert xplanes(again)


def test_second_profile_while_one_runs_is_a_capture_error(tmp_path: Path, tf: ModuleType) -> None:
    with profile(tmp_path / "first") as first:
        second = profile(tmp_path / "second")
        with pytest.raises(CaptureError, match="already running") as info:
            second.start()
        assert "\n" not in str(info.value)
        assert not second.running
    assert xplanes(first)  # the running capture was not disturbed

    tf.profiler.experimental.start(str(tmp_path / "raw"))
    try:
        with pytest.raises(CaptureError, match="already running"), profile(tmp_path / "third"):
            pass
    finally:
        tf.profiler.experimental.stop()


def test_a_capture_is_used_once(tmp_path: Path, tf: ModuleType) -> None:
    cap = profile(tmp_path)
    assert cap.stop() == []  # never started: nothing to stop
    with cap:
        pass
    files = cap.stop()  # stopping again is harmless
    assert files == cap.files and files
    with pytest.raises(UsageError, match="already stopped"):
        cap.start()


def test_load_smoke(tmp_path: Path, tf: ModuleType) -> None:
    with profile(tmp_path) as cap, cap.step(0):
        tf.zeros((256, 1024))
    assert cap.load() is not None


def test_load_before_stop_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="stop the capture"):
        profile(tmp_path).load()


# --------------------------------------------------------------------------
# Arguments and TensorFlow's absence (no profiler needed)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"host_tracer_level": -1},
        {"host_tracer_level": 4},
        {"host_tracer_level": True},
        {"host_tracer_level": 2.0},
        {"python_tracer_level": -1},
        {"python_tracer_level": 2},
        {"device_tracer_level": -1},
        {"delay_ms": -5},
    ],
)
def test_bad_levels_are_usage_errors(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        profile(tmp_path, **kwargs)


def test_bad_logdirs_are_usage_errors(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for logdir in ("", "gs://bucket/logs", a_file):
        with pytest.raises(UsageError):
            profile(logdir)


def test_bad_steps_are_usage_errors(tmp_path: Path) -> None:
    cap = profile(tmp_path)
    with pytest.raises(UsageError):
        cap.step(-1)
    with pytest.raises(UsageError):
        cap.step(1.5)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        cap.step(0, name="")


def test_tensorflow_missing_is_a_capture_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # import tensorflow -> ImportError
    with pytest.raises(CaptureError) as info:
        profile(tmp_path).start()
    assert str(info.value) == TENSORFLOW_MISSING
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    with pytest.raises(CaptureError):
        run_script(script, logdir=tmp_path / "logs")


def test_import_does_not_import_tensorflow() -> None:
    code = textwrap.dedent(
        """
        import sys
        import traceparse.capture
        from traceparse.capture import profile
        profile("unused-logdir")
        loaded = sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow."))
        assert not loaded, loaded
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------
# run_script()
# --------------------------------------------------------------------------

SCRIPT = """\
import json
import sys

import helper  # a module beside the script: the script's directory is sys.path[0]
import tensorflow as tf

with open(sys.argv[1], "w") as out:
    json.dump({{"argv": sys.argv, "name": __name__, "path0": sys.path[0]}}, out)
kept = tf.zeros((256, 1024))  # 1 MiB
{ending}
"""


def write_script(directory: Path, ending: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "helper.py").write_text("VALUE = 1\n")
    script = directory / "train.py"
    script.write_text(SCRIPT.format(ending=ending))
    return script


@pytest.mark.parametrize(
    ("ending", "exit_code"),
    [
        ("", 0),
        ("sys.exit()", 0),
        ("sys.exit(3)", 3),
        ("raise ValueError('broken script')", 1),
        ("sys.exit('fatal: message')", 1),
    ],
)
def test_run_script_exit_codes_argv_and_capture(
    tmp_path: Path,
    tf: ModuleType,
    capsys: pytest.CaptureFixture[str],
    ending: str,
    exit_code: int,
) -> None:
    import json

    script = write_script(tmp_path / "project", ending)
    report = tmp_path / "report.json"
    argv_before, path_before = list(sys.argv), list(sys.path)
    sys.modules.pop("helper", None)

    result = run_script(script, [str(report), "--flag", "x y"], logdir=tmp_path / "logs")

    assert result.exit_code == exit_code
    assert result.profiler_error is None
    assert sys.argv == argv_before and sys.path == path_before
    seen = json.loads(report.read_text())
    assert seen["argv"] == [str(script), str(report), "--flag", "x y"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(script.parent)
    assert result.capture.stopped and xplanes(result.capture)
    err = capsys.readouterr().err
    if ending.startswith("raise"):
        assert "Traceback" in err and "ValueError: broken script" in err
        assert str(script) in err
    if "message" in ending:
        assert "fatal: message" in err
    sys.modules.pop("helper", None)


def test_run_script_delay_longer_than_script_captures_nothing(
    tmp_path: Path, tf: ModuleType
) -> None:
    script = write_script(tmp_path, "")
    result = run_script(script, [str(tmp_path / "r.json")], logdir=tmp_path / "logs", delay_s=30)
    sys.modules.pop("helper", None)
    assert result.exit_code == 0
    assert not result.capture.running
    assert result.capture.files == [] and result.capture.run_dir is None


def test_run_script_delay_and_duration(
    tmp_path: Path, tf: ModuleType, xplane_pb2: ModuleType
) -> None:
    script = write_script(tmp_path, "import time\ntime.sleep(1.5)")
    result = run_script(
        script, [str(tmp_path / "r.json")], logdir=tmp_path / "logs", delay_s=0.1, duration_s=0.3
    )
    sys.modules.pop("helper", None)
    assert result.exit_code == 0 and result.profiler_error is None
    (path,) = xplanes(result.capture)
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    env = next((p for p in space.planes if p.name == "Task Environment"), None)
    if env is None:
        # TensorFlow 2.16 writes no start and stop times (2.17 on do): the capture
        # exists, which is what can be checked there.
        assert tf.__version__.startswith("2.16."), tf.__version__
        return
    times = {env.stat_metadata[s.metadata_id].name: s.uint64_value for s in env.stats}
    seconds = (times["profile_stop_time"] - times["profile_start_time"]) / 1e9
    assert 0.2 < seconds < 1.2  # stopped by duration_s, not by the end of the script


def test_run_script_bad_arguments(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    with pytest.raises(UsageError, match="no such script"):
        run_script(tmp_path / "missing.py", logdir=tmp_path)
    with pytest.raises(UsageError):
        run_script(script, "not-a-list", logdir=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        run_script(script, logdir=tmp_path, delay_s=-1)
    with pytest.raises(UsageError):
        run_script(script, logdir=tmp_path, duration_s=0)
    with pytest.raises(UsageError):
        run_script(script, logdir=tmp_path, host_tracer_level=-2)
