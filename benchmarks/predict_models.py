"""The four small Keras models of benchmarks/bench_predict.py, captured on CPU.

Each capture runs in a process of its own (fresh allocator counters and
addresses): the model is built and trained one warm-up step before
``traceparse.profile()`` starts, then 3 marked ``train_on_batch`` steps.

    python benchmarks/predict_models.py MODEL BATCH OUTDIR

MODEL is one of ``MODELS`` or ``HELD_OUT``; the capture goes to OUTDIR (a logdir).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

# The captured batch B of each model; the benchmark also captures 2B and 4B.
MODELS: dict[str, int] = {
    "cnn_eager": 16,
    "mlp_xla": 64,
    "transformer": 16,
    "bn_dropout": 16,
}
COMPILED = {"mlp_xla"}
# Models the prediction was never tuned on, measured once its design was settled
# (``bench_predict.py --held-out``): captured at B, 2B and 4B like the others.
HELD_OUT: dict[str, int] = {"deep_cnn": 24, "gru": 24}
STEPS = 3


def _cnn(keras: Any) -> tuple[Any, tuple[int, ...], int]:
    inp = keras.Input((32, 32, 3), name="image")
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv1")(inp)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv2")(x)
    x = keras.layers.MaxPooling2D(2, name="pool")(x)
    x = keras.layers.Flatten(name="flat")(x)
    x = keras.layers.Dense(128, activation="relu", name="hidden")(x)
    out = keras.layers.Dense(10, name="logits")(x)
    return keras.Model(inp, out, name="cnn"), (32, 32, 3), 10


def _mlp(keras: Any) -> tuple[Any, tuple[int, ...], int]:
    inp = keras.Input((512,), name="features")
    x = keras.layers.Dense(2048, activation="relu", name="wide")(inp)
    x = keras.layers.Dense(512, activation="relu", name="narrow")(x)
    out = keras.layers.Dense(10, name="logits")(x)
    return keras.Model(inp, out, name="mlp"), (512,), 10


def _transformer(keras: Any) -> tuple[Any, tuple[int, ...], int]:
    inp = keras.Input((64, 128), name="tokens")
    att = keras.layers.MultiHeadAttention(4, 32, name="attention")(inp, inp)
    x = keras.layers.LayerNormalization(name="norm1")(inp + att)
    ffn = keras.layers.Dense(512, activation="relu", name="ffn_in")(x)
    ffn = keras.layers.Dense(128, name="ffn_out")(ffn)
    x = keras.layers.LayerNormalization(name="norm2")(x + ffn)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    out = keras.layers.Dense(10, name="logits")(x)
    return keras.Model(inp, out, name="block"), (64, 128), 10


def _bn_dropout(keras: Any) -> tuple[Any, tuple[int, ...], int]:
    inp = keras.Input((32, 32, 8), name="image")
    x = keras.layers.Conv2D(32, 3, padding="same", name="conv")(inp)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.Activation("relu", name="relu")(x)
    x = keras.layers.Dropout(0.3, name="drop")(x)
    x = keras.layers.Flatten(name="flat")(x)
    x = keras.layers.Dense(64, activation="relu", name="hidden")(x)
    x = keras.layers.Dropout(0.3, name="drop2")(x)
    out = keras.layers.Dense(10, name="logits")(x)
    return keras.Model(inp, out, name="bnnet"), (32, 32, 8), 10


def _deep_cnn(keras: Any) -> tuple[Any, tuple[int, ...], int]:
    inp = keras.Input((24, 24, 16), name="image")
    x = inp
    for i in range(3):
        x = keras.layers.Conv2D(48, 3, padding="same", activation="relu", name=f"c{i}")(x)
        x = keras.layers.LayerNormalization(name=f"n{i}")(x)
    x = keras.layers.AveragePooling2D(2, name="pool")(x)
    x = keras.layers.Flatten(name="flat")(x)
    x = keras.layers.Dense(256, activation="relu", name="hidden")(x)
    x = keras.layers.Dropout(0.2, name="drop")(x)
    out = keras.layers.Dense(7, name="logits")(x)
    return keras.Model(inp, out, name="deep"), (24, 24, 16), 7


def _gru(keras: Any) -> tuple[Any, tuple[int, ...], int]:
    inp = keras.Input((40, 64), name="seq")
    x = keras.layers.GRU(128, return_sequences=True, name="gru")(inp)
    x = keras.layers.Conv1D(128, 3, padding="same", activation="relu", name="conv")(x)
    x = keras.layers.GlobalMaxPooling1D(name="pool")(x)
    out = keras.layers.Dense(5, name="logits")(x)
    return keras.Model(inp, out, name="gru"), (40, 64), 5


BUILDERS: dict[str, Callable[[Any], tuple[Any, tuple[int, ...], int]]] = {
    "cnn_eager": _cnn,
    "mlp_xla": _mlp,
    "transformer": _transformer,
    "bn_dropout": _bn_dropout,
    "deep_cnn": _deep_cnn,
    "gru": _gru,
}


def capture(model_name: str, batch: int, logdir: str) -> None:
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    from traceparse.capture import profile

    keras = tf.keras
    keras.utils.set_random_seed(0)
    model, shape, classes = BUILDERS[model_name](keras)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=model_name in COMPILED,
    )
    rng = np.random.default_rng(0)
    xs = rng.random((batch, *shape), dtype=np.float32)
    ys = rng.integers(0, classes, batch)
    model.train_on_batch(xs, ys)  # build and trace outside the capture
    with profile(logdir, python_tracer_level=0) as cap:
        for step in range(STEPS):
            with cap.step(step):
                model.train_on_batch(xs, ys)


if __name__ == "__main__":
    capture(sys.argv[1], int(sys.argv[2]), sys.argv[3])
