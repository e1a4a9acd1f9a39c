"""Record the batch size a capture's steps saw: ``<host>.batch.json`` beside it.

A prediction at another batch size needs the batch the capture was made at.
Read off the allocations' shapes it is a guess (a kernel's gradient can share a
dimension with an activation); where traceparse makes the capture, the steps'
inputs say it outright. Three ways, best first (``decode/batch.py`` reads the
record):

- ``given``: ``traceparse.profile(batch_size=)`` or ``cap.step(n, batch_size=)``.
- ``keras``: the batch Keras' data adapter feeds ``fit``'s steps, read by the
  step markers (``capture/steps.py``: ``MemoryCallback`` and ``traceparse run``'s
  markers). Keras 3's TensorFlow trainer builds a ``TFEpochIterator`` over a
  ``DataAdapter`` whose ``batch_size``, ``num_batches`` and
  ``partial_batch_size`` say what each step gets (keras/src/trainers/
  data_adapters/data_adapter.py); an array input is cut into ``batch_size``
  rows with a smaller last batch, a ``tf.data`` input's size is its element
  spec's leading dimension when that is static, unknown otherwise.
- ``function``: the leading dimension of the tensors an eagerly called
  ``tf.function`` receives (a custom training loop's step, Keras'
  ``train_on_batch``, which calls its step function on the batch). TensorFlow
  runs such a call as one eager op named after the function and hands op
  callbacks its flat inputs: the call's arguments first, then the captured
  tensors (``ConcreteFunction._call_flat(args, captured_inputs)``,
  tensorflow/python/eager/polymorphic_function/concrete_function.py): the first
  input is the first argument's first tensor, read only when it holds data (not
  a resource or variant handle, not a scalar), so a captured tensor is never
  taken for the batch.

A step's batch is the size it saw most often (a step that also calls a
function on one example still has its batch); the capture's batch is the size
most of its steps saw, ties going to the larger: Keras' adapters and
``tf.data``'s ``batch(drop_remainder=False)`` make only an epoch's last batch
smaller, never larger. Nothing here may get in the way of the profiled program:
a failure to record is one line on stderr.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from typing import Any

from traceparse.core.sidecars import BATCH
from traceparse.decode.batch import FORMAT, MAX_BATCH_SIZE, MAX_STEPS, VERSION

__all__ = ["BatchRecorder", "keras_batch_of", "note_keras_step", "running_recorders"]

# The recorders of the captures running in this process (the step markers note
# into them: a Keras callback does not know which capture is running).
_running: list[BatchRecorder] = []
_lock = threading.Lock()
# The op types TensorFlow gives an eager call of a traced function.
_FUNCTION_PREFIXES = ("__inference_",)
# Dtypes of handles, not data: a variable's resource, an iterator's variant.
_HANDLE_DTYPES = ("resource", "variant")
# How many frames above a callback Keras' fit loop may be (CallbackList, its
# caller fit, the traceback filter's wrapper around fit).
_FIT_DEPTH = 6


def running_recorders() -> list[BatchRecorder]:
    with _lock:
        return list(_running)


class BatchRecorder:
    """The batch sizes one capture's steps saw; :meth:`to_json` is the record."""

    def __init__(self, given: int | None = None) -> None:
        self.given = given
        self.started_ns = time.time_ns()
        self.stopped_ns: int | None = None
        self.step: int | None = None  # the step running now (its marker sets it)
        # (way, step) -> sizes seen; step None: outside every marked step.
        self._seen: dict[tuple[str, int | None], Counter[int]] = {}
        self._installed = False
        self._thread: int | None = None

    # -- noting --------------------------------------------------------------------

    def note(self, size: Any, how: str, step: int | None = None) -> None:
        """One batch of ``size`` examples fed by ``how`` in ``step`` (default: the current)."""
        if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= MAX_BATCH_SIZE:
            return
        key = (how, self.step if step is None else step)
        seen = self._seen.get(key)
        if seen is None:
            if len(self._seen) >= MAX_STEPS:
                return  # a capture of more steps than a record keeps: the first ones
            seen = self._seen[key] = Counter()
        seen[size] += 1

    def _callback(
        self,
        op_type: Any,
        inputs: Any,
        attrs: Any,
        outputs: Any,
        op_name: Any = None,
        graph: Any = None,
    ) -> None:
        # Graph construction (a function being traced) feeds no batch; only eager calls.
        if graph is not None or not inputs:
            return None
        name = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        if name.startswith(_FUNCTION_PREFIXES):
            self.note(_leading_dimension(inputs), "function")
        return None

    def start(self) -> None:
        """Start recording: register for the step markers, and watch the eager calls
        of traced functions on this thread (TensorFlow keeps op callbacks per thread)."""
        with _lock:
            _running.append(self)
        try:
            from tensorflow.python.framework import op_callbacks

            op_callbacks.add_op_callback(self._callback)
            self._installed, self._thread = True, threading.get_ident()
        except Exception as exc:  # a TensorFlow without op callbacks: Keras still notes
            print(
                f"traceparse: the inputs of tf.function calls are not watched for the batch "
                f"size ({type(exc).__name__}: {exc})",
                file=sys.stderr,
            )

    def stop(self) -> None:
        """Stop recording; never raises."""
        self.stopped_ns = time.time_ns()
        with _lock:
            if self in _running:
                _running.remove(self)
        if self._installed and self._thread == threading.get_ident():
            try:
                from tensorflow.python.framework import op_callbacks

                op_callbacks.remove_op_callback(self._callback)
            except Exception:  # already gone (the program cleared the callbacks)
                pass
            self._installed = False
        # A callback left on another thread (a timer stopped the capture) stays
        # installed but idle: this recorder is no longer running.

    # -- the record ----------------------------------------------------------------

    def _how(self) -> str | None:
        if self.given is not None:
            return "given"
        ways = {how for how, _step in self._seen}
        return next((how for how in ("given", "keras", "function") if how in ways), None)

    def to_json(self, tensorflow: str | None) -> dict[str, Any]:
        how = self._how()
        per_step = {
            step: _most_seen(sizes)
            for (way, step), sizes in self._seen.items()
            if way == how and step is not None
        }
        if self.given is not None:
            batch: int | None = self.given
        elif per_step:
            batch = _most_seen(Counter(per_step.values()))
        else:  # no marked step: every call of the chosen way counts
            unmarked = self._seen.get((how or "", None))
            batch = _most_seen(unmarked) if unmarked else None
        return {
            "format": FORMAT,
            "version": VERSION,
            "tensorflow": tensorflow,
            "started_ns": self.started_ns,
            "stopped_ns": self.stopped_ns,
            "batch_size": batch,
            "how": how if batch is not None else None,
            "steps": [[step, per_step[step]] for step in sorted(per_step)],
        }

    def write(self, run_dir: Any, host: str) -> str:
        """Write the record beside ``<run_dir>/<host>.xplane.pb``; return its path."""
        tf = sys.modules.get("tensorflow")
        version = getattr(tf, "__version__", None)
        return BATCH.write(
            self.to_json(version if isinstance(version, str) else None), run_dir, host
        )


