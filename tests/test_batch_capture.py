"""Every capture way records the batch its steps saw (issue 47, item 1): real
captures made with TensorFlow in a child process, as a user's program would.

The record's reader and its crafted cases are in ``test_batch_record.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_traceparse

import traceparse
from traceparse.core.sidecars import BATCH

pytestmark = pytest.mark.slow

# Each way in its own logdir under argv[1]. A model small enough to capture in
# seconds; 100 examples at batch 32 leave a partial last batch of 4.
SCRIPT = """\
import sys
import numpy as np
import tensorflow as tf
import keras
import traceparse
from traceparse.integrations.keras import MemoryCallback

root = sys.argv[1]
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(1)])
model.compile("sgd", "mse")
optimizer = keras.optimizers.SGD()

@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

x, y = tf.ones((48, 8)), tf.ones((48, 1))
train_step(x, y)  # traced before the capture

with traceparse.profile(f"{root}/function") as cap:
    for step in range(3):
        with cap.step(step):
            train_step(x, y)
            train_step(x[:1], y[:1])  # a step may also call on one example

with traceparse.profile(f"{root}/given", batch_size=7) as cap:
    train_step(x, y)

with traceparse.profile(f"{root}/step_given") as cap:
    for step in range(2):
        with cap.step(step, batch_size=12):
            train_step(x, y)

with traceparse.profile(f"{root}/on_batch") as cap:
    for step in range(2):
        with cap.step(step):
            model.train_on_batch(np.ones((24, 8)), np.ones((24, 1)))

with traceparse.profile(f"{root}/nothing") as cap:
    tf.matmul(x, x, transpose_b=True)  # no step function: nothing to record

# Activations of 32 x 4096 floats (512 KiB): past the CPU pool that records nothing.
wide = keras.Sequential([keras.Input((256,)), keras.layers.Dense(4096), keras.layers.Dense(1)])
wide.compile("sgd", "mse")
wide.fit(np.ones((100, 256)), np.ones((100, 1)), batch_size=32, epochs=1, verbose=0,
         callbacks=[MemoryCallback(f"{root}/callback", profile_batch=(2, 4))])

data = np.ones((100, 8)), np.ones((100, 1))

dataset = tf.data.Dataset.from_tensor_slices(data).batch(20, drop_remainder=True)
model.fit(dataset, epochs=1, verbose=0,
          callbacks=[MemoryCallback(f"{root}/dataset", profile_batch=(1, 2))])
"""

FIT_SCRIPT = """\
import numpy as np
import keras

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(np.ones((40, 8)), np.ones((40, 1)), batch_size=16, epochs=1, verbose=0)
"""


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("batch")
    script = root / "program.py"
    script.write_text(SCRIPT)
    # oneDNN's allocator is the one that records memory events on CPU.
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "1"}
    done = subprocess.run(
        [sys.executable, str(script), str(root / "logs")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "logs"


def recorded(logdir: Path) -> tuple[int | None, str | None, tuple[tuple[int, int], ...]]:
    record = traceparse.load(logdir).recorded_batch
    assert record is not None, list(logdir.rglob("*"))
    return record.batch_size, record.how, record.steps


def test_a_tf_function_step_records_its_first_argument(captured: Path) -> None:
    # Each step also called the function on one example: the step's batch is 48.
    assert recorded(captured / "function") == (48, "function", ((0, 48), (1, 48), (2, 48)))


def test_a_given_batch_is_recorded(captured: Path) -> None:
    assert recorded(captured / "given") == (7, "given", ())
    assert recorded(captured / "step_given") == (12, "given", ((0, 12), (1, 12)))


def test_train_on_batch_records_the_batch(captured: Path) -> None:
    assert recorded(captured / "on_batch") == (24, "function", ((0, 24), (1, 24)))


def test_memory_callback_records_each_batch_and_the_partial_one(captured: Path) -> None:
    # fit's batches 2, 3 and 4 of 32, 32, 32, 4 (counted from 1, as the steps are).
    assert recorded(captured / "callback") == (32, "keras", ((2, 32), (3, 32), (4, 4)))


def test_a_batched_dataset_records_its_batch(captured: Path) -> None:
    assert recorded(captured / "dataset") == (20, "keras", ((1, 20), (2, 20)))


def test_a_capture_without_steps_writes_no_record(captured: Path) -> None:
    assert traceparse.load(captured / "nothing").recorded_batch is None
    assert not list((captured / "nothing").rglob(f"*{BATCH.suffix}"))


def test_predict_starts_from_the_recorded_batch(captured: Path) -> None:
    profile = traceparse.load(captured / "callback")
    row = profile.predict(64).iloc[0]
    assert int(row["from_batch"]) == 32
    assert row["batch_evidence"] == "recorded by the capture: the batches Keras fed fit's steps"


def test_traceparse_run_records_the_batch_of_a_plain_fit(tmp_path: Path) -> None:
    script = tmp_path / "fit.py"
    script.write_text(FIT_SCRIPT)
    done = run_traceparse(
        "run", "--logdir", str(tmp_path / "logs"), "--no-summary", str(script), timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # 40 examples at 16: batches of 16, 16 and 8, marked steps 1 to 3.
    assert recorded(tmp_path / "logs") == (16, "keras", ((1, 16), (2, 16), (3, 8)))
