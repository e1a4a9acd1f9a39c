"""One profiler session: ``profile()``, :class:`Capture` and its step markers.

Like all of ``traceparse.capture`` it imports TensorFlow lazily, inside the
functions that talk to the profiler, never at import time: analysing an
existing capture works without TensorFlow installed.

::

    with traceparse.profile("logs/run1") as cap:
        for step in range(3):
            with cap.step(step):
                train_step()
    cap.files    # every file the capture wrote
    cap.run_dir  # logs/run1/plugins/profile/<YYYY_MM_DD_HH_MM_SS>
    prof = cap.load()

TensorFlow writes ``<logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb``.
The files a capture wrote are found by comparing the log directory before the
profiler starts and after it stops, so files of earlier runs in the same log
directory are never reported as this capture's.

Tracer levels are passed to TensorFlow as ``ProfilerOptions``. Note: with
TensorFlow 2.21 the profiler ignores these options (it logs ``host_tracer_level
expects an i value`` and uses its defaults: host 2, python 0, device 1), so a
capture there always records memory events. Other TensorFlow versions honour
them; ``host_tracer_level`` below 2 then records no memory events.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from traceparse.capture.checks import (
    TENSORFLOW_MISSING,
    check_batch_size,
    check_level,
    check_logdir,
    enable_onednn,
    import_tensorflow,
)
from traceparse.errors import CaptureError, UsageError

if TYPE_CHECKING:
    from traceparse.capture.batch import BatchRecorder
    from traceparse.capture.inventory import Inventory
    from traceparse.capture.sources import SourceRecorder
    from traceparse.core.profile import Profile

__all__ = ["TENSORFLOW_MISSING", "Capture", "check_logdir", "enable_onednn", "profile"]

_NEW, _RUNNING, _STOPPED = "new", "running", "stopped"


def _snapshot(root: Path) -> dict[Path, tuple[int, int]]:
    """Every file under ``root`` with its (size, mtime in ns)."""
    found: dict[Path, tuple[int, int]] = {}
    if not root.is_dir():
        return found
    for dirpath, _dirnames, filenames in os.walk(root):
        for filename in filenames:
            path = Path(dirpath, filename)
            try:
                st = path.stat()
            except OSError:  # removed while walking
                continue
            found[path] = (st.st_size, st.st_mtime_ns)
    return found


# Captures started and not yet stopped: one still running when the interpreter
# exits (an uncaught exception or Ctrl-C, a Keras fit that raised) is stopped
# then, so that what it recorded is written rather than lost.
_running: set[Capture] = set()


def _stop_abandoned() -> None:
    """Stop every running capture whose owner says it was abandoned (the Keras ``fit``
    that started it raised), so that a new session can start; the capture is kept."""
    for capture in list(_running):
        abandoned = capture.abandoned
        if abandoned is None or not abandoned():
            continue
        try:
            capture.stop()
        except CaptureError as exc:
            print(f"traceparse: {exc}", file=sys.stderr)
            continue
        print(
            "traceparse: a capture was left running by code that ended without stopping "
            f"it; stopped now, kept in {capture.run_dir}",
            file=sys.stderr,
        )


@atexit.register
def _stop_at_exit() -> None:
    # An uncaught exception ended the program (Python keeps it here for atexit).
    uncaught = getattr(sys, "last_value", None)
    for capture in list(_running):
        if uncaught is not None:
            capture.note_failure(uncaught, "profile")
        try:
            files = capture.stop()
        except CaptureError as exc:
            print(f"traceparse: {exc}", file=sys.stderr)
            continue
        if capture.run_dir is not None and files:
            print(
                f"traceparse: the profiler was still running at exit; capture kept in "
                f"{capture.run_dir}",
                file=sys.stderr,
            )


class Capture(AbstractContextManager["Capture"]):
    """One profiler session writing into ``logdir``; made by :func:`profile`.

    Use it as a context manager (or call :meth:`start` and :meth:`stop`). An
    exception inside the ``with`` block still stops the profiler and keeps the
    capture, then propagates. A ``Capture`` records one session: it cannot be
    started twice.
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        *,
        host_tracer_level: int = 2,
        python_tracer_level: int = 0,
        device_tracer_level: int = 1,
        delay_ms: int | None = None,
        models: Sequence[Any] = (),
        inventory: bool = True,
        sources: bool = True,
        batch_size: int | None = None,
        keras_steps: bool = True,
    ) -> None:
        self.logdir: Path = check_logdir(logdir)
        # The batch size of the steps (capture/batch.py): given here, or read off
        # the steps' inputs while running; written beside the capture at stop.
        self.batch_size = check_batch_size(batch_size)
        self._batch: BatchRecorder | None = None
        self.host_tracer_level = check_level("host_tracer_level", host_tracer_level, 3)
        self.python_tracer_level = check_level("python_tracer_level", python_tracer_level, 1)
        self.device_tracer_level = check_level("device_tracer_level", device_tracer_level, None)
        self.delay_ms = None if delay_ms is None else check_level("delay_ms", delay_ms, None)
        self._lock = threading.RLock()
        self._state = _NEW
        self._before: dict[Path, tuple[int, int]] = {}
        self._pid = os.getpid()
        # Set by an owner that may end without stopping the capture (a Keras fit
        # that raises): True once it has; such a capture is stopped when the next starts.
        self.abandoned: Callable[[], bool] | None = None
        self._files: list[Path] = []
        self._stop_files: list[Path] = []  # what changed while the profiler stopped
        if isinstance(models, (str, bytes)) or not isinstance(models, Sequence):
            raise UsageError(f"models must be a list of Keras models, got {models!r}")
        self.models = list(models)
        self.take_inventory = bool(inventory)
        self._inventory: Inventory | None = None
        # The exception the profiled code raised (issue 39), written beside the
        # capture when it stops; and the step running or last begun.
        self._failure: dict[str, Any] | None = None
        self._failed: BaseException | None = None
        self._step: int | None = None
        # Source lines (docs/sources.md): recorded while running, written at stop.
        self.record_sources = bool(sources)
        self._sources: SourceRecorder | None = None
        # Keras fit/evaluate/predict batches as steps while running (profile()).
        self.keras_steps = bool(keras_steps)
        self._keras_steps = contextlib.ExitStack()

    def __repr__(self) -> str:
        return (
            f"Capture(logdir={str(self.logdir)!r}, state={self._state!r}, files={len(self._files)})"
        )

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._state == _RUNNING

    @property
    def stopped(self) -> bool:
        """True once the profiler was stopped and its files were collected."""
        return self._state == _STOPPED

    @property
    def files(self) -> list[Path]:
        """Every file this capture wrote or rewrote, sorted; empty until stopped."""
        return list(self._files)

    @property
    def run_dir(self) -> Path | None:
        """The run directory (``<logdir>/plugins/profile/<run>``) this capture wrote.

        ``None`` until the capture is stopped, or if it wrote nothing. It is where
        the profiler wrote when it stopped: files the profiled code itself wrote
        under the logdir (even a newer run directory) do not count.
        """
        written = self._stop_files or self._files
        runs = sorted({f.parent for f in written if f.name.endswith(".xplane.pb")})
        if not runs:
            runs = sorted({f.parent for f in written})
        return runs[-1] if runs else None

    def start(self) -> Capture:
        """Start the TensorFlow profiler; ``CaptureError`` if one is already running."""
        with self._lock:
            if self._state != _NEW:
                raise UsageError(f"this capture was already {self._state}; make a new one")
            tf = import_tensorflow()
            options = tf.profiler.experimental.ProfilerOptions(
                host_tracer_level=self.host_tracer_level,
                python_tracer_level=self.python_tracer_level,
                device_tracer_level=self.device_tracer_level,
                delay_ms=self.delay_ms,
            )
            _stop_abandoned()
            self._before = _snapshot(self.logdir)
            if self.take_inventory:
                from traceparse.capture.inventory import try_take_inventory

                # Before the profiler starts, so that the walk is not in the capture.
                self._inventory = try_take_inventory(None, "start", self.models)
            self._start_sources()
            self._start_batch()
            try:
                tf.profiler.experimental.start(os.fspath(self.logdir), options=options)
            except tf.errors.AlreadyExistsError as exc:
                self._stop_sources()
                self._stop_batch()
                raise CaptureError(
                    "a TensorFlow profiler is already running in this process (another "
                    "traceparse.profile, tf.profiler.experimental.start, or a Keras "
                    "TensorBoard callback with profile_batch); stop it before starting "
                    "another",
                    path=self.logdir,
                ) from exc
            except tf.errors.OpError as exc:
                self._stop_sources()
                self._stop_batch()
                raise CaptureError(
                    f"TensorFlow could not start the profiler for {self.logdir}: "
                    f"{type(exc).__name__}: {exc.message}",
                    path=self.logdir,
                ) from exc
            self._mark_clock(tf)
            if self.keras_steps:
                self._mark_keras_steps()
            self._state = _RUNNING
            self._pid = os.getpid()
            _running.add(self)
            return self

    def stop(self) -> list[Path]:
        """Stop the profiler, write the capture, and return :attr:`files`.

        Stopping a capture that is already stopped, or was never started, does
        nothing.
        """
        with self._lock:
            if self._state != _RUNNING:
                return self.files
            _running.discard(self)
            if os.getpid() != self._pid:
                # A process forked inside the block: the session is its parent's,
                # which writes the capture; this one writes none.
                self._keras_steps.close()
                self._state = _STOPPED
                return self.files
            tf = import_tensorflow()
            self._keras_steps.close()  # fit, evaluate and predict as they were
            self._state = _STOPPED
            at_stop = _snapshot(self.logdir)
            self._mark_clock(tf)  # again: a delayed start (delay_ms) missed the first
            try:
                tf.profiler.experimental.stop()
            except tf.errors.UnavailableError as exc:
                self._stop_batch()  # nothing to write it beside: stop noting
                raise CaptureError(
                    "the TensorFlow profiler was stopped by someone else before this "
                    "capture ended (tf.profiler.experimental.stop called inside the "
                    "block?); nothing was written",
                    path=self.logdir,
                ) from exc
            except tf.errors.OpError as exc:
                self._stop_batch()
                raise CaptureError(
                    f"TensorFlow could not write the capture to {self.logdir}: "
                    f"{type(exc).__name__}: {exc.message}",
                    path=self.logdir,
                ) from exc
            finally:
                after = _snapshot(self.logdir)
                self._files = sorted(
                    path for path, stamp in after.items() if self._before.get(path) != stamp
                )
                self._stop_files = sorted(
                    path for path, stamp in after.items() if at_stop.get(path) != stamp
                )
            self._write_inventory()
            self._write_failure()
            self._write_sources()
            self._write_batch()
            return self.files

    def _mark_keras_steps(self) -> None:
        """Mark Keras ``fit``/``evaluate``/``predict`` batches as steps until stopped;
        nothing when Keras cannot be imported."""
        try:
            from traceparse.capture.steps import step_markers_in_fit
        except ImportError:  # no Keras: nothing to mark
            return
        self._keras_steps.enter_context(step_markers_in_fit())

    def _write_inventory(self) -> None:
        """Take the stop inventory and write it beside each host's capture."""
        if self._inventory is None:
            return
        captures = [f for f in self._stop_files or self._files if f.name.endswith(".xplane.pb")]
        if not captures:
            return
        from traceparse.capture.inventory import try_take_inventory, write_inventory

        inventory = try_take_inventory(self._inventory, "stop", self.models)
        if inventory is None:
            return
        written = {
            Path(write_inventory(inventory, f.parent, f.name.removesuffix(".xplane.pb")))
            for f in captures
        }
        self._files = sorted({*self._files, *written})

    def note_failure(self, exc: BaseException, way: str) -> None:
        """Remember that the profiled code raised ``exc``; written beside the capture
        when it stops (``<host>.failure.json``). Only ``Exception``s count (not
        Ctrl-C or ``sys.exit``); the first note of one exception wins. Never raises."""
        if not isinstance(exc, Exception) or exc is self._failed:
            return
        from traceparse.capture.failure import describe_failure

        try:
            self._failure = describe_failure(exc, way=way, step=self._step)
            self._failed = exc
        except Exception as error:  # never in the way of the user's exception
            print(f"traceparse: the failure could not be recorded: {error!r}", file=sys.stderr)

    def _write_failure(self) -> None:
        """Write the noted failure beside each host's capture; a line on stderr when
        it cannot be (the capture itself is written)."""
        if self._failure is None:
            return
        captures = [f for f in self._stop_files or self._files if f.name.endswith(".xplane.pb")]
        from traceparse.capture.failure import write_failure

        written = set()
        for f in captures:
            try:
                host = f.name.removesuffix(".xplane.pb")
                written.add(Path(write_failure(self._failure, f.parent, host)))
            except Exception as error:  # a full disk: the capture matters more
                print(f"traceparse: the failure record was not written: {error}", file=sys.stderr)
        self._files = sorted({*self._files, *written})
        if written:
            kind = self._failure["exception"]["type"]
            print(
                f"traceparse: the profiled code raised {kind}; the capture and the failure "
                f"are kept in {self.run_dir}",
                file=sys.stderr,
            )

    # -- source lines (traceparse.capture.sources) ----------------------------------

    def _mark_clock(self, tf: Any) -> None:
        """Tie the capture's clock to the wall clock (``sources.mark_clock``): the
        source and failure records are stamped with the wall clock."""
        from traceparse.capture.sources import mark_clock

        with contextlib.suppress(Exception):  # the capture matters more than the mark
            mark_clock(tf)

    def prepare_sources(self) -> None:
        """Install the recorder's op callback now, on this thread, idle until the
        capture starts: for a capture started by another thread (op callbacks are
        per thread; ``traceparse run --delay``)."""
        if self.record_sources and self._sources is None:
            from traceparse.capture.sources import try_start

            self._sources = try_start(active=False)

    def _start_sources(self) -> None:
        if self._sources is not None:  # prepared on the program's thread
            self._sources.activate()
        elif self.record_sources:
            from traceparse.capture.sources import try_start

            self._sources = try_start()

    def _stop_sources(self) -> bool:
        recorder, self._sources = self._sources, None
        if recorder is None:
            return False
        from traceparse.capture.sources import try_stop

        self._sources = recorder if try_stop(recorder) else None
        return self._sources is not None

    def _write_sources(self) -> None:
        """Stop recording and write the source record beside each host's capture."""
        if not self._stop_sources() or self._sources is None:
            return
        captures = [f for f in self._stop_files or self._files if f.name.endswith(".xplane.pb")]
        from traceparse.capture.sources import write_sources

        written = {
            Path(write_sources(self._sources, f.parent, f.name.removesuffix(".xplane.pb")))
            for f in captures
        }
        self._sources = None
        self._files = sorted({*self._files, *written})

    # -- the batch size (traceparse.capture.batch) ------------------------------------

    def _start_batch(self) -> None:
        from traceparse.capture.batch import BatchRecorder

        self._batch = BatchRecorder(self.batch_size)
        self._batch.start()

    def _stop_batch(self) -> BatchRecorder | None:
        recorder, self._batch = self._batch, None
        if recorder is not None:
            recorder.stop()
        return recorder

    def _write_batch(self) -> None:
        """Write the batch the steps saw beside each host's capture, when one was
        given or seen; a line on stderr when it cannot be (the capture matters more)."""
        recorder = self._stop_batch()
        if recorder is None:
            return
        captures = [f for f in self._stop_files or self._files if f.name.endswith(".xplane.pb")]
        written = set()
        try:
            if recorder.to_json(None)["batch_size"] is None:
                return
            for f in captures:
                written.add(Path(recorder.write(f.parent, f.name.removesuffix(".xplane.pb"))))
        except Exception as error:  # a full disk
            print(f"traceparse: the batch size was not recorded: {error}", file=sys.stderr)
        self._files = sorted({*self._files, *written})

    def __enter__(self) -> Capture:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.stop()
            return
        self.note_failure(exc, "profile")
        try:
            self.stop()
        except Exception as stop_error:
            # Never hide the user's exception behind a failure to stop.
            note = f"traceparse: stopping the profiler also failed: {stop_error}"
            add_note = getattr(exc, "add_note", None)
            if add_note is not None:
                add_note(note)
            else:  # Python 3.10
                print(note, file=sys.stderr)

    def step(
        self, step_num: int, name: str = "train", batch_size: int | None = None
    ) -> AbstractContextManager[Any]:
        """Mark one step: ``tf.profiler.experimental.Trace(name, step_num=step_num, _r=1)``.

        The marker is an event named ``name`` with a ``step_num`` stat that
        the analysis uses to split memory by step. ``batch_size``: the number
        of examples the step feeds, recorded beside the capture (else read off
        the inputs of the ``tf.function`` the step calls, where it calls one).
        """
        step_num = check_level("step_num", step_num, None)
        batch_size = check_batch_size(batch_size)
        if not isinstance(name, str) or not name:
            raise UsageError(f"a step name must be a non-empty string, got {name!r}")
        tf = import_tensorflow()
        trace: AbstractContextManager[Any] = tf.profiler.experimental.Trace(
            name, step_num=step_num, _r=1
        )
        return _Step(self, step_num, trace, batch_size)

    def load(self) -> Profile:
        """Read this capture: ``traceparse.core.loading.load(self.run_dir)``."""
        if self._state != _STOPPED:
            raise UsageError("stop the capture (leave its with-block) before loading it")
        if self.run_dir is None:
            raise CaptureError(f"the capture wrote no files under {self.logdir}", path=self.logdir)
        from traceparse.core.loading import load

        return load(self.run_dir)


