"""A small Keras training script, unchanged from how anyone would write it.

The README's tour captures it with ``traceparse run examples/train.py --epochs 1``:
traceparse profiles the whole run without a line of this file knowing. It trains
a small MLP on random data with ``model.fit``; the layers are wide enough
(tensors of 256 KiB and more) that TensorFlow's CPU allocator records them.
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--samples", type=int, default=1024)
    args = parser.parse_args()

    import tensorflow as tf  # imported here so that --help is instant

    keras = tf.keras
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features = rng.random((args.samples, 512), dtype=np.float32)
    labels = rng.integers(0, 10, args.samples)

    model = keras.Sequential(
        [
            keras.Input((512,), name="features"),
            keras.layers.Dense(1024, activation="relu", name="hidden"),
            keras.layers.Dense(10, name="logits"),
        ],
        name="mlp",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = model.fit(features, labels, epochs=args.epochs, batch_size=args.batch_size, verbose=0)
    print(f"trained {args.epochs} epoch(s); final loss {history.history['loss'][-1]:.3f}")


if __name__ == "__main__":
    main()
