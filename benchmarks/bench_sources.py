"""Step time with and without recording source lines (issue 38, docs/sources.md).

Each case runs in a fresh process: a model trains a warm-up step, then
``--steps`` steps inside ``traceparse.profile(sources=...)``; the median step
time is reported, as the process's CPU time (all threads): the machines this
runs on are shared, and CPU time moves far less with their load than wall time. Cases:

- ``demo``: the ``traceparse demo`` CNN, ``train_on_batch`` (a compiled step);
- ``large``: a 24-layer Keras MLP (4 Mi parameters), ``train_on_batch``;
- ``large_eager``: the same model in an eager ``tf.GradientTape`` loop, where
  every op passes through the recorder's op callback (the worst case).

Runs with and without recording are interleaved; ``--repeat`` times each.

    python benchmarks/bench_sources.py [--steps 20] [--repeat 3] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_PROBE = r"""
import json, sys, time
from traceparse.capture import enable_onednn
enable_onednn()
import numpy as np
import tensorflow as tf
import traceparse
from traceparse.cli.demo import _build

case, sources, steps, logdir = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]
keras = tf.keras
if case == "demo":
    model, x, y = _build(tf)
else:
    keras.utils.set_random_seed(0)
    layers = [keras.layers.Dense(512, activation="relu") for _ in range(23)]
    model = keras.Sequential([keras.Input((512,)), *layers, keras.layers.Dense(10)])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="adam", loss=loss)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((256, 512), dtype=np.float32))
    y = tf.constant(rng.integers(0, 10, 256))
optimizer = keras.optimizers.Adam()
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

def eager_step():
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))

step = eager_step if case == "large_eager" else (lambda: model.train_on_batch(x, y))
step()
times = []
with traceparse.profile(logdir, sources=sources, inventory=False):
    for _ in range(steps):
        start = time.process_time()
        step()
        times.append(time.process_time() - start)
print(json.dumps(times))
"""

CASES = ("demo", "large", "large_eager")


def measure(case: str, sources: bool, steps: int) -> float:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    with tempfile.TemporaryDirectory() as logdir:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, case, "1" if sources else "0", str(steps), logdir],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
    times = json.loads(done.stdout.strip().splitlines()[-1])
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args()
    results: dict[tuple[str, bool], list[float]] = {}
    for _ in range(args.repeat):
        for case in args.cases.split(","):
            for sources in (False, True):
                results.setdefault((case, sources), []).append(measure(case, sources, args.steps))
    lines = [
        "| case | CPU per step without (ms) | with sources (ms) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for case in args.cases.split(","):
        off, on = min(results[(case, False)]), min(results[(case, True)])
        lines.append(f"| {case} | {off * 1e3:.1f} | {on * 1e3:.1f} | {on / off:.2f} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(
            "# Source lines: step time with and without recording\n\n"
            f"`python benchmarks/bench_sources.py --steps {args.steps} --repeat {args.repeat}`; "
            "the best of the repeats' median CPU time per step (all threads).\n\n" + table + "\n"
        )


if __name__ == "__main__":
    main()
