"""Record the exception a capture ended in: ``<host>.failure.json`` beside the capture.

When the code under ``traceparse.profile()``, ``Capture.step()``, the Keras
``MemoryCallback`` or ``traceparse run`` raises (a ``ResourceExhaustedError``
above all), the profiler is stopped, the capture written, and the exception
described here is written beside each host's capture, so that the analysis
can say where the job failed and what held the memory then. The format is
``traceparse.decode.failure``'s; that module also parses the message.

Nothing here may change the exception or hide it: describing it never raises
(a broken ``__str__`` gives a placeholder), and a record that cannot be written
is one line on stderr.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any

from traceparse.core.sidecars import FAILURE

# The reader's names, so that writer and reader cannot disagree.
from traceparse.decode.failure import FORMAT, MAX_FRAMES, MAX_MESSAGE_CHARS, VERSION

__all__ = ["describe_failure", "write_failure"]


def describe_failure(exc: BaseException, *, way: str, step: int | None) -> dict[str, Any]:
    """The record of ``exc`` (caught now) as JSON-able data; never raises."""
    failed_at = time.time_ns()
    message = _message(exc)
    tf = sys.modules.get("tensorflow")
    version = getattr(tf, "__version__", None) if tf is not None else None
    return {
        "format": FORMAT,
        "version": VERSION,
        "tensorflow": version if isinstance(version, str) else None,
        "way": way,
        "exception": {
            "type": type(exc).__name__,
            "module": type(exc).__module__,
            # The head: TensorFlow puts the request first, its graph stack after.
            "message": message[:MAX_MESSAGE_CHARS],
        },
        "message_bytes": len(message),
        "step": step if isinstance(step, int) and step >= 0 else None,
        "failed_at_ns": failed_at,
        "traceback": _frames(exc),
    }


def write_failure(record: dict[str, Any], run_dir: str | os.PathLike[str], host: str) -> str:
    """Write the record beside ``<run_dir>/<host>.xplane.pb``; return its path."""
    return FAILURE.write(record, run_dir, host)


def _message(exc: BaseException) -> str:
    # A TensorFlow OpError keeps the message without the class name.
    for get in (lambda: getattr(exc, "message", None), lambda: str(exc)):
        try:
            text = get()
        except Exception:  # a hostile or broken __str__ / property
            continue
        if isinstance(text, str):
            return text
    return f"<{type(exc).__name__} whose message could not be read>"


def _frames(exc: BaseException) -> list[dict[str, Any]]:
    """The traceback's frames, outermost first (the last ``MAX_FRAMES``)."""
    try:
        summary = traceback.extract_tb(exc.__traceback__)
    except Exception:  # a frame whose source cannot be read
        return []
    return [
        {"file": frame.filename, "line": frame.lineno, "function": frame.name}
        for frame in list(summary)[-MAX_FRAMES:]
    ]
