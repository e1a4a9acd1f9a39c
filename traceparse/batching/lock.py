"""One batch at a time per output directory, and no leftovers from an interrupted one.

Every file is written under a unique temporary name and renamed into place, so
no reader ever sees half a file. The lock adds that a second batch into the same
directory is refused at once instead of interleaving its summaries with the
first one's. It is an advisory ``flock`` that the kernel drops when the process
ends, so a killed batch never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

from traceparse.errors import UsageError
from traceparse.files.atomic import is_own_temporary
from traceparse.files.confined import own_file

__all__ = ["LOCK_NAME", "output_lock", "sweep_temporaries"]

LOCK_NAME = ".traceparse-batch.lock"


@contextlib.contextmanager
def output_lock(outdir: str) -> Iterator[None]:
    """Hold the output directory's lock; ``UsageError`` if another batch holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: atomic renames still keep files whole
        yield
        return
    path = own_file(os.path.join(outdir, LOCK_NAME))  # never a planted link or FIFO
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise UsageError(
            f"{outdir}: cannot take the batch lock {LOCK_NAME} ({exc.strerror or exc}); "
            "remove it or choose another -o",
            outdir,
        ) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            raise UsageError(
                f"{outdir}: another traceparse batch is writing here{holder}; "
                "wait for it to finish or choose another -o",
                outdir,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return f" ({text})" if text else ""


def sweep_temporaries(outdir: str) -> int:
    """Remove the temporary files an interrupted batch left (``atomic_write``'s).

    Only names with this tool's own prefix (``atomic.TEMPORARY_PREFIX``) are
    removed: anyone else's ``.*.tmp`` in a shared directory stays. Call it only
    while holding the lock. Returns how many were removed.
    """
    removed = 0
    captures = os.path.join(outdir, "captures")
    directories = [outdir]
    # Real directories only: a link planted under OUTDIR leads elsewhere.
    with contextlib.suppress(OSError):
        if not os.path.islink(captures):
            directories += [
                entry.path for entry in os.scandir(captures) if entry.is_dir(follow_symlinks=False)
            ]
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if is_own_temporary(name):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, name))
                    removed += 1
    return removed
