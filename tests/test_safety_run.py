"""``traceparse run`` keeps and reports the capture whatever the script does to its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, needs, run_traceparse

pytestmark = needs("tensorflow")

WORK = (
    "import tensorflow as tf\n"
    "x = tf.ones([256, 256])\n"
    "y = tf.matmul(x, x)\n"
    "print('worked', float(tf.reduce_sum(y)), flush=True)\n"
)


def _script(tmp_path: Path, tail: str) -> Path:
    script = tmp_path / "script.py"
    script.write_text(WORK + tail)
    return script


def _capture_line(stderr: str) -> Path:
    lines = [line for line in stderr.splitlines() if line.startswith("Capture")]
    assert lines, stderr
    path = Path(lines[-1].split(": ", 1)[1])
    assert list(path.glob("*.xplane.pb")), path
    return path


def test_os_exit_in_the_script_keeps_the_capture(tmp_path: Path) -> None:
    script = _script(tmp_path, "import os\nos._exit(3)\n")
    done = run_traceparse("run", "--logdir", str(tmp_path / "logs"), str(script), timeout=300)
    assert done.returncode == 3, done.stderr
    assert "worked" in done.stdout
    assert _capture_line(done.stderr).is_relative_to(tmp_path / "logs")


def test_a_segfault_keeps_a_stopped_capture_and_says_what_happened(tmp_path: Path) -> None:
    script = _script(tmp_path, "import ctypes, time\ntime.sleep(4)\nctypes.string_at(0)\n")
    done = run_traceparse(
        "run", "--logdir", str(tmp_path / "logs"), "--duration", "1", str(script), timeout=300
    )
    assert done.returncode == 128 + signal.SIGSEGV, done.stderr
    assert "SIGSEGV" in done.stderr
    _capture_line(done.stderr)


def test_chdir_in_the_script_does_not_move_the_report(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = _script(tmp_path, f"import os\nos.chdir({str(elsewhere)!r})\n")
    work = tmp_path / "work"
    work.mkdir()
    done = run_traceparse("run", "--logdir", "logs", str(script), cwd=work, timeout=300)
    assert done.returncode == 0, done.stderr
    run_dir = _capture_line(done.stderr)
    assert run_dir.is_absolute() and run_dir.is_relative_to(work / "logs")
    assert not (elsewhere / "logs").exists()


def test_an_unwritable_logdir_is_reported_as_such(tmp_path: Path) -> None:
    script = _script(tmp_path, "")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    done = run_traceparse("run", "--logdir", str(blocker / "logs"), "--delay", "1", str(script))
    assert done.returncode == 2, done.stderr
    assert "--logdir" in done.stderr and "--delay" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_ctrl_c_prints_the_kept_capture(tmp_path: Path) -> None:
    script = _script(tmp_path, "import time\ntime.sleep(120)\n")
    process = _start_run(tmp_path, script)
    assert process.stdout is not None
    deadline = time.monotonic() + 240
    while "worked" not in process.stdout.readline():
        assert time.monotonic() < deadline and process.poll() is None
    os.killpg(process.pid, signal.SIGINT)  # as a terminal does: to the whole group
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    _capture_line(stderr)


def _start_run(tmp_path: Path, script: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "traceparse",
            "run",
            "--logdir",
            str(tmp_path / "logs"),
            str(script),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def test_sigterm_is_passed_to_the_script_and_the_capture_kept(tmp_path: Path) -> None:
    pid_file = tmp_path / "script.pid"
    script = _script(
        tmp_path,
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n",
    )
    process = _start_run(tmp_path, script)
    assert process.stdout is not None
    deadline = time.monotonic() + 240
    while "worked" not in process.stdout.readline():
        assert time.monotonic() < deadline and process.poll() is None
    # The script writes its pid after "worked": signal it only once it is there.
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)  # to `traceparse run` only, not its group
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    _capture_line(stderr)
    child = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # the script ended with traceparse run
        os.kill(child, 0)


def test_a_forking_script_writes_one_capture(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "import os, sys\npid = os.fork()\nif pid == 0:\n    sys.exit(0)\nos.waitpid(pid, 0)\n",
    )
    done = run_traceparse("run", "--logdir", str(tmp_path / "logs"), str(script), timeout=300)
    assert done.returncode == 0, done.stderr
    runs = list((tmp_path / "logs" / "plugins" / "profile").iterdir())
    assert len(runs) == 1, runs
    assert _capture_line(done.stderr) == runs[0]


def test_run_summarises_the_run_directory_it_made(tmp_path: Path) -> None:
    # A newer run directory (later name, later mtime) made by the script itself.
    decoy = tmp_path / "logs" / "plugins" / "profile" / "2999_01_01_00_00_00"
    script = _script(
        tmp_path,
        f"import os, shutil\nos.makedirs({str(decoy)!r})\n"
        f"open(os.path.join({str(decoy)!r}, 'other.xplane.pb'), 'wb').write(b'junk')\n",
    )
    done = run_traceparse("run", "--logdir", str(tmp_path / "logs"), str(script), timeout=300)
    assert done.returncode == 0, done.stderr
    run_dir = _capture_line(done.stderr)
    assert run_dir != decoy and run_dir.parent == decoy.parent
