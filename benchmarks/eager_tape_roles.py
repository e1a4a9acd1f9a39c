"""Issue 48's check on a model not in the fixtures: an eager ``GradientTape`` loop
(conv blocks, a large Dense, Adam) captured with ``traceparse.profile()``, and the
share of the bytes at the peak made in the capture whose role is other or unknown.

    python benchmarks/eager_tape_roles.py [--tf-function] [OUT]

``--tf-function`` wraps the step in ``tf.function`` (a custom graph loop).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def capture(out: Path, graph: bool) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from traceparse.capture import enable_onednn

    enable_onednn()
    import numpy as np
    import tensorflow as tf

    import traceparse

    keras = tf.keras
    keras.utils.set_random_seed(1)
    images = tf.constant(np.random.default_rng(1).random((32, 48, 48, 3), dtype=np.float32))
    labels = tf.constant(np.random.default_rng(2).integers(0, 10, 32))
    with traceparse.profile(out) as cap:
        model = keras.Sequential(
            [
                keras.Input((48, 48, 3)),
                keras.layers.Conv2D(48, 3, padding="same", activation="relu", name="block1"),
                keras.layers.Conv2D(48, 3, padding="same", activation="relu", name="block2"),
                keras.layers.MaxPooling2D(2, name="down"),
                keras.layers.Flatten(name="flat"),
                keras.layers.Dense(384, activation="relu", name="big"),
                keras.layers.Dense(10, name="out"),
            ],
            name="held_out",
        )
        optimizer = keras.optimizers.Adam(1e-3)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        def step() -> None:
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))

        run = tf.function(step) if graph else step
        for n in range(3):
            with cap.step(n):
                run()


def report(path: Path) -> None:
    import traceparse
    from traceparse.analysis.breakdown import in_capture

    prof = traceparse.load(path)
    made = in_capture(prof.breakdown)
    by_role = made.groupby(made["role"].astype(str))["bytes"].sum()
    total = int(made["bytes"].sum())
    unplaced = int(by_role.get("other", 0) + by_role.get("unknown", 0))
    for role, size in by_role.sort_values(ascending=False).items():
        print(f"{role:18} {size / 2**20:8.1f} MiB")
    print(f"other or unknown: {100 * unplaced / total:.1f}% of {total / 2**20:.1f} MiB")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    graph = "--tf-function" in sys.argv
    out = Path(args[0]) if args else Path("eager_tape_capture")
    if not out.exists():
        capture(out, graph)
    report(out)