class _Step(AbstractContextManager[Any]):
    """A step marker that also tells its capture which step runs, and notes an
    exception raised in it (the exception goes on unchanged)."""

    def __init__(
        self,
        capture: Capture,
        step_num: int,
        trace: AbstractContextManager[Any],
        batch_size: int | None = None,
    ):
        self.capture, self.step_num, self.trace = capture, step_num, trace
        self.batch_size = batch_size

    def __enter__(self) -> Any:
        self.capture._step = self.step_num
        recorder = self.capture._batch
        if recorder is not None:
            recorder.step = self.step_num
            if self.batch_size is not None:
                recorder.note(self.batch_size, "given", self.step_num)
        return self.trace.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if exc is not None:
            self.capture.note_failure(exc, "step")
        elif self.capture._failed is not None and self.capture.running:
            # A later step ended normally: the program caught the exception and
            # went on, so the capture did not end in it.
            self.capture._failure = self.capture._failed = None
        return self.trace.__exit__(exc_type, exc, tb)


def profile(
    logdir: str | os.PathLike[str],
    *,
    host_tracer_level: int = 2,
    python_tracer_level: int = 0,
    device_tracer_level: int = 1,
    delay_ms: int | None = None,
    models: Sequence[Any] = (),
    inventory: bool = True,
    sources: bool = True,
    batch_size: int | None = None,
    keras_steps: bool = True,
) -> Capture:
    """A :class:`Capture` of everything TensorFlow does inside its ``with`` block.

    At start and stop the capture also lists the live ``tf.Variable`` objects (see
    ``traceparse.capture.inventory``) and writes them beside the capture as
    ``<host>.variables.json``, so that the bytes allocated before the capture
    get names. ``models`` are Keras models to name first (any live Keras model
    is found anyway); ``inventory=False`` skips it.

    Inside the block each batch of a Keras ``Model.fit`` (and of ``evaluate`` and
    ``predict`` called on their own) is a marked step, as ``cap.step(n)`` marks
    one: ``fit`` calls the callbacks' ``on_train_batch_begin``/``_end`` around
    every batch, and the capture adds a ``StepMarker`` callback to each call
    (``traceparse.capture.steps.step_markers_in_fit``), so a leak check can
    compare the batches. ``keras_steps=False`` leaves ``fit`` alone.

    ``batch_size``: the number of examples each step feeds, written beside the
    capture as ``<host>.batch.json`` so that ``predict`` starts from it. Without
    it the capture records what the steps' inputs show: the batches Keras feeds
    ``fit`` (read by the step markers above, ``MemoryCallback``'s or ``traceparse
    run``'s) or the leading dimension of an eagerly called ``tf.function``'s first argument
    (``traceparse.capture.batch``).

    ``host_tracer_level`` 2 (the default) is the lowest level at which the
    allocator records memory events; ``python_tracer_level`` 1 traces every
    Python call and makes captures much larger. Arguments are checked here
    (``UsageError``); TensorFlow is imported when the capture starts
    (``CaptureError`` if it is missing or a profiler is already running).
    """
    return Capture(
        logdir,
        host_tracer_level=host_tracer_level,
        python_tracer_level=python_tracer_level,
        device_tracer_level=device_tracer_level,
        delay_ms=delay_ms,
        models=models,
        inventory=inventory,
        sources=sources,
        batch_size=batch_size,
        keras_steps=keras_steps,
    )
