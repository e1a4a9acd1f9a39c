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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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


def check_logdir(logdir: str | os.PathLike[str]) -> Path:
    """The logdir as an absolute path, created; ``UsageError`` if it cannot be written."""
    path = Path(os.path.abspath(os.fspath(logdir)))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"--logdir {path}: cannot create it ({exc.strerror or exc}); choose another",
            path,
        ) from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--logdir {path}: not a directory this user can write to", path)
    return path


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
) -> ChildResult:
    """Run ``script`` under the profiler in a child process; wait for it, even through Ctrl-C."""
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
    child = subprocess.Popen([sys.executable, "-c", _CHILD], env=env)
    interrupted = False
    while True:
        try:
            code = child.wait()
            break
        except KeyboardInterrupt:
            # The terminal sent SIGINT to the child too: it stops its profiler,
            # writes the capture and exits; wait for that.
            interrupted = True
    failure = _read_status(status_path)
    if failure is not None:
        error = UsageError(str(failure["error"]))
        error.exit_code = int(str(failure.get("exit_code", 2)))
        raise error
    new = sorted(_runs(logdir) - before)
    run_dir = new[-1] if new else None
    if code < 0:
        name = signal.Signals(-code).name
        return ChildResult(128 - code, run_dir, signal_name=name, interrupted=interrupted)
    return ChildResult(code, run_dir, interrupted=interrupted or code == 130)


def _read_status(path: str) -> dict[str, object] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    return data if isinstance(data, dict) and "error" in data else None


def child_main() -> int:
    """The child: run the script as ``run_script`` does; exit with the script's code."""
    config = json.loads(os.environ.pop("TRACEPARSE_RUN_CONFIG"))
    # As `python script.py` would: the script's directory first, not ours or the cwd.
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    _stop_profiler_on_os_exit()
    from traceparse.capture.script import run_script
    from traceparse.errors import TraceparseError

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
        with open(config["status"], "w", encoding="utf-8") as handle:
            json.dump({"error": str(exc), "exit_code": exc.exit_code}, handle)
        return exc.exit_code
    sys.stdout.flush()
    return result.exit_code


def _stop_profiler_on_os_exit() -> None:
    """``os._exit`` in the script skips every cleanup: stop the profiler first, so
    the capture is written."""
    real_exit = os._exit

    def exit_after_stopping(code: int) -> None:
        tf = sys.modules.get("tensorflow")
        if tf is not None:
            with contextlib.suppress(Exception):
                tf.profiler.experimental.stop()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        real_exit(code)

    os._exit = exit_after_stopping  # type: ignore[assignment]
