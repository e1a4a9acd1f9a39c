"""``traceparse demo``: the whole job on a built-in example, on this machine."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from traceparse.cli.base import Command, count_type
from traceparse.output.terminal import Terminal

DEFAULT_OUTPUT = "traceparse-demo"
BATCH = 32
IMAGE = 64


class DemoCommand(Command):
    """Capture a small Keras model for a few steps, summarise it, write the reports.

    Trains a small convolutional network (64x64 images, batch 32) for a few
    steps under the profiler, on whatever device TensorFlow picks here, then
    prints the summary and writes report.html and report.md into --output. The
    training loop also keeps a copy of every batch in a Python list, a
    deliberate leak for the leak check to find. Every tensor that matters is
    256 KiB or more: on CPU, TensorFlow's mklcpu allocator only records those.
    Takes about ten seconds on two CPU cores, half of it importing TensorFlow.
    Needs TensorFlow. TensorFlow's own log lines go to DIR/tensorflow.log.
    """

    name = "demo"
    reads_captures = False  # TensorFlow trains a model in this process

    @classmethod
    def epilog(cls) -> str:
        return (
            "afterwards, explore the capture:\n"
            "  traceparse ops traceparse-demo/logs\n"
            "  traceparse steps traceparse-demo/logs\n"
            "  traceparse allocations traceparse-demo/logs --format csv -o allocations.csv"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--output",
            default=DEFAULT_OUTPUT,
            metavar="DIR",
            help=f"where the capture (DIR/logs) and reports go (default ./{DEFAULT_OUTPUT})",
        )
        parser.add_argument(
            "--steps",
            type=count_type,
            default=5,
            metavar="N",
            help="training steps to capture (default 5)",
        )

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.capture import profile
        from traceparse.cli._loading import load_each
        from traceparse.cli._summary_view import print_summaries
        from traceparse.cli.report import write
        from traceparse.errors import UsageError

        steps = max(1, args.steps)
        output = Path(args.output)
        if output.exists() and not output.is_dir():
            raise UsageError(f"{output}: exists and is not a directory; choose another --output")
        logdir = output / "logs"
        output.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        from traceparse.capture import enable_onednn

        enable_onednn()  # before TensorFlow is imported: CPU memory events need it
        from traceparse.capture.sources import treat_as_user

        treat_as_user(__file__)  # the summary names this file's lines (docs/sources.md)
        # TensorFlow's native logging ignores TF_CPP_MIN_LOG_LEVEL for some start-up
        # lines; keep them (and Keras warnings) in a file, not in the demo's output.
        log = output / "tensorflow.log"
        with _stderr_to_file(log) as real_stderr:
            live = Terminal(stream=term.stream, err=real_stderr, quiet=term.quiet, color=term.color)
            with live.progress("Importing TensorFlow"):
                tf = _tensorflow()
            with live.progress("Training under the profiler", total=steps) as bar:
                kept: list[Any] = []
                # The model is built inside the capture, so every byte it holds is
                # attributed to the op that made it.
                with profile(logdir) as cap:
                    model, images, labels = _build(tf)
                    for step in range(steps):
                        with cap.step(step):
                            model.train_on_batch(images, labels)
                            kept.append(_cache_batch(tf)(images))  # the planted leak
                        bar.advance()
        if cap.run_dir is None:  # pragma: no cover - TensorFlow wrote nothing
            raise UsageError(f"{logdir}: the profiler wrote no capture")
        profiles = load_each([str(cap.run_dir)], term)
        print_summaries(profiles, term)
        html = output / "report.html"
        markdown = output / "report.md"
        write(profiles, "html", str(html), term)
        write(profiles, "md", str(markdown), term)
        elapsed = time.monotonic() - started
        term.line()
        term.fields(
            [
                ("Capture", str(cap.run_dir)),
                ("HTML report", str(html)),
                ("Markdown report", str(markdown)),
                ("TensorFlow's log", str(log)),
                ("Took", f"{elapsed:.1f} s"),
            ]
        )
        term.note(
            f"Next: traceparse ops {logdir}   |   traceparse steps {logdir}   |   "
            f"traceparse allocations {logdir} --format csv -o allocations.csv"
        )
        return 0


@contextmanager
def _stderr_to_file(path: Path) -> Iterator[TextIO]:
    """Send everything written to file descriptor 2 (native code included) to ``path``.

    Yields a stream on the real stderr, for the progress display. Restored on exit,
    before any error is reported.
    """
    sys.stderr.flush()
    try:
        real = os.dup(2)
    except OSError:  # no usable file descriptor 2: nothing to redirect
        yield sys.stderr
        return
    with open(path, "ab") as sink:
        os.dup2(sink.fileno(), 2)
        real_stream = os.fdopen(os.dup(real), "w", buffering=1, encoding="utf-8")
        try:
            yield real_stream
        finally:
            sys.stderr.flush()
            os.dup2(real, 2)
            os.close(real)
            real_stream.close()


def _tensorflow() -> Any:
    from traceparse.capture.checks import import_tensorflow

    return import_tensorflow()


def _build(tf: Any) -> tuple[Any, Any, Any]:
    """A small CNN whose activations, weights and gradients are 0.5-16 MiB each."""
    import numpy as np

    keras = tf.keras
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    # Tensors made once, so no step pays for converting numpy arrays.
    images = tf.constant(rng.random((BATCH, IMAGE, IMAGE, 3), dtype=np.float32))
    labels = tf.constant(rng.integers(0, 10, BATCH))
    model = _demo_cnn(keras)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model, images, labels


def _demo_cnn(keras: Any) -> Any:
    """The demo's model, subclassed as users often write theirs: the summary's
    Source column then names the lines of ``call`` (a functional model's ops are
    made by Keras, so they would all name the line of ``train_on_batch``)."""

    class DemoCNN(keras.Model):
        def __init__(self) -> None:
            super().__init__(name="demo_cnn")
            layers = keras.layers
            self.conv1 = layers.Conv2D(32, 3, padding="same", activation="relu", name="conv1")
            self.pool1 = layers.MaxPooling2D(2, name="pool1")
            self.conv2 = layers.Conv2D(64, 3, padding="same", activation="relu", name="conv2")
            self.pool2 = layers.MaxPooling2D(2, name="pool2")
            self.flatten = layers.Flatten(name="flatten")
            self.hidden = layers.Dense(128, activation="relu", name="hidden")
            self.logits = layers.Dense(10, name="logits")

        def call(self, images: Any) -> Any:
            x = self.pool1(self.conv1(images))
            x = self.pool2(self.conv2(x))
            x = self.hidden(self.flatten(x))
            return self.logits(x)

    return DemoCNN()


_CACHE: dict[str, Any] = {}


def _cache_batch(tf: Any) -> Any:
    """A tf.function copying the batch under name scope ``debug_cache`` (1.5 MiB a call)."""
    # tf.roll, not tf.identity: an identity would hand back the same buffer.
    if "fn" not in _CACHE:

        @tf.function
        def cache_batch(batch: Any) -> Any:
            with tf.name_scope("debug_cache"):
                return tf.roll(batch, shift=1, axis=0)

        _CACHE["fn"] = cache_batch
    return _CACHE["fn"]
