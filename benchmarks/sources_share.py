"""How much of a model's activation and gradient bytes at the peak name the model's
own lines (issue 38): a subclassed Keras model that none of the source-line
fixtures resembles (two conv blocks with batch normalization, dropout, an LSTM),
trained with ``fit``, with ``fit(jit_compile=True)`` and in an eager
``GradientTape`` loop, each captured by ``traceparse.profile()`` in a process of
its own. Per way: the bytes at each allocator's peak held by the model's
activations and gradients (``breakdown`` role), and the share whose ``source``
is a line of this file's ``call`` methods.

    python benchmarks/sources_share.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

WAYS = ("fit", "jit", "tape")
BATCH, STEPS = 64, 3
# This file as the recorder shows it: relative to the working directory.
MINE = os.path.relpath(__file__, Path.cwd())


def model(keras: Any, tf: Any) -> Any:
    class Block(keras.layers.Layer):  # type: ignore[misc]
        def __init__(self, filters: int) -> None:
            super().__init__()
            self.conv = keras.layers.Conv2D(filters, 3, padding="same")
            self.bn = keras.layers.BatchNormalization()

        def call(self, x: Any, training: bool = False) -> Any:
            y = self.conv(x)
            y = self.bn(y, training=training)
            return tf.nn.gelu(y)

    class Net(keras.Model):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.b1, self.b2 = Block(32), Block(64)
            self.pool = keras.layers.MaxPooling2D()
            self.drop = keras.layers.Dropout(0.3)
            self.lstm = keras.layers.LSTM(64)
            self.out = keras.layers.Dense(10)

        def call(self, x: Any, training: bool = False) -> Any:
            x = self.pool(self.b1(x, training=training))
            x = self.drop(self.b2(x, training=training), training=training)
            _, h, w, c = x.shape
            x = tf.reshape(x, (-1, h, w * c))
            return self.out(self.lstm(x))

    return Net()


def capture(way: str, logdir: str) -> None:
    import keras
    import numpy as np
    import tensorflow as tf

    import traceparse

    keras.utils.set_random_seed(0)
    net = model(keras, tf)
    x = np.random.rand(BATCH * (STEPS + 1), 32, 32, 3).astype("float32")
    y = np.random.randint(0, 10, BATCH * (STEPS + 1))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if way == "tape":
        optimizer = keras.optimizers.Adam()

        def step(i: int) -> None:
            rows = slice(i * BATCH, (i + 1) * BATCH)
            with tf.GradientTape() as tape:
                value = loss(y[rows], net(x[rows], training=True))
            grads = tape.gradient(value, net.trainable_variables)
            optimizer.apply_gradients(zip(grads, net.trainable_variables, strict=True))

        step(0)
        with traceparse.profile(logdir) as cap:
            for i in range(1, STEPS + 1):
                with cap.step(i):
                    step(i)
        return
    net.compile(optimizer="adam", loss=loss, jit_compile=way == "jit")
    net.fit(x[:BATCH], y[:BATCH], batch_size=BATCH, verbose=0)  # traced before the capture
    with traceparse.profile(logdir):
        net.fit(x[BATCH:], y[BATCH:], batch_size=BATCH, verbose=0)


def share(logdir: str) -> tuple[float, int]:
    import traceparse
    from traceparse.analysis.breakdown import INSIDE

    rows = traceparse.load(logdir).breakdown
    rows = rows[rows["holder"].astype(object).isin([*INSIDE, "xla_buffer", "xla_value"])]
    # Eager ops have no scope to read a role from: there every row is the model's.
    roles = rows["role"].astype(object)
    if roles.isin(["activation", "gradient"]).any():
        rows = rows[roles.isin(["activation", "gradient"]).to_numpy(dtype=bool)]
    ours = (
        rows["source"]
        .astype(object)
        .map(lambda s: isinstance(s, str) and s.startswith(f"{MINE}:") and s.endswith(" call"))
    )
    total = int(rows["bytes"].sum())
    return (int(rows["bytes"][ours.to_numpy(dtype=bool)].sum()) / total if total else 0.0), total


def main() -> int:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "1"}
    print("| way | activation and gradient bytes at the peak | on this file's call lines |")
    print("| --- | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for way in WAYS:
            logdir = os.path.join(tmp, way)
            command = [sys.executable, __file__, "--capture", way, logdir]
            subprocess.run(command, env=env, check=True, capture_output=True)
            found, total = share(logdir)
            print(f"| {way} | {total / 2**20:.1f} MiB | {found:.1%} |")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--capture"]:
        capture(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
