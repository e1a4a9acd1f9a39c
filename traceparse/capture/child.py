"""``traceparse run``'s script in a child process of its own.

The script may crash the interpreter (a segfault in native code), end it with
``os._exit``, change the working directory or catch Ctrl-C: none of that may
cost the user the capture or its report. So the script runs in a child
process that calls :func:`traceparse.capture.script.run_script` (every hook
``run_script`` installs runs in the child, with the script), and this process
waits for it, then finds the capture by what appeared under the logdir,
whatever way the child ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from traceparse.capture.tflog import REAL_STDERR_ENV, LogSplit, PipeReader
from traceparse.errors import UsageError

__all__ = ["ChildResult", "child_main", "run_in_child"]

_CHILD = "import sys; from traceparse.capture.child import child_main; sys.exit(child_main())"


@dataclass(frozen=True)
class ChildResult:
    """How the script ended, and the run directory its capture is in (None: no capture)."""

    exit_code: int
    run_dir: Path | None
    signal_name: str | None = None  # the signal that killed the child, if one did
    interrupted: bool = False
    log_lines: int = 0  # TensorFlow's native log lines sent to ``tf_log``
    log_errors: int = 0  # of which errors or fatal


def _runs(logdir: Path) -> set[Path]:
    root = logdir / "plugins" / "profile"
    with contextlib.suppress(OSError):
        return {p for p in root.iterdir() if p.is_dir()}
    return set()


def run_in_child(
    script: str,
    args: Sequence[str],
    *,
    logdir: Path,
    delay_s: float | None = None,
    duration_s: float | None = None,
    tf_log: BinaryIO | None = None,
) -> ChildResult:
    """Run ``script`` under the profiler in a child process; wait for it, even through
    Ctrl-C or SIGTERM, which are passed on to the child (it stops its profiler,
    writes the capture and exits). With ``tf_log``, TensorFlow's native log lines
    go there instead of to stderr (``capture/tflog.py``)."""
    if not Path(script).expanduser().is_file():
        raise UsageError(f"no such script: {script}", path=script)
    before = _runs(logdir)
    fd, status_path = tempfile.mkstemp(prefix="traceparse-run-", suffix=".json")
    os.close(fd)
    config = json.dumps(
        {
            "script": os.path.abspath(os.path.expanduser(script)),
            "args": list(args),
            "logdir": os.fspath(logdir),
            "delay_s": delay_s,
            "duration_s": duration_s,
            "status": status_path,
        }
    )
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env["TRACEPARSE_RUN_CONFIG"] = config
    reader: PipeReader | None = None
    if tf_log is None:
        child = subprocess.Popen([sys.executable, "-c", _CHILD], env=env)
    else:
        child, reader = _start_splitting(env, tf_log)
    with _forwarding_signals(child) as received:
        code = child.wait()
    lines = errors = 0
    if reader is not None:
        reader.finish()
        lines, errors = reader.split.lines, reader.split.severe
    status = _read_status(status_path)
    if status is not None and "error" in status:
        error = UsageError(str(status["error"]))
        error.exit_code = int(str(status.get("exit_code", 2)))
        raise error
    run_dir = _run_dir_of(status, logdir, before)
    interrupted = bool(received) or code in (130, 128 + signal.SIGTERM)
    if code < 0:
        name = signal.Signals(-code).name
        return ChildResult(
            128 - code,
            run_dir,
            signal_name=name,
            interrupted=interrupted,
            log_lines=lines,
            log_errors=errors,
        )
    return ChildResult(code, run_dir, interrupted=interrupted, log_lines=lines, log_errors=errors)


def _start_splitting(
    env: dict[str, str], tf_log: BinaryIO
) -> tuple[subprocess.Popen[bytes], PipeReader]:
    """The child with its descriptor 2 on a pipe that this process splits, and the
    real stderr passed to it for its Python ``sys.stderr``."""
    read_end, write_end = os.pipe()
    real = os.dup(2)
    try:
        env[REAL_STDERR_ENV] = str(real)
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD], env=env, stderr=write_end, pass_fds=(real,)
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
        os.close(real)
    split = LogSplit(log=tf_log, out=open(os.dup(2), "wb", buffering=0))  # noqa: SIM115
    return child, PipeReader(read_end, split)


@contextlib.contextmanager
def _forwarding_signals(child: subprocess.Popen[bytes]) -> Iterator[list[int]]:
    """While the child runs, SIGTERM and SIGINT sent to this process go to the child
    (the caller keeps waiting for it); yields the signals received.

    A Ctrl-C typed at a terminal reaches the child by itself too; the child takes
    a second SIGINT within a second of the first for the same one
    (:func:`_interrupt_once`).
    """
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        with contextlib.suppress(OSError):  # the child may have ended already
            child.send_signal(signum)

    if threading.current_thread() is not threading.main_thread():
        yield received  # only the main thread may set handlers; nothing to forward
        return
    saved = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield received
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _run_dir_of(status: dict[str, object] | None, logdir: Path, before: set[Path]) -> Path | None:
    """The run directory the child's capture wrote: as the child reported it; when the
    child could not say (it died, or called ``os._exit``), the newest new run
    directory that holds a capture."""
    if status is not None and "run_dir" in status:
        reported = status["run_dir"]
        return Path(str(reported)) if reported else None
    new = sorted(_runs(logdir) - before, reverse=True)
    for run in new:
        with contextlib.suppress(OSError):
            if any(p.name.endswith(".xplane.pb") for p in run.iterdir()):
                return run
    return None


def _read_status(path: str) -> dict[str, object] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(1 << 20)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _write_status(path: str, data: dict[str, object]) -> None:
    with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def child_main() -> int:
    """The child: run the script as ``run_script`` does; exit with the script's code."""
    config = json.loads(os.environ.pop("TRACEPARSE_RUN_CONFIG"))
    _python_stderr_to_the_terminal()
    # As `python script.py` would: the script's directory first, not ours or the cwd.
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    _stop_profiler_on_os_exit()
    # SIGTERM (passed on by the parent, or sent here) ends the script as sys.exit
    # would, so that the profiler is stopped and the capture written.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    signal.signal(signal.SIGINT, _interrupt_once)
    from traceparse.capture.script import run_script
    from traceparse.errors import TraceparseError

    pid = os.getpid()
    try:
        result = run_script(
            config["script"],
            config["args"],
            logdir=config["logdir"],
            delay_s=config["delay_s"],
            duration_s=config["duration_s"],
        )
    except KeyboardInterrupt:
        return 130
    except TraceparseError as exc:
        # Reported by the parent, as every other error: one line, its exit code.
        if os.getpid() == pid:
            _write_status(config["status"], {"error": str(exc), "exit_code": exc.exit_code})
        return exc.exit_code
    sys.stdout.flush()
    if os.getpid() == pid:  # not a process the script forked
        run_dir = result.capture.run_dir
        _write_status(config["status"], {"run_dir": None if run_dir is None else str(run_dir)})
    return result.exit_code


