"""Recording source lines while capturing (docs/sources.md): TensorFlow runs in a
child process, as a user's program would.

The real-model checks are in ``test_sources.py`` on committed captures; these
check the recorder's own cases: a ``tf.function`` traced before the capture,
eager ops, ``sources=False``, and ``traceparse run --delay`` (the capture starts
on a timer thread while the script's ops run on its main thread).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_traceparse

import traceparse

SCRIPT = """\
import sys
import tensorflow as tf
import traceparse

@tf.function
def grow(x):
    return tf.concat([x, x], axis=0)  # traced line

x = tf.random.uniform((256, 512))
grow(x)  # traced here, before the capture
with traceparse.profile(sys.argv[1], sources=sys.argv[2] == "1"):
    for _ in range(3):
        y = grow(x)
        z = tf.matmul(y, y, transpose_b=True)  # eager line
"""


def run_script(tmp_path: Path, sources: bool) -> Path:
    script = tmp_path / "program.py"
    script.write_text(SCRIPT)
    logdir = tmp_path / "logs"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "1"}
    done = subprocess.run(
        [sys.executable, str(script), str(logdir), "1" if sources else "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return logdir


def line(text: str) -> int:
    return next(i + 1 for i, row in enumerate(SCRIPT.splitlines()) if row.endswith(text))


def test_traced_before_and_eager_ops_get_their_lines(tmp_path: Path) -> None:
    prof = traceparse.load(run_script(tmp_path, sources=True))
    assert list(prof.stacks["host"].unique())
    sources = set(prof.allocations["source"].dropna().astype(str))
    assert f"program.py:{line('# traced line')} grow" in sources
    assert f"program.py:{line('# eager line')} <module>" in sources
    lines = prof.lines()
    assert lines["source"].notna().all()
    assert not any("source lines" in note for note in prof.diagnostics)


def test_sources_false_writes_no_record(tmp_path: Path) -> None:
    logdir = run_script(tmp_path, sources=False)
    assert not list(logdir.rglob("*.sources.json.gz"))
    prof = traceparse.load(logdir)
    assert prof.allocations["source"].isna().all()
    assert "diagnostic" in prof.lines().attrs


def test_run_with_a_delay_records_the_scripts_eager_ops(tmp_path: Path) -> None:
    script = tmp_path / "delayed.py"
    script.write_text(
        "import time\nimport tensorflow as tf\ntime.sleep(2)\n"
        "for _ in range(3):\n"
        "    a = tf.random.uniform((512, 512))\n"
        "    b = tf.matmul(a, a)  # eager line\n"
    )
    logdir = tmp_path / "logs"
    done = run_traceparse(
        "run",
        "--logdir",
        str(logdir),
        "--delay",
        "0.5",
        "--no-summary",
        str(script),
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    sources = set(traceparse.load(logdir).allocations["source"].dropna().astype(str))
    assert any(s.endswith("delayed.py:6 <module>") for s in sources), sources
