"""Run an unmodified script under the profiler: ``run_script`` and Keras step markers.

The script runs in this process (``traceparse run`` calls this in a child
process of its own, ``traceparse.capture.child``); every Keras ``fit`` in it
marks its batches as steps.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from traceparse.capture.checks import check_seconds, import_tensorflow
from traceparse.capture.session import Capture
from traceparse.errors import CaptureError, UsageError

__all__ = ["ScriptResult", "keras_step_markers", "run_script"]


def keras_step_markers() -> AbstractContextManager[bool]:
    """``traceparse.capture.steps.step_markers_in_fit()``: inside the block, every Keras
    ``Model.fit`` marks its batches as steps; a block that does nothing (and
    gives False) when Keras cannot be imported."""
    try:
        from traceparse.capture.steps import step_markers_in_fit
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


def _note_failure(capture: Capture, exc: BaseException) -> None:
    """Record the script's exception beside the capture, with the Keras batch that
    was running (issue 39); the exception and exit code stay the script's."""
    steps = sys.modules.get("traceparse.capture.steps")
    step = getattr(steps, "last_step", [None])[0] if steps is not None else None
    if capture._step is None and isinstance(step, int):
        capture._step = step
    capture.note_failure(exc, "run")


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
    delay = check_seconds("delay_s", delay_s, allow_zero=True)
    duration = check_seconds("duration_s", duration_s, allow_zero=False)
    capture = Capture(
        logdir,
        host_tracer_level=host_tracer_level,
        python_tracer_level=python_tracer_level,
        device_tracer_level=device_tracer_level,
        delay_ms=delay_ms,
    )
    import_tensorflow()  # fail before the script runs if TensorFlow is missing
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
        capture.prepare_sources()  # the script's eager ops run on this thread
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
                _note_failure(capture, exc)
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
