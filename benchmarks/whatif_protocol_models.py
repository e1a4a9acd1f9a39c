"""The Keras models of ``benchmarks/whatif_protocol.py`` (issue 50), one capture each.

Five small models, split BEFORE any what-if rule was written or tuned:

- development set (rules may be tuned on it): ``cnn`` (Conv2D/pooling/Dense),
  ``mlp_jit`` (Dense stack compiled with ``jit_compile=True``);
- test set (held out, run only to report): ``gru`` (Embedding + GRU),
  ``transformer`` (one attention block with a feed-forward part),
  ``normdrop`` (Dense + BatchNormalization + LayerNormalization + Dropout).

Each model is captured with Adam in float32 (``base``) and again with one
change: ``sgd`` (plain SGD), ``momentum`` (SGD with momentum 0.9),
``adafactor``, ``bf16`` (``mixed_bfloat16`` policy, the head ``dtype="float32"``
as Keras' guide advises), ``remat`` (every layer's call under
``keras.remat``, which on the TensorFlow backend is ``tf.recompute_grad``:
keras/src/backend/tensorflow/core.py; ``keras.RematScope(mode="full")`` does
the same but passes ``training=`` as a keyword, which ``tf.custom_gradient``
refuses in graph mode, so the wrapper ``_Remat`` calls the layer positionally).
One process per capture, one op at a time (inter-op parallelism 1), one epoch
to build and trace outside the capture, then one more epoch of ``STEPS`` steps between
``tf.profiler.experimental.start`` and ``stop``.

    python benchmarks/whatif_protocol_models.py MODEL VARIANT BATCH OUTDIR
"""

from __future__ import annotations

import os
import sys
from typing import Any

DEV = ("cnn", "mlp_jit")
TEST = ("gru", "transformer", "normdrop")
# Added after the second run, before the rule change it checks (per-variable
# copy-on-write in ``optimizer_change``): a model no rule has seen.
LATE_TEST = ("conv1d",)
VARIANTS = ("base", "sgd", "momentum", "adafactor", "bf16", "remat")
BATCH = {"cnn": 32, "mlp_jit": 128, "gru": 32, "transformer": 32, "normdrop": 128, "conv1d": 64}
STEPS = 3
CLASSES = 10


def _remat_layer(keras: Any) -> Any:
    class _Remat(keras.layers.Layer):
        """``inner`` called under ``keras.remat`` (its activations recomputed in backward)."""

        def __init__(self, inner: Any) -> None:
            super().__init__(name=f"remat_{inner.name}")
            self.inner = inner

        def build(self, shape: Any) -> None:
            self.inner.build(shape)

        def call(self, x: Any) -> Any:
            return keras.remat(lambda t: self.inner(t))(x)

        def compute_output_shape(self, shape: Any) -> Any:
            return self.inner.compute_output_shape(shape)

    return _Remat


def _layers(keras: Any, name: str, remat: bool = False) -> tuple[Any, Any]:
    """(inputs, logits) of ``name``; the head is float32 (mixed precision's advice).
    ``remat``: every layer but the input's and the head's under ``keras.remat``."""
    raw = keras.layers
    wrapper = _remat_layer(keras) if remat else None

    class _Wrapped:
        def __getattr__(self, kind: str) -> Any:
            make = getattr(raw, kind)
            if wrapper is None or kind in ("Embedding", "MultiHeadAttention"):
                return make
            return lambda *a, **k: wrapper(make(*a, **k))

    L = _Wrapped()
    if name == "cnn":
        x = inp = keras.Input((32, 32, 3))
        for width in (32, 64):
            x = L.Conv2D(width, 3, padding="same", activation="relu")(x)
            x = L.Conv2D(width, 3, padding="same", activation="relu")(x)
            x = L.MaxPooling2D()(x)
        x = L.Flatten()(x)
        x = L.Dense(256, activation="relu")(x)
    elif name == "mlp_jit":
        x = inp = keras.Input((512,))
        for width in (1024, 1024, 512):
            x = L.Dense(width, activation="relu")(x)
    elif name == "gru":
        inp = keras.Input((64,), dtype="int32")
        x = L.Embedding(4000, 128)(inp)
        x = L.GRU(256)(x)
    elif name == "transformer":
        inp = keras.Input((64,), dtype="int32")
        x = L.Embedding(2000, 128)(inp)
        a = L.MultiHeadAttention(4, 32)(x, x)
        x = L.LayerNormalization()(x + a)
        f = L.Dense(512, activation="relu")(x)
        f = L.Dense(128)(f)
        x = L.LayerNormalization()(x + f)
        x = L.GlobalAveragePooling1D()(x)
    elif name == "normdrop":
        x = inp = keras.Input((256,))
        for width in (1024, 1024, 512):
            x = L.Dense(width)(x)
            x = L.BatchNormalization()(x)
            x = L.Activation("relu")(x)
            x = L.Dropout(0.3)(x)
        x = L.LayerNormalization()(x)
    elif name == "conv1d":
        x = inp = keras.Input((128, 16))
        x = L.Conv1D(128, 5, padding="same", activation="relu")(x)
        x = L.Conv1D(128, 5, padding="same", activation="relu")(x)
        x = L.MaxPooling1D(2)(x)
        x = L.Conv1D(256, 3, padding="same", activation="relu")(x)
        x = L.GlobalMaxPooling1D()(x)
        x = L.Dense(512, activation="relu")(x)
        x = L.Dense(512, activation="relu")(x)
    else:
        raise SystemExit(f"MODEL must be one of {DEV + TEST + LATE_TEST}, got {name!r}")
    return inp, raw.Dense(CLASSES, dtype="float32")(x)


def _data(np: Any, name: str, n: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    ys = rng.integers(0, CLASSES, n).astype("int32")
    if name == "cnn":
        return rng.random((n, 32, 32, 3), dtype=np.float32), ys
    if name == "mlp_jit":
        return rng.random((n, 512), dtype=np.float32), ys
    if name == "normdrop":
        return rng.random((n, 256), dtype=np.float32), ys
    if name == "conv1d":
        return rng.random((n, 128, 16), dtype=np.float32), ys
    vocab = 4000 if name == "gru" else 2000
    return rng.integers(0, vocab, (n, 64)).astype("int32"), ys


def _optimizer(keras: Any, variant: str) -> Any:
    o = keras.optimizers
    if variant == "sgd":
        return o.SGD(1e-2)
    if variant == "momentum":
        return o.SGD(1e-2, momentum=0.9)
    if variant == "adafactor":
        return o.Adafactor(1e-3)
    return o.Adam(1e-3)


def capture(name: str, variant: str, batch: int, logdir: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # oneDNN's CPU allocator (mklcpu) is the one that records memory events;
    # TensorFlow leaves it off on CPUs it does not tune for.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    import numpy as np
    import tensorflow as tf

    if variant not in VARIANTS:
        raise SystemExit(f"VARIANT must be one of {VARIANTS}, got {variant!r}")
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras = tf.keras
    keras.utils.set_random_seed(0)
    if variant == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    inp, out = _layers(keras, name, remat=variant == "remat")
    model = keras.Model(inp, out)
    model.compile(
        optimizer=_optimizer(keras, variant),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=name == "mlp_jit",
    )
    xs, ys = _data(np, name, STEPS * batch)
    model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0)  # build and trace
    tf.profiler.experimental.start(logdir)
    model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0)
    tf.profiler.experimental.stop()


if __name__ == "__main__":
    capture(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
