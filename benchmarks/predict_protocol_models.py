"""The held-out CPU models of ``benchmarks/predict_protocol.py`` (its test set).

None of these models was used to tune ``Profile.predict``, and none may be:
they are the protocol's test set, run only to report. Each capture runs in a
process of its own (fresh allocator counters and addresses), the way a user's
own job is profiled: one ``model.fit`` epoch builds and traces the step
outside the capture, then one more epoch of the same data runs between
``tf.profiler.experimental.start`` and ``stop`` (no traceparse step markers,
no recorded batch size: the batch must be read off the shapes).

``THREADS`` ``one``: ``tf.config.threading.set_inter_op_parallelism_threads(1)``
before any op runs, so the executor runs one op at a time, in the fixed order a
GPU's single compute stream imposes (``tensorflow/core/common_runtime``'s
inter-op thread pool then has one thread); ``default``: TensorFlow's own
choice (one inter-op thread per core).

    python benchmarks/predict_protocol_models.py MODEL BATCH THREADS OUTDIR
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

# The captured batch B of each model; the protocol also captures 4B.
MODELS: dict[str, int] = {"functional_cnn": 16, "embed_lstm": 48, "mlp_jit": 64}
COMPILED = {"mlp_jit"}
THREADS = ("one", "default")
# Full batches per epoch: the same number of steps at every batch size.
STEPS = 3


Data = Callable[[Any, int], tuple[Any, Any]]


def _random_examples(seed: int, shape: tuple[int, ...], classes: int) -> Data:
    """``data(np, n)``: n uniform float32 examples of ``shape`` and their labels."""

    def data(np: Any, n: int) -> tuple[Any, Any]:
        rng = np.random.default_rng(seed)
        return rng.random((n, *shape), dtype=np.float32), rng.integers(0, classes, n)

    return data


def _random_tokens(seed: int, vocabulary: int, length: int, classes: int) -> Data:
    """``data(np, n)``: n int32 token sequences of ``length`` and their labels."""

    def data(np: Any, n: int) -> tuple[Any, Any]:
        rng = np.random.default_rng(seed)
        return rng.integers(0, vocabulary, (n, length)).astype("int32"), rng.integers(0, classes, n)

    return data


def _functional_cnn(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    inp = keras.Input((40, 40, 3), name="image")
    x = keras.layers.Conv2D(24, 3, padding="same", activation="relu", name="stem")(inp)
    a = keras.layers.Conv2D(24, 1, activation="relu", name="branch_a")(x)
    b = keras.layers.Conv2D(24, 3, padding="same", activation="relu", name="branch_b")(x)
    x = keras.layers.Concatenate(name="merge")([a, b])
    x = keras.layers.MaxPooling2D(2, name="pool")(x)
    x = keras.layers.Conv2D(48, 3, strides=2, activation="relu", name="reduce")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    out = keras.layers.Dense(6, name="logits")(x)

    data = _random_examples(1, (40, 40, 3), 6)

    return keras.Model(inp, out, name="branchy"), data


def _embed_lstm(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    model = keras.Sequential(
        [
            keras.Input((50,), dtype="int32", name="tokens"),
            keras.layers.Embedding(6000, 64, name="embed"),
            keras.layers.LSTM(512, name="lstm"),
            keras.layers.Dense(3, name="logits"),
        ],
        name="reader",
    )

    data = _random_tokens(2, 6000, 50, 3)

    return model, data


def _mlp_jit(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    inp = keras.Input((256,), name="features")
    x = keras.layers.Dense(1024, activation="gelu", name="up")(inp)
    x = keras.layers.Dense(1024, activation="relu", name="mid")(x)
    x = keras.layers.Dense(256, activation="relu", name="down")(x)
    out = keras.layers.Dense(20, name="logits")(x)

    data = _random_examples(3, (256,), 20)

    return keras.Model(inp, out, name="jitted"), data


def _stacked_gru(
    keras: Any,
    steps: int,
    features: int,
    units: tuple[int, int],
    classes: int,
    seed: int,
    name: str,
) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    """Two stacked GRUs (the first returning its sequences) and a Dense head, on
    random [steps, features] sequences."""
    model = keras.Sequential(
        [
            keras.Input((steps, features), name="frames"),
            keras.layers.GRU(units[0], return_sequences=True, name="gru_a"),
            keras.layers.GRU(units[1], name="gru_b"),
            keras.layers.Dense(classes, name="logits"),
        ],
        name=name,
    )

    data = _random_examples(seed, (steps, features), classes)

    return model, data


def _dev_gru(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development scenario (issue 47, loops): two stacked GRUs on random sequences,
    # for work on how a recurrent loop's peak varies run to run. Not in the test set.
    return _stacked_gru(keras, 40, 32, (256, 256), 4, seed=4, name="stacked")


def _time_major_gru(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # The fixture ``fixtures/predict_gru_32`` (fixtures/make_predict_fixtures.py): two
    # stacked GRUs whose only tensors past oneDNN's 256 KiB pool are the loops'
    # time-major stacks [T, B, units], so the batch is read off their second
    # dimension. Not in the protocol.
    return _stacked_gru(keras, 16, 24, (256, 128), 3, seed=7, name="time_major")


def _dev_cnn(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development scenario (issue 47, convolutions): a Sequential CNN with batch
    # normalisation and dropout, for work on how a CNN's peak scales on CPU. Not in
    # the test set.
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((36, 36, 3), name="picture"),
            layers.Conv2D(32, 3, padding="same", use_bias=False, name="conv_a"),
            layers.BatchNormalization(name="norm_a"),
            layers.ReLU(name="relu_a"),
            layers.MaxPooling2D(2, name="pool_a"),
            layers.Conv2D(64, 3, padding="same", activation="relu", name="conv_b"),
            layers.MaxPooling2D(2, name="pool_b"),
            layers.Dropout(0.25, name="drop"),
            layers.Flatten(name="flat"),
            layers.Dense(64, activation="relu", name="hidden"),
            layers.Dense(5, name="logits"),
        ],
        name="plain",
    )

    data = _random_examples(5, (36, 36, 3), 5)

    return model, data


def _dev_resnet(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development scenario (issue 47, convolutions): two residual blocks (Add joins a
    # block's input to its output, so both stay live), for work on CNN scaling on CPU.
    # Not in the test set.
    layers = keras.layers
    inp = keras.Input((32, 32, 3), name="picture")
    x = layers.Conv2D(16, 3, padding="same", activation="relu", name="stem")(inp)
    for i in range(2):
        y = layers.Conv2D(16, 3, padding="same", activation="relu", name=f"block{i}_a")(x)
        y = layers.Conv2D(16, 3, padding="same", name=f"block{i}_b")(y)
        x = layers.ReLU(name=f"block{i}_out")(layers.Add(name=f"block{i}_add")([x, y]))
    x = layers.AveragePooling2D(4, name="pool")(x)
    x = layers.Flatten(name="flat")(x)
    out = layers.Dense(7, name="logits")(x)

    data = _random_examples(6, (32, 32, 3), 7)

    return keras.Model(inp, out, name="residual"), data


# The late families (fixed 2026-12-07, fifth session, before that session changed
# any rule): layer families none of the sets above has. The first two are a
# development set of their own (rules may be tuned on them), the last three a test
# set (reported only). All fit the same data at every batch size, as a user's sweep.
def _attention_text(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development (late): token embeddings, one self-attention block with a residual
    # and layer normalisation, pooled: the [B, heads, T, T] scores and the folded
    # [B x T, d] projections.
    layers = keras.layers
    inp = keras.Input((64,), dtype="int32", name="tokens")
    x = layers.Embedding(4000, 128, name="embed")(inp)
    y = layers.MultiHeadAttention(num_heads=4, key_dim=32, name="attend")(x, x)
    x = layers.LayerNormalization(name="norm")(layers.Add(name="residual")([x, y]))
    x = layers.GlobalAveragePooling1D(name="pool")(x)
    out = layers.Dense(4, name="logits")(x)

    data = _random_tokens(8, 4000, 64, 4)

    return keras.Model(inp, out, name="attention"), data


def _separable_cnn(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development (late): a strided stem, a separable and a depthwise convolution
    # with batch normalisation, pooled globally.
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((48, 48, 3), name="picture"),
            layers.Conv2D(32, 3, strides=2, padding="same", use_bias=False, name="stem"),
            layers.BatchNormalization(name="stem_norm"),
            layers.ReLU(name="stem_relu"),
            layers.SeparableConv2D(64, 3, padding="same", use_bias=False, name="sep"),
            layers.BatchNormalization(name="sep_norm"),
            layers.ReLU(name="sep_relu"),
            layers.DepthwiseConv2D(3, padding="same", name="depthwise"),
            layers.Conv2D(128, 1, activation="relu", name="pointwise"),
            layers.GlobalAveragePooling2D(name="pool"),
            layers.Dense(10, name="logits"),
        ],
        name="separable",
    )

    data = _random_examples(9, (48, 48, 3), 10)

    return model, data


def _conv1d_signal(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Test (late): 1-D convolutions over a long two-channel signal.
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((2048, 2), name="signal"),
            layers.Conv1D(32, 9, padding="same", activation="relu", name="conv_a"),
            layers.MaxPooling1D(4, name="pool_a"),
            layers.Conv1D(64, 9, padding="same", activation="relu", name="conv_b"),
            layers.GlobalMaxPooling1D(name="pool_b"),
            layers.Dense(5, name="logits"),
        ],
        name="signal",
    )

    data = _random_examples(10, (2048, 2), 5)

    return model, data


def _wide_mlp(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Test (late): a wide MLP with batch normalisation and dropout, not compiled.
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((784,), name="pixels"),
            layers.Dense(1024, name="wide_a"),
            layers.BatchNormalization(name="norm_a"),
            layers.ReLU(name="relu_a"),
            layers.Dropout(0.3, name="drop_a"),
            layers.Dense(512, activation="relu", name="wide_b"),
            layers.Dropout(0.3, name="drop_b"),
            layers.Dense(10, name="logits"),
        ],
        name="wide",
    )

    data = _random_examples(11, (784,), 10)

    return model, data


def _bidir_lstm(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Test (late): a bidirectional LSTM over embedded tokens.
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((50,), dtype="int32", name="tokens"),
            layers.Embedding(3000, 64, name="embed"),
            layers.Bidirectional(layers.LSTM(96), name="bidir"),
            layers.Dense(3, name="logits"),
        ],
        name="bidir",
    )

    data = _random_tokens(12, 3000, 50, 3)

    return model, data


# A development family of the sixth session (fixed 2026-12-07 before that session
# changed any prediction rule): the batch reading of a bidirectional recurrent
# layer, whose forward and backward loops run time-major over sequences that
# oneDNN's pool hides at small batches.
def _bidir_gru(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development (late): embedded tokens through a bidirectional GRU returning
    # sequences, max-pooled over time.
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((40,), dtype="int32", name="words"),
            layers.Embedding(2000, 48, name="vectors"),
            layers.Bidirectional(layers.GRU(80, return_sequences=True), name="both_ways"),
            layers.GlobalMaxPooling1D(name="over_time"),
            layers.Dense(6, name="logits"),
        ],
        name="bidir_gru",
    )

    data = _random_tokens(13, 2000, 40, 6)

    return model, data


# Families of the seventh session (fixed 2026-12-07 before that session measured
# any of them or changed any prediction rule): layers the sets above lack, a
# decoder's upsampling and transposed convolutions, per-pixel labels, and an
# embedding averaged over its tokens.
def _unet(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development (late): a small U-Net segmenting 48x48 images into 3 classes per
    # pixel: two pooled encoder stages, upsampled back, each concatenated with its
    # skip connection.
    layers = keras.layers
    inp = keras.Input((48, 48, 3), name="scan")
    e1 = layers.Conv2D(16, 3, padding="same", activation="relu", name="enc_a")(inp)
    e2 = layers.Conv2D(32, 3, padding="same", activation="relu", name="enc_b")(
        layers.MaxPooling2D(2, name="down_a")(e1)
    )
    mid = layers.Conv2D(64, 3, padding="same", activation="relu", name="middle")(
        layers.MaxPooling2D(2, name="down_b")(e2)
    )
    d2 = layers.Concatenate(name="skip_b")([layers.UpSampling2D(2, name="up_b")(mid), e2])
    d2 = layers.Conv2D(32, 3, padding="same", activation="relu", name="dec_b")(d2)
    d1 = layers.Concatenate(name="skip_a")([layers.UpSampling2D(2, name="up_a")(d2), e1])
    d1 = layers.Conv2D(16, 3, padding="same", activation="relu", name="dec_a")(d1)
    out = layers.Conv2D(3, 1, name="classes")(d1)

    def data(np: Any, n: int) -> tuple[Any, Any]:
        rng = np.random.default_rng(14)
        return rng.random((n, 48, 48, 3), dtype=np.float32), rng.integers(0, 3, (n, 48, 48))

    return keras.Model(inp, out, name="unet"), data


def _conv_autoencoder(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Test (late): a convolutional autoencoder, strided convolutions down and
    # transposed convolutions up, trained to reproduce its input (mean squared
    # error: the labels are the images).
    layers = keras.layers
    strided = {"strides": 2, "padding": "same", "activation": "relu"}
    model = keras.Sequential(
        [
            keras.Input((56, 56, 1), name="digit"),
            layers.Conv2D(32, 3, **strided, name="down_a"),
            layers.Conv2D(64, 3, **strided, name="down_b"),
            layers.Conv2DTranspose(64, 3, **strided, name="up_b"),
            layers.Conv2DTranspose(32, 3, **strided, name="up_a"),
            layers.Conv2D(1, 3, padding="same", name="pixels"),
        ],
        name="autoencoder",
    )

    def data(np: Any, n: int) -> tuple[Any, Any]:
        images = np.random.default_rng(15).random((n, 56, 56, 1), dtype=np.float32)
        return images, images

    return model, data


def _text_average(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Test (late): a bag-of-embeddings text classifier, the embedding averaged over
    # 200 tokens, then two dense layers.
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((200,), dtype="int32", name="review"),
            layers.Embedding(20000, 64, name="words"),
            layers.GlobalAveragePooling1D(name="average"),
            layers.Dense(64, activation="relu", name="hidden"),
            layers.Dense(2, name="logits"),
        ],
        name="text_average",
    )

    data = _random_tokens(16, 20000, 200, 2)

    return model, data


# Families of the ninth session (fixed 2026-12-08 before that session captured or
# measured any of them, with no prediction rule changed since): the architectures
# users bring most that the sets above lack, as Keras ships or writes them.
def _mobilenet_v2(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development (late): Keras' own MobileNetV2 (width 0.35, untrained) on 32x32
    # images: inverted residual blocks of depthwise convolutions, batch
    # normalisation and ReLU6, residual additions.
    model = keras.applications.MobileNetV2(
        input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10, classifier_activation=None
    )
    return model, _random_examples(17, (32, 32, 3), 10)


def _vit_tiny(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Development (late): a small vision transformer: 4x4 patches of 32x32 images
    # embedded by a strided convolution (64 tokens of 64), a learned position
    # embedding, two pre-norm blocks of 4-head self-attention and a GELU MLP with
    # residual additions, mean-pooled tokens, a dense head.
    layers = keras.layers

    class Positions(layers.Layer):
        """A learned embedding of each token's position, added to it."""

        def build(self, shape: Any) -> None:
            self.table = self.add_weight(shape=shape[1:], initializer="random_normal")

        def call(self, tokens: Any) -> Any:
            return tokens + self.table

    inp = keras.Input((32, 32, 3), name="image")
    x = layers.Conv2D(64, 4, strides=4, name="patches")(inp)
    x = Positions(name="positions")(layers.Reshape((64, 64), name="tokens")(x))
    for i in range(2):
        y = layers.LayerNormalization(name=f"norm_a{i}")(x)
        y = layers.MultiHeadAttention(4, 16, name=f"attend{i}")(y, y)
        x = layers.Add(name=f"residual_a{i}")([x, y])
        y = layers.LayerNormalization(name=f"norm_b{i}")(x)
        y = layers.Dense(128, activation="gelu", name=f"mlp_a{i}")(y)
        y = layers.Dense(64, name=f"mlp_b{i}")(y)
        x = layers.Add(name=f"residual_b{i}")([x, y])
    x = layers.GlobalAveragePooling1D(name="pool")(layers.LayerNormalization(name="norm")(x))
    return keras.Model(inp, layers.Dense(10, name="logits")(x), name="vit_tiny"), (
        _random_examples(18, (32, 32, 3), 10)
    )


