"""Capture TensorFlow profiles: ``profile()``, step markers, and running a script.

This is the only module of traceparse that needs TensorFlow, and it imports it
lazily, inside the functions that talk to the profiler, never at import time:
analysing an existing capture works without TensorFlow installed.

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

import math
import os
import runpy
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from traceparse.dependencies import TENSORFLOW, check
from traceparse.errors import CaptureError, DependencyError, UsageError

if TYPE_CHECKING:
    from traceparse.core.profile import Profile
    from traceparse.inventory import Inventory

__all__ = ["Capture", "ScriptResult", "profile", "run_script"]

TENSORFLOW_MISSING = (
    f"tensorflow is not installed, but capturing needs {TENSORFLOW.spec()}: {TENSORFLOW.fix} "
    "(analysing existing captures does not need it)"
)

_NEW, _RUNNING, _STOPPED = "new", "running", "stopped"


def _import_tensorflow() -> ModuleType:
    """Import TensorFlow, or raise ``CaptureError`` saying how to install it."""
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise CaptureError(TENSORFLOW_MISSING) from exc
    try:
        check(TENSORFLOW, str(getattr(tf, "__version__", "0")), "capturing")
    except DependencyError as exc:
        raise CaptureError(str(exc)) from exc
    return tf


def _check_level(name: str, value: object, highest: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be an integer, got {value!r}")
    if value < 0 or (highest is not None and value > highest):
        allowed = f"0 to {highest}" if highest is not None else "0 or more"
        raise UsageError(f"{name} must be {allowed}, got {value}")
    return value


def _check_seconds(name: str, value: object, *, allow_zero: bool) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{name} must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        bound = "0 or more" if allow_zero else "more than 0"
        raise UsageError(f"{name} must be a finite number of seconds, {bound}, got {value!r}")
    return seconds


def _check_logdir(logdir: str | os.PathLike[str]) -> Path:
    if not isinstance(logdir, (str, os.PathLike)):
        raise UsageError(f"logdir must be a path, got {logdir!r}")
    text = os.fspath(logdir)
    if not text:
        raise UsageError("logdir must not be empty")
    if "://" in text:
        raise UsageError(
            f"capturing needs a local log directory, got {text}: "
            "capture locally, then copy the run directory",
            path=text,
        )
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise UsageError(f"logdir {path} exists and is not a directory", path=path)
    return path


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
    ) -> None:
        self.logdir: Path = _check_logdir(logdir)
        self.host_tracer_level = _check_level("host_tracer_level", host_tracer_level, 3)
        self.python_tracer_level = _check_level("python_tracer_level", python_tracer_level, 1)
        self.device_tracer_level = _check_level("device_tracer_level", device_tracer_level, None)
        self.delay_ms = None if delay_ms is None else _check_level("delay_ms", delay_ms, None)
        self._lock = threading.RLock()
        self._state = _NEW
        self._before: dict[Path, tuple[int, int]] = {}
        self._files: list[Path] = []
        if isinstance(models, (str, bytes)) or not isinstance(models, Sequence):
            raise UsageError(f"models must be a list of Keras models, got {models!r}")
        self.models = list(models)
        self.take_inventory = bool(inventory)
        self._inventory: Inventory | None = None

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

        ``None`` until the capture is stopped, or if it wrote nothing.
        """
        runs = sorted({f.parent for f in self._files if f.name.endswith(".xplane.pb")})
        if not runs:
            runs = sorted({f.parent for f in self._files})
        return runs[-1] if runs else None

    def start(self) -> Capture:
        """Start the TensorFlow profiler; ``CaptureError`` if one is already running."""
        with self._lock:
            if self._state != _NEW:
                raise UsageError(f"this capture was already {self._state}; make a new one")
            tf = _import_tensorflow()
            options = tf.profiler.experimental.ProfilerOptions(
                host_tracer_level=self.host_tracer_level,
                python_tracer_level=self.python_tracer_level,
                device_tracer_level=self.device_tracer_level,
                delay_ms=self.delay_ms,
            )
            self._before = _snapshot(self.logdir)
            if self.take_inventory:
                from traceparse.inventory import try_take_inventory

                # Before the profiler starts, so that the walk is not in the capture.
                self._inventory = try_take_inventory(None, "start", self.models)
            try:
                tf.profiler.experimental.start(os.fspath(self.logdir), options=options)
            except tf.errors.AlreadyExistsError as exc:
                raise CaptureError(
                    "a TensorFlow profiler is already running in this process (another "
                    "traceparse.profile, tf.profiler.experimental.start, or a Keras "
                    "TensorBoard callback with profile_batch); stop it before starting "
                    "another",
                    path=self.logdir,
                ) from exc
            except tf.errors.OpError as exc:
                raise CaptureError(
                    f"TensorFlow could not start the profiler for {self.logdir}: "
                    f"{type(exc).__name__}: {exc.message}",
                    path=self.logdir,
                ) from exc
            self._state = _RUNNING
            return self

    def stop(self) -> list[Path]:
        """Stop the profiler, write the capture, and return :attr:`files`.

        Stopping a capture that is already stopped, or was never started, does
        nothing.
        """
        with self._lock:
            if self._state != _RUNNING:
                return self.files
            tf = _import_tensorflow()
            self._state = _STOPPED
            try:
                tf.profiler.experimental.stop()
            except tf.errors.UnavailableError as exc:
                raise CaptureError(
                    "the TensorFlow profiler was stopped by someone else before this "
                    "capture ended (tf.profiler.experimental.stop called inside the "
                    "block?); nothing was written",
                    path=self.logdir,
                ) from exc
            except tf.errors.OpError as exc:
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
            self._write_inventory()
            return self.files

    def _write_inventory(self) -> None:
        """Take the stop inventory and write it beside each host's capture."""
        if self._inventory is None:
            return
        captures = [f for f in self._files if f.name.endswith(".xplane.pb")]
        if not captures:
            return
        from traceparse.inventory import try_take_inventory, write_inventory

        inventory = try_take_inventory(self._inventory, "stop", self.models)
        if inventory is None:
            return
        written = {
            Path(write_inventory(inventory, f.parent, f.name.removesuffix(".xplane.pb")))
            for f in captures
        }
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
        try:
            self.stop()
        except CaptureError as stop_error:
            # Never hide the user's exception behind a failure to stop.
            note = f"traceparse: stopping the profiler also failed: {stop_error}"
            add_note = getattr(exc, "add_note", None)
            if add_note is not None:
                add_note(note)
            else:  # Python 3.10
                print(note, file=sys.stderr)

    def step(self, step_num: int, name: str = "train") -> AbstractContextManager[Any]:
        """Mark one step: ``tf.profiler.experimental.Trace(name, step_num=step_num, _r=1)``.

        The marker is an event named ``name`` with a ``step_num`` stat that
        the analysis uses to split memory by step.
        """
        step_num = _check_level("step_num", step_num, None)
        if not isinstance(name, str) or not name:
            raise UsageError(f"a step name must be a non-empty string, got {name!r}")
        tf = _import_tensorflow()
        trace: AbstractContextManager[Any] = tf.profiler.experimental.Trace(
            name, step_num=step_num, _r=1
        )
        return trace

    def load(self) -> Profile:
        """Read this capture: ``traceparse.core.loading.load(self.run_dir)``."""
        if self._state != _STOPPED:
            raise UsageError("stop the capture (leave its with-block) before loading it")
        if self.run_dir is None:
            raise CaptureError(f"the capture wrote no files under {self.logdir}", path=self.logdir)
        from traceparse.core.loading import load

        return load(self.run_dir)