def _python_stderr_to_the_terminal() -> None:
    """Where the parent splits descriptor 2 (TensorFlow's native logs), Python's
    ``sys.stderr`` (the script's prints, tracebacks, warnings) writes to the real
    stderr the parent passed, so it stays a terminal when it was one."""
    fd = os.environ.pop(REAL_STDERR_ENV, None)
    if fd is None or not fd.isdigit():
        return
    os.set_inheritable(int(fd), False)  # not the script's subprocesses'
    old = sys.stderr
    stream = open(  # noqa: SIM115 - the process's stderr from now on
        int(fd),
        "w",
        buffering=1,
        encoding=getattr(old, "encoding", None) or "utf-8",
        errors=getattr(old, "errors", None) or "backslashreplace",
    )
    with contextlib.suppress(Exception):
        old.flush()
    sys.stderr = stream


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


_last_interrupt = [-1e9]


def _interrupt_once(_signum: int, _frame: object) -> None:
    """Ctrl-C as usual (``KeyboardInterrupt``), but one SIGINT within a second of the
    last is the same Ctrl-C, sent by the terminal and passed on by the parent:
    raising twice would interrupt the profiler's stop."""
    now = time.monotonic()
    if now - _last_interrupt[0] < 1.0:
        return
    _last_interrupt[0] = now
    raise KeyboardInterrupt


def _stop_profiler_on_os_exit() -> None:
    """``os._exit`` in the script skips every cleanup: stop the profiler first, so
    the capture is written (in this process only: a process the script forked
    writes no capture of its own)."""
    real_exit = os._exit
    pid = os.getpid()

    def exit_after_stopping(code: int) -> None:
        tf = sys.modules.get("tensorflow")
        if tf is not None and os.getpid() == pid:
            with contextlib.suppress(Exception):
                tf.profiler.experimental.stop()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        real_exit(code)

    os._exit = exit_after_stopping  # type: ignore[assignment]