def _efficientnet_b0(keras: Any) -> tuple[Any, Callable[[Any, int], tuple[Any, Any]]]:
    # Test (late): Keras' own EfficientNetB0 (untrained) on 32x32 images: its
    # rescaling and normalisation layers, depthwise convolutions, squeeze-and-
    # excitation, swish, dropout.
    model = keras.applications.EfficientNetB0(
        input_shape=(32, 32, 3), weights=None, classes=10, classifier_activation=None
    )
    return model, _random_examples(19, (32, 32, 3), 10)


# The loss each model is fitted with where it is not sparse categorical
# cross-entropy on logits.
LOSSES: dict[str, str] = {"conv_autoencoder": "mse"}


BUILDERS = {
    "functional_cnn": _functional_cnn,
    "embed_lstm": _embed_lstm,
    "mlp_jit": _mlp_jit,
    "dev_gru": _dev_gru,
    "dev_cnn": _dev_cnn,
    "dev_resnet": _dev_resnet,
    "time_major_gru": _time_major_gru,
    "attention_text": _attention_text,
    "separable_cnn": _separable_cnn,
    "conv1d_signal": _conv1d_signal,
    "wide_mlp": _wide_mlp,
    "bidir_lstm": _bidir_lstm,
    "bidir_gru": _bidir_gru,
    "unet": _unet,
    "conv_autoencoder": _conv_autoencoder,
    "text_average": _text_average,
    "mobilenet_v2": _mobilenet_v2,
    "vit_tiny": _vit_tiny,
    "efficientnet_b0": _efficientnet_b0,
}
# The late families (above): model -> (B, 4B), each on the data of 4B x STEPS.
LATE_DEV_MODELS: dict[str, tuple[int, int]] = {
    "attention_text": (32, 128),
    "separable_cnn": (16, 64),
    "bidir_gru": (32, 128),  # sixth session
    "unet": (16, 64),  # seventh session
    "mobilenet_v2": (16, 64),  # ninth session
    "vit_tiny": (16, 64),  # ninth session
}
LATE_TEST_MODELS: dict[str, tuple[int, int]] = {
    "conv1d_signal": (16, 64),
    "wide_mlp": (64, 256),
    "bidir_lstm": (32, 128),
    "conv_autoencoder": (16, 64),  # seventh session
    "text_average": (64, 256),  # seventh session
    "efficientnet_b0": (16, 64),  # ninth session
}
# The same model on the same data at every batch size, as a user's sweep runs:
# name -> (model, examples). The others fit STEPS batches, so their data (the
# one tensor Keras' array adapter makes of the arrays given to fit) grows with
# the batch, which a user's does not.
SAME_DATA: dict[str, tuple[str, int]] = {
    "dev_cnn_same_data": ("dev_cnn", 192),
    "dev_resnet_same_data": ("dev_resnet", 192),
    "dev_cnn_mirrored_same_data": ("dev_cnn", 192),
    # The test set's models on the data of their 4B runs at B too (added after the
    # first report of the test set; held out like it: no rule is tuned on them).
    **{f"{m}_same_data": (m, STEPS * 4 * b) for m, b in MODELS.items()},
    **{m: (m, STEPS * c) for m, (_, c) in {**LATE_DEV_MODELS, **LATE_TEST_MODELS}.items()},
}
# Fitted on a batched ``tf.data`` dataset under ``tf.distribute.MirroredStrategy``
# (one replica, the CPU) instead of on arrays: name -> model.
MIRRORED: dict[str, str] = {
    "dev_cnn_mirrored": "dev_cnn",
    "dev_cnn_mirrored_same_data": "dev_cnn",
}
# Development scenarios (rules may be tuned on them; not part of the protocol's
# test set): model -> its batch sizes (B, 4B).
DEV_MODELS: dict[str, tuple[int, int]] = {
    "dev_gru": (32, 128),
    "dev_cnn": (16, 64),
    "dev_resnet": (16, 64),
    "dev_cnn_same_data": (16, 64),
    "dev_resnet_same_data": (16, 64),
    "dev_cnn_mirrored": (16, 64),
    "dev_cnn_mirrored_same_data": (16, 64),
}


def capture(name: str, batch: int, threads: str, logdir: str) -> None:
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    if threads == "one":
        tf.config.threading.set_inter_op_parallelism_threads(1)
    elif threads != "default":
        raise SystemExit(f"THREADS must be one of {THREADS}, got {threads!r}")
    keras = tf.keras
    keras.utils.set_random_seed(0)
    base, examples = SAME_DATA.get(name, (MIRRORED.get(name, name), STEPS * batch))
    strategy = tf.distribute.MirroredStrategy() if name in MIRRORED else None
    with strategy.scope() if strategy else contextlib.nullcontext():
        model, data = BUILDERS[base](keras)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3),
            loss=LOSSES.get(base) or keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=base in COMPILED,
        )
    xs, ys = data(np, examples)
    if strategy:
        dataset = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(batch)
        fit = {"x": dataset}
    else:
        fit = {"x": xs, "y": ys, "batch_size": batch}
    model.fit(**fit, epochs=1, verbose=0)  # build and trace
    tf.profiler.experimental.start(logdir)
    model.fit(**fit, epochs=1, verbose=0)
    tf.profiler.experimental.stop()


if __name__ == "__main__":
    capture(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