def _most_seen(sizes: Counter[int]) -> int:
    """The size seen most often, ties to the larger (a partial batch is the smaller)."""
    return max(sizes.items(), key=lambda item: (item[1], item[0]))[0]


def _leading_dimension(inputs: Any) -> int | None:
    """The first dimension of a function call's first input, when that is data (module
    docstring): a handle or a scalar there (a variable, an iterator, a step counter
    passed first) says nothing, and the inputs after it may be captured tensors."""
    first = inputs[0]
    if getattr(getattr(first, "dtype", None), "name", None) in _HANDLE_DTYPES:
        return None
    try:
        dims = first.shape.as_list()
    except (AttributeError, ValueError):  # not a tensor, or of unknown rank
        return None
    return dims[0] if dims and isinstance(dims[0], int) else None


# -- Keras fit -------------------------------------------------------------------------


def keras_batch_of(frame: Any) -> Any:
    """The ``DataAdapter`` of the Keras ``fit`` whose loop is at or above ``frame``
    (the ``epoch_iterator`` local of Keras 3's trainers), or None."""
    for _ in range(_FIT_DEPTH):
        if frame is None:
            return None
        iterator = frame.f_locals.get("epoch_iterator")
        adapter = getattr(iterator, "data_adapter", None)
        if adapter is not None:
            return adapter
        frame = frame.f_back
    return None


def _adapter_size(adapter: Any, batch: int) -> int | None:
    """The number of examples ``fit``'s batch ``batch`` (0-based in its epoch) holds."""
    try:
        size = adapter.batch_size
        count = adapter.num_batches
        partial = adapter.partial_batch_size if adapter.has_partial_batch else None
    except Exception:  # an adapter that cannot say (a generator's): nothing is noted
        return None
    if isinstance(partial, int) and isinstance(count, int) and batch == count - 1:
        return partial
    return size if isinstance(size, int) else None


def note_keras_step(adapter: Any, batch: int, step: int) -> None:
    """Note in every running capture that its ``step`` is ``fit``'s batch ``batch``
    of ``adapter``; never raises."""
    recorders = running_recorders()
    if adapter is None or not recorders:
        return
    size = _adapter_size(adapter, batch)
    for recorder in recorders:
        recorder.step = step
        if size is not None:
            recorder.note(size, "keras", step)


def mark_step(step: int) -> None:
    """Tell every running capture that ``step`` runs now."""
    for recorder in running_recorders():
        recorder.step = step
