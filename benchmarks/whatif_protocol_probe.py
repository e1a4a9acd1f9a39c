"""Development probes of the what-if rules (issue 50), outside the protocol's sets.

Small Keras models that no protocol set holds, captured to read a mechanism
off (which tensors a change makes, and when) where the development set has no
such layer: ``lstm`` (Embedding + LSTM(192): a recurrent loop under
``mixed_bfloat16``), ``attention`` (Embedding + MultiHeadAttention(6, 16) +
LayerNormalization under ``mixed_bfloat16``) and ``bnorm`` (Dense 768/768/384
with BatchNormalization and Dropout, Adam against SGD). They informed the
rules the way the development set does (docs/whatif.md says what each
showed); they are not a measure of the rules. Same settings as
``whatif_protocol_models.py``: one process per capture, inter-op parallelism 1,
one epoch outside the capture, one of 3 steps inside.

    python benchmarks/whatif_protocol_probe.py lstm|attention|bnorm base|bf16|sgd OUTDIR
"""

from __future__ import annotations

import os
import sys
from typing import Any

BATCH = {"lstm": 32, "bnorm": 96, "attention": 24}
STEPS = 3
CLASSES = 10


def _model(keras: Any, name: str) -> Any:
    if name == "lstm":
        inp = keras.Input((48,), dtype="int32")
        x = keras.layers.Embedding(3000, 96)(inp)
        x = keras.layers.LSTM(192)(x)
    elif name == "bnorm":
        x = inp = keras.Input((192,))
        for width in (768, 768, 384):
            x = keras.layers.Dense(width)(x)
            x = keras.layers.BatchNormalization()(x)
            x = keras.layers.Activation("relu")(x)
            x = keras.layers.Dropout(0.25)(x)
    elif name == "attention":
        inp = keras.Input((96,), dtype="int32")
        x = keras.layers.Embedding(1500, 96)(inp)
        a = keras.layers.MultiHeadAttention(6, 16)(x, x)
        x = keras.layers.LayerNormalization()(x + a)
        x = keras.layers.GlobalAveragePooling1D()(x)
    else:
        raise SystemExit(f"MODEL must be one of {tuple(BATCH)}, got {name!r}")
    return keras.Model(inp, keras.layers.Dense(CLASSES, dtype="float32")(x))


def capture(name: str, variant: str, logdir: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    if variant not in ("base", "bf16", "sgd"):
        raise SystemExit(f"VARIANT must be base, bf16 or sgd, got {variant!r}")
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras = tf.keras
    keras.utils.set_random_seed(0)
    if variant == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = _model(keras, name)
    optimizer = keras.optimizers.SGD(1e-2) if variant == "sgd" else keras.optimizers.Adam(1e-3)
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    batch = BATCH[name]
    rng = np.random.default_rng(0)
    n = STEPS * batch
    if name == "lstm":
        xs = rng.integers(0, 3000, (n, 48)).astype("int32")
    elif name == "attention":
        xs = rng.integers(0, 1500, (n, 96)).astype("int32")
    else:
        xs = rng.random((n, 192), dtype=np.float32)
    ys = rng.integers(0, CLASSES, n).astype("int32")
    model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0)  # build and trace
    tf.profiler.experimental.start(logdir)
    model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0)
    tf.profiler.experimental.stop()


if __name__ == "__main__":
    capture(sys.argv[1], sys.argv[2], sys.argv[3])
