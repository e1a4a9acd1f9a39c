"""Workers stop when the batch that started them is gone.

A batch parent killed with ``kill -9`` (or by the OOM killer) cannot stop its
workers itself. Left alone they would go on writing into the output directory
without its lock, and then wait forever on a pipe that no one writes. So each
worker watches its parent in three ways:

- on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker
  the moment its parent exits;
- everywhere, a daemon thread that checks the parent's id every ``POLL_S``
  seconds and ends the process when it changed (the worker was re-parented);
- before each write, ``stop_if_orphaned`` makes the same check, so an orphan
  never writes, even between two polls.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

__all__ = ["POLL_S", "stop_if_orphaned", "watch_parent"]

POLL_S = 0.5
_PR_SET_PDEATHSIG = 1
_EXIT_ORPHANED = 75  # EX_TEMPFAIL: nothing was wrong with the task

_parent: int | None = None


def watch_parent(parent: int, *, poll_s: float = POLL_S, death_signal: bool = True) -> None:
    """Watch ``parent`` (the pid that started this process) from now on."""
    global _parent
    _parent = parent
    if death_signal:
        _set_death_signal()
    stop_if_orphaned()  # it may have died before the death signal was set
    threading.Thread(target=_poll, args=(poll_s,), name="traceparse-parent", daemon=True).start()


def stop_if_orphaned() -> None:
    """End this process at once when the parent it was started by is gone."""
    if _parent is not None and os.getppid() != _parent:
        os._exit(_EXIT_ORPHANED)


def _poll(poll_s: float) -> None:
    while True:
        time.sleep(poll_s)
        stop_if_orphaned()


def _set_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # the polling thread still covers it
