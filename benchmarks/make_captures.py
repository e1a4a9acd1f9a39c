"""Make the benchmark captures: ResNet50 training on CPU for N steps.

Real captures of growing size for benchmarks/bench_decode.py: 3, 20, 55, 80
and 250 steps make about 1.8, 10, 29, 42 and 132 MB with TF 2.21 on CPU (55
steps is the ~28 MB capture the issue names). They are cached under
benchmarks/.captures/ (not committed) and reused when present.

    python benchmarks/make_captures.py [--steps 3 20 80] [--out benchmarks/.captures]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".captures"


def capture_path(steps: int, out: Path = CACHE) -> Path | None:
    """The cached capture of ``steps`` steps, if it exists."""
    found = sorted((out / f"resnet50_{steps}").rglob("*.xplane.pb"))
    return found[-1] if found else None


def make_capture(steps: int, out: Path = CACHE) -> Path:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    import traceparse

    model = tf.keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy())
    images = tf.random.normal((8, 64, 64, 3))
    labels = tf.random.uniform((8,), maxval=10, dtype=tf.int32)
    model.train_on_batch(images, labels)  # build and trace outside the capture
    logdir = out / f"resnet50_{steps}"
    with traceparse.profile(logdir) as cap:
        for step in range(steps):
            with cap.step(step):
                model.train_on_batch(images, labels)
    files = [f for f in cap.files if f.name.endswith(".xplane.pb")]
    return files[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[3, 20, 80])
    parser.add_argument("--out", type=Path, default=CACHE)
    args = parser.parse_args(argv)
    for steps in args.steps:
        path = capture_path(steps, args.out) or make_capture(steps, args.out)
        print(f"{steps:>3} steps: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