def profile(
    logdir: str | os.PathLike[str],
    *,
    host_tracer_level: int = 2,
    python_tracer_level: int = 0,
    device_tracer_level: int = 1,
    delay_ms: int | None = None,
    models: Sequence[Any] = (),
    inventory: bool = True,
) -> Capture:
    """A :class:`Capture` of everything TensorFlow does inside its ``with`` block.

    At start and stop the capture also lists the live ``tf.Variable`` objects (see
    ``traceparse.inventory``) and writes them beside the capture as
    ``<host>.variables.json``, so that the bytes allocated before the capture
    get names. ``models`` are Keras models to name first (any live Keras model
    is found anyway); ``inventory=False`` skips it.

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
    )


def enable_onednn() -> bool:
    """Set ``TF_ENABLE_ONEDNN_OPTS=1`` unless it is set or TensorFlow is already imported.

    TensorFlow's default CPU allocator records no memory events; with oneDNN on,
    CPU memory comes from ``mklcpu``, a BFC allocator that does. TensorFlow reads
    the variable once, when it is imported. Returns True when it was set here.
    """
    if "TF_ENABLE_ONEDNN_OPTS" in os.environ or "tensorflow" in sys.modules:
        return False
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"
    return True


def keras_step_markers() -> AbstractContextManager[bool]:
    """``traceparse.keras.step_markers_in_fit()``: inside the block, every Keras
    ``Model.fit`` marks its batches as steps; a block that does nothing (and
    gives False) when Keras cannot be imported."""
    try:
        from traceparse.keras import step_markers_in_fit
    except ImportError:
        return nullcontext(False)
    return step_markers_in_fit()


@dataclass(frozen=True)
class ScriptResult:
    """What :func:`run_script` did: the script's exit code and the capture.

    ``profiler_error`` holds a failure of a profiler start or stop that ran on
    a timer thread (``delay_s`` / ``duration_s``), where it cannot be raised.
    """

    exit_code: int
    capture: Capture
    profiler_error: CaptureError | None = None


def _exit_code(exc: SystemExit) -> int:
    """The process exit status ``python script.py`` would give for ``exc``."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # as the interpreter does for sys.exit("message")
    return 1


