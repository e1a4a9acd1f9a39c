"""What capturing needs before it starts: TensorFlow, and arguments that make sense.

Every check raises ``UsageError`` (a wrong argument) or ``CaptureError``
(TensorFlow missing or unsupported) before any profiler starts.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from types import ModuleType

from traceparse.errors import CaptureError, DependencyError, UsageError
from traceparse.version import TENSORFLOW, check

__all__ = [
    "TENSORFLOW_MISSING",
    "check_level",
    "check_logdir",
    "check_seconds",
    "enable_onednn",
    "import_tensorflow",
]

TENSORFLOW_MISSING = (
    f"tensorflow is not installed, but capturing needs {TENSORFLOW.spec()}: {TENSORFLOW.fix} "
    "(analysing existing captures does not need it)"
)


def import_tensorflow() -> ModuleType:
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


def check_level(name: str, value: object, highest: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be an integer, got {value!r}")
    if value < 0 or (highest is not None and value > highest):
        allowed = f"0 to {highest}" if highest is not None else "0 or more"
        raise UsageError(f"{name} must be {allowed}, got {value}")
    return value


def check_batch_size(value: object) -> int | None:
    """A batch size given to a capture: None, or a positive integer TensorFlow can hold."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise UsageError(
            f"batch_size must be the number of examples in a step (a positive integer), "
            f"got {value!r}"
        )
    return value


def check_seconds(name: str, value: object, *, allow_zero: bool) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{name} must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        bound = "0 or more" if allow_zero else "more than 0"
        raise UsageError(f"{name} must be a finite number of seconds, {bound}, got {value!r}")
    return seconds


def check_logdir(
    logdir: str | os.PathLike[str], *, create: bool = False, what: str = "logdir"
) -> Path:
    """``logdir`` as a local path; ``UsageError`` when it cannot hold a capture.

    ``what`` names it in messages (``--logdir`` for the command line). With
    ``create`` the path is made absolute (a ``chdir`` later moves nothing)
    and created, and it must be a directory this user can write to.
    """
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
    if not create:
        return path
    path = Path(os.path.abspath(path))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{what} {path}: cannot create it ({exc.strerror or exc}); choose another", path
        ) from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: not a directory this user can write to", path)
    return path


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
