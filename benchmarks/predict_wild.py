"""Models captured the ways users capture them, for ``bench_predict.py --wild``.

``predict_models.py`` captures every model the same way (``train_on_batch``
inside ``traceparse.profile()``). These scenarios are what a user brings
instead: ``model.fit`` over a dataset whose last batch is partial, profiled
with ``tf.profiler.experimental`` or Keras' TensorBoard callback; a custom
``tf.function`` loop; a compiled CNN; Keras 3's default ``compile()`` (an
embedding and a GRU, an attention block fitted with validation data); and a
CNN under the ``mixed_float16`` policy, whose loss-scaling optimizer updates the
weights inside a ``cond`` (only when the gradients are finite). None was used to tune
the prediction.

    python benchmarks/predict_wild.py SCENARIO BATCH OUTDIR [EXAMPLES]

EXAMPLES: the size of the data (default ``22 * WILD[SCENARIO] + 3``, whose last
batch is partial at B, 2B and 4B); the same at every batch size, as a user's is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

# The captured batch B of each scenario; the benchmark also captures 2B and 4B.
WILD: dict[str, int] = {
    "lstm_fit": 16,
    "resnet_callback": 8,
    "depthwise_loop": 16,
    "cnn_fit_xla": 16,
    "gru_default": 32,
    "attention_default": 8,
    "cnn_mixed": 16,
}
# Compiled with XLA: asked for, or Keras 3's default (jit_compile="auto").
WILD_COMPILED = {"cnn_fit_xla", "gru_default", "attention_default"}
DEFAULT_COMPILE = {"gru_default", "attention_default"}


def _lstm(keras: Any) -> Any:
    return keras.Sequential(
        [
            keras.Input((80,), dtype="int32"),
            keras.layers.Embedding(4000, 64),
            keras.layers.LSTM(96),
            keras.layers.Dense(4),
        ]
    )


def _resnet(keras: Any) -> Any:
    inp = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(32, 3, padding="same")(inp)
    for _ in range(2):
        y = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
        y = keras.layers.BatchNormalization()(y)
        y = keras.layers.Conv2D(32, 3, padding="same")(y)
        x = keras.layers.Activation("relu")(keras.layers.Add()([x, y]))
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, keras.layers.Dense(10)(x))


def _depthwise(keras: Any) -> Any:
    inp = keras.Input((48, 48, 8))
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(inp)
    x = keras.layers.Conv2D(48, 1, activation="relu")(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.SeparableConv2D(64, 3, padding="same", activation="relu")(x)
    x = keras.layers.Flatten()(x)
    return keras.Model(inp, keras.layers.Dense(6)(x))


def _cnn(keras: Any) -> Any:
    return keras.Sequential(
        [
            keras.Input((28, 28, 4)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    )


def _gru(keras: Any) -> Any:
    return keras.Sequential(
        [
            keras.Input((100,), dtype="int32"),
            keras.layers.Embedding(20000, 128),
            keras.layers.GRU(256, return_sequences=True),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(4),
        ]
    )


def _attention(keras: Any) -> Any:
    inp = keras.Input((128, 256))
    att = keras.layers.MultiHeadAttention(8, 32)(inp, inp)
    x = keras.layers.LayerNormalization()(inp + att)
    ffn = keras.layers.Dense(1024, activation="gelu")(x)
    x = keras.layers.LayerNormalization()(x + keras.layers.Dense(256)(ffn))
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(inp, keras.layers.Dense(10)(x))


def _cnn_mixed(keras: Any) -> Any:
    keras.mixed_precision.set_global_policy("mixed_float16")
    return keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10, dtype="float32"),  # logits in float32, as Keras advises
        ]
    )


def _data(np: Any, name: str, n: int) -> tuple[Any, Any, int]:
    rng = np.random.default_rng(0)
    if name == "lstm_fit":
        return rng.integers(0, 4000, (n, 80)).astype("int32"), rng.integers(0, 4, n), 4
    if name == "gru_default":
        return rng.integers(0, 20000, (n, 100)).astype("int32"), rng.integers(0, 4, n), 4
    if name == "attention_default":
        return rng.random((n, 128, 256), dtype=np.float32), rng.integers(0, 10, n), 10
    shapes = {
        "resnet_callback": (32, 32, 3),
        "depthwise_loop": (48, 48, 8),
        "cnn_mixed": (32, 32, 3),
    }
    shape = shapes.get(name, (28, 28, 4))
    classes = {"resnet_callback": 10, "depthwise_loop": 6}.get(name, 10)
    return rng.random((n, *shape), dtype=np.float32), rng.integers(0, classes, n), classes


BUILDERS: dict[str, Callable[[Any], Any]] = {
    "lstm_fit": _lstm,
    "resnet_callback": _resnet,
    "depthwise_loop": _depthwise,
    "cnn_fit_xla": _cnn,
    "gru_default": _gru,
    "attention_default": _attention,
    "cnn_mixed": _cnn_mixed,
}


def capture(name: str, batch: int, logdir: str, examples: int | None = None) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    keras = tf.keras
    keras.utils.set_random_seed(0)
    model = BUILDERS[name](keras)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    n = examples or 22 * WILD[name] + 3
    xs, ys, _ = _data(np, name, n)
    if name == "depthwise_loop":
        opt = keras.optimizers.RMSprop(1e-3)

        @tf.function
        def train_step(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                value = loss(y, model(x, training=True))
            opt.apply_gradients(
                zip(
                    tape.gradient(value, model.trainable_variables),
                    model.trainable_variables,
                    strict=True,
                )
            )
            return value

        data = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(batch)
        for x, y in data.take(1):
            train_step(x, y)
        tf.profiler.experimental.start(logdir)
        for x, y in data:
            train_step(x, y)
        tf.profiler.experimental.stop()
        return
    opt = (
        keras.optimizers.SGD(0.01, momentum=0.9)
        if name == "resnet_callback"
        else keras.optimizers.Adam(1e-3)
    )
    if name in DEFAULT_COMPILE:
        model.compile(optimizer=opt, loss=loss)
    else:
        model.compile(optimizer=opt, loss=loss, jit_compile=name in WILD_COMPILED)
    if name == "attention_default":
        split = n * 4 // 5
        fit = {"x": xs[:split], "y": ys[:split], "validation_data": (xs[split:], ys[split:])}
        model.fit(**fit, batch_size=batch, epochs=1, verbose=0)  # build and trace
        tf.profiler.experimental.start(logdir)
        model.fit(**fit, batch_size=batch, epochs=1, verbose=0)
        tf.profiler.experimental.stop()
        return
    if name == "resnet_callback":
        data = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(batch)
        board = keras.callbacks.TensorBoard(logdir, profile_batch=(2, 4))
        model.fit(data, epochs=1, callbacks=[board], verbose=0)
        return
    model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0)  # build and trace
    tf.profiler.experimental.start(logdir)
    model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0)
    tf.profiler.experimental.stop()


if __name__ == "__main__":
    capture(sys.argv[1], int(sys.argv[2]), sys.argv[3], *map(int, sys.argv[4:5]))
