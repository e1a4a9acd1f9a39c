"""Recording source lines while capturing (docs/sources.md): TensorFlow runs in a
child process, as a user's program would.

The real-model checks are in ``test_sources.py`` on committed captures; these
check the recorder's own cases: a ``tf.function`` traced before the capture,
eager ops, ``sources=False``, ``traceparse run --delay`` (the capture starts
on a timer thread while the script's ops run on its main thread), and a
recurrent layer, whose backward pass is made in graphs of its own.
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


def run_script(tmp_path: Path, sources: bool, text: str = SCRIPT) -> Path:
    script = tmp_path / "program.py"
    script.write_text(text)
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


def line(marker: str, text: str = SCRIPT) -> int:
    return next(i + 1 for i, row in enumerate(text.splitlines()) if row.endswith(marker))


def test_traced_before_and_eager_ops_get_their_lines(tmp_path: Path) -> None:
    prof = traceparse.load(run_script(tmp_path, sources=True))
    assert list(prof.stacks["host"].unique())
    sources = set(prof.allocations["source"].dropna().astype(str))
    assert f"program.py:{line('# traced line')} grow" in sources
    assert f"program.py:{line('# eager line')} <module>" in sources
    lines = prof.lines()
    assert lines["source"].notna().all()
    assert not any("source lines" in note for note in prof.diagnostics())


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


RECURRENT = """\
import sys
import keras
import numpy as np
import traceparse

class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.lstm = keras.layers.LSTM(256)
        self.head = keras.layers.Dense(4)

    def call(self, x):
        h = self.lstm(x)  # lstm line
        return self.head(h)  # head line

x = np.random.rand(192, 16, 64).astype("float32")
y = np.random.randint(0, 4, 192)
model = Net()
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x[:64], y[:64], batch_size=64, verbose=0)  # traced before the capture
with traceparse.profile(sys.argv[1], sources=sys.argv[2] == "1"):
    model.fit(x[64:], y[64:], batch_size=64, verbose=0)
"""


def test_a_loops_backward_pass_names_the_layers_line(tmp_path: Path) -> None:
    # The LSTM's gradient runs in a while loop's gradient body, and the forward
    # body gets accumulators, both made by TensorFlow's gradient code when the
    # step asked for gradients: they name the line that called the layer, not
    # the line of fit.
    prof = traceparse.load(run_script(tmp_path, sources=True, text=RECURRENT))
    lstm = f"program.py:{line('# lstm line', RECURRENT)} call"
    made = prof.allocations
    ops = made["op"].astype(object).fillna("")
    backward = ops.str.contains("while_grad|TensorListPushBack", regex=True).to_numpy(dtype=bool)
    assert backward.sum() >= 3
    sources = made["source"].astype(object)[backward]
    assert (sources == lstm).mean() >= 0.9, sources.value_counts()
