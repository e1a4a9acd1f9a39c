"""Write a file so that readers see the old content or the new, never half of it."""

from __future__ import annotations

import contextlib
import os
import tempfile

__all__ = ["atomic_write"]


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``path`` atomically.

    The bytes go to a temporary file in the same directory (so the final
    ``os.replace`` is a rename on one filesystem), are fsynced, then replace
    ``path``. Parent directories are created. On any failure the temporary file
    is removed and ``path`` is left as it was. ``str`` data is written as UTF-8.
    """
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    os.makedirs(directory, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    # Keep the mode an ordinary open() would give; mkstemp creates files 0600.
    mode = _default_mode(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _default_mode(target: str) -> int:
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_directory(directory: str) -> None:
    # Makes the rename itself durable; not possible on every platform (Windows).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
