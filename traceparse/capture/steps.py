"""Step markers for Keras ``fit``: each training batch is a profiler step (and, for
``traceparse.profile()`` and ``traceparse run``, each batch of ``evaluate`` and
``predict`` called outside ``fit``).

Importing this module imports Keras (it defines a Keras callback); nothing
else in ``traceparse.capture`` does at import time.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import keras

from traceparse.capture.batch import keras_batch_of, mark_step, note_keras_step

__all__ = ["STEP_NAME", "StepMarker", "step_markers_in_fit"]

STEP_NAME = "train"
# The step a marker began last in this process: a failure record's step when the
# script run by ``traceparse run`` raises (issue 39).
last_step: list[int | None] = [None]


class StepMarker(keras.callbacks.Callback):
    """Marks every training batch as a profiler step; starts no profiler.

    While some profiler runs (``traceparse run``, ``traceparse.profile()``),
    each batch is an event ``"train"`` with ``step_num`` = the batch's number,
    counted from 1 and on across ``fit`` calls, so that steps never repeat.
    Outside a capture the marker costs next to nothing. Inside one it also notes
    the batch Keras feeds each training step (``traceparse.capture.batch``).

    With ``loops=True`` the batches of ``evaluate`` and ``predict`` called on
    their own are steps too (Keras calls ``on_test_batch_begin`` /
    ``on_predict_batch_begin`` around each, keras/src/callbacks/callback.py);
    the validation batches inside ``fit`` are not (they belong to the
    training step's epoch, and a leak check compares training steps).
    """

    def __init__(self, name: str = STEP_NAME, *, loops: bool = False) -> None:
        super().__init__()
        self.step_name = name
        self.step = 0
        self.loops = loops
        self._training = False
        self._trace: AbstractContextManager[Any] | None = None
        self._adapter: Any = None  # the running fit's DataAdapter, where Keras has one

    def _find_adapter(self) -> None:
        """Find the data adapter of the ``fit`` that calls this callback (two frames up:
        ``CallbackList.on_train_begin``, then ``fit``)."""
        try:
            self._adapter = keras_batch_of(sys._getframe(2))
        except Exception:  # never in fit's way
            self._adapter = None

    def _note_batch(self, batch: int, step: int) -> None:
        """Note the size of ``fit``'s ``batch`` (0-based in its epoch) as ``step``'s."""
        with contextlib.suppress(Exception):  # never in fit's way
            note_keras_step(self._adapter, batch, step)

    def _begin_step(self, step: int) -> None:
        import tensorflow as tf

        self._end_step()
        last_step[0] = step
        mark_step(step)
        self._trace = tf.profiler.experimental.Trace(self.step_name, step_num=step, _r=1)
        self._trace.__enter__()

    def _end_step(self) -> None:
        trace, self._trace = self._trace, None
        if trace is not None:
            trace.__exit__(None, None, None)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.step += 1
        self._begin_step(self.step)
        self._note_batch(batch, self.step)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._end_step()

    def on_train_begin(self, logs: Any = None) -> None:
        self._training = True
        self._find_adapter()

    def on_train_end(self, logs: Any = None) -> None:
        self._training = False
        self._end_step()

    def _loop_batch_begin(self) -> None:
        if self.loops and not self._training:
            self.step += 1
            self._begin_step(self.step)

    def _loop_batch_end(self) -> None:
        if self.loops and not self._training:
            self._end_step()

    def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._loop_batch_begin()

    def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
        self._loop_batch_end()

    def on_predict_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._loop_batch_begin()

    def on_predict_batch_end(self, batch: int, logs: Any = None) -> None:
        self._loop_batch_end()

    def on_test_end(self, logs: Any = None) -> None:
        self._loop_batch_end()

    def on_predict_end(self, logs: Any = None) -> None:
        self._loop_batch_end()


# The Model methods whose batches are steps (``StepMarker(loops=True)``).
LOOPS = ("fit", "evaluate", "predict")


@contextmanager
def step_markers_in_fit() -> Iterator[bool]:
    """Inside the block, every Keras ``Model.fit`` marks its batches as profiler steps,
    and so do ``evaluate`` and ``predict`` called on their own.

    ``keras.Model.fit``, ``evaluate`` and ``predict`` are wrapped so that they
    add a :class:`StepMarker` to the callbacks (one marker for the whole block,
    so step numbers go on across calls), unless the call already has a
    traceparse callback. The script is not changed; the originals are put back
    on exit. Works in whichever process the script runs in: call it there,
    around the script (``traceparse run`` and ``traceparse.profile()`` do).
    Yields True.
    """
    marker = StepMarker(loops=True)
    originals = {name: getattr(keras.Model, name) for name in LOOPS}
    for name, original in originals.items():
        setattr(keras.Model, name, _with_marker(original, marker))
    try:
        yield True
    finally:
        for name, original in originals.items():
            setattr(keras.Model, name, original)


def _with_marker(original: Any, marker: StepMarker) -> Any:
    """``original`` (a ``Model`` method taking ``callbacks``) adding ``marker`` to them."""
    from keras.callbacks import Callback

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(original).bind(self, *args, **kwargs)
        callbacks = bound.arguments.get("callbacks")
        given = list(callbacks) if isinstance(callbacks, (list, tuple)) else []
        if callbacks is None or (
            isinstance(callbacks, (list, tuple))
            and all(isinstance(c, Callback) for c in given)
            and not any(isinstance(c, StepMarker) for c in given)
        ):
            bound.arguments["callbacks"] = [*given, marker]
        return original(*bound.args, **bound.kwargs)

    method.__doc__ = original.__doc__
    method.__name__ = original.__name__
    method.__wrapped__ = original  # type: ignore[attr-defined]
    return method