def _print_script_traceback(exc: BaseException, script: Path) -> None:
    """Print ``exc`` as the interpreter would, without traceparse's own frames."""
    tb = exc.__traceback__
    while tb is not None and Path(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__, file=sys.stderr)
    sys.stderr.flush()


@contextmanager
def _script_environment(script: Path, args: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python script.py args`` sets them; restored."""
    saved_argv = sys.argv
    saved_path = list(sys.path)
    sys.argv = [os.fspath(script), *args]
    sys.path.insert(0, os.fspath(script.parent))
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def run_script(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    *,
    logdir: str | os.PathLike[str],
    delay_s: float | None = None,
    duration_s: float | None = None,
    host_tracer_level: int = 2,
    python_tracer_level: int = 0,
    device_tracer_level: int = 1,
    delay_ms: int | None = None,
) -> ScriptResult:
    """Run an unmodified Python script under the profiler, as ``python script args``.

    The script runs in this process with ``__name__ == "__main__"``,
    ``sys.argv == [script, *args]`` and its directory first on ``sys.path``
    (both restored afterwards). ``sys.exit(n)`` gives exit code ``n``; an
    uncaught exception prints its traceback to stderr and gives exit code 1.
    ``KeyboardInterrupt`` propagates after the profiler is stopped. The
    profiler is stopped and its capture written in every case.

    ``delay_s`` starts the profiler that many seconds after the script starts
    (on a timer thread), to skip start-up; ``duration_s`` stops it that many
    seconds after it started. If the script ends first, the profiler is
    stopped when it ends, and a profiler that had not started yet never
    starts: the capture then holds no files (``capture.files == []``,
    ``capture.run_dir is None``). A start or stop that fails on a timer thread
    (for example because the script runs its own profiler) is reported in
    ``profiler_error`` and on stderr, not raised.

    Keras ``fit`` calls in the script mark each batch as a step
    (:func:`keras_step_markers`), so a plain ``fit`` gets a steps table and a
    leak check; the capture has a variable inventory, as ``profile()`` makes.
    """
    script_path = Path(os.fspath(script)).expanduser()
    if not script_path.is_file():
        raise UsageError(f"no such script: {script_path}", path=script_path)
    script_path = script_path.resolve()
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise UsageError(f"script arguments must be a sequence of strings, got {args!r}")
    delay = _check_seconds("delay_s", delay_s, allow_zero=True)
    duration = _check_seconds("duration_s", duration_s, allow_zero=False)
    capture = Capture(
        logdir,
        host_tracer_level=host_tracer_level,
        python_tracer_level=python_tracer_level,
        device_tracer_level=device_tracer_level,
        delay_ms=delay_ms,
    )
    _import_tensorflow()  # fail before the script runs if TensorFlow is missing
    # Keras is imported (for the step markers) before the profiler starts.
    markers = ExitStack()
    markers.enter_context(keras_step_markers())

    errors: list[CaptureError] = []
    timers: list[threading.Timer] = []
    timers_lock = threading.Lock()
    finished = threading.Event()

    def stop_on_timer() -> None:
        try:
            capture.stop()
        except CaptureError as exc:
            errors.append(exc)
            print(f"traceparse: {exc}", file=sys.stderr)

    def start_now() -> None:
        capture.start()
        if duration is not None:
            with timers_lock:
                if finished.is_set():
                    return
                timer = threading.Timer(duration, stop_on_timer)
                timer.daemon = True
                timers.append(timer)
                timer.start()

    def start_on_timer() -> None:
        with timers_lock:
            if finished.is_set():
                return
        try:
            start_now()
        except CaptureError as exc:
            errors.append(exc)
            print(f"traceparse: {exc}", file=sys.stderr)

    if delay is None:
        try:
            start_now()  # errors raise here, before the script runs
        except BaseException:
            markers.close()
            raise
    else:
        timer = threading.Timer(delay, start_on_timer)
        timer.daemon = True
        timers.append(timer)
        timer.start()

    exit_code = 0
    try:
        with _script_environment(script_path, args):
            try:
                runpy.run_path(os.fspath(script_path), run_name="__main__")
            except SystemExit as exc:
                exit_code = _exit_code(exc)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                _print_script_traceback(exc, script_path)
                exit_code = 1
    finally:
        with timers_lock:
            finished.set()
            pending = list(timers)
        for timer in pending:
            timer.cancel()
        for timer in pending:
            timer.join()
        try:
            capture.stop()
        except CaptureError as exc:
            errors.append(exc)
            print(f"traceparse: {exc}", file=sys.stderr)
        finally:
            markers.close()
    return ScriptResult(
        exit_code=exit_code, capture=capture, profiler_error=errors[0] if errors else None
    )
