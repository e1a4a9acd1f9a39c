"""Write an output file without damaging anything that is not ours.

A regular file is written atomically: readers see the old content or the new,
never half of it. What is at the path decides how:

- nothing, or a regular file: a temporary file beside it, fsynced, renamed over
  it (the temporary's name starts with ``TEMPORARY_PREFIX``, so a sweep after
  a killed run removes only files this tool made);
- a symbolic link: followed, and the file it names is written as above (the
  link stays a link);
- ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``: written
  to that open descriptor, at its offset (``-o /dev/stdout >> log`` appends);
- a character device or a FIFO: opened and written, never replaced;
- a block device, a socket, a directory, one of the files this process read
  as input: refused with a ``UsageError`` (exit code 2).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile

from traceparse.errors import UsageError
from traceparse.files.names import printable

__all__ = ["TEMPORARY_PREFIX", "atomic_write", "is_own_temporary", "note_input"]

# Every temporary file this tool writes starts with this, so only those are swept.
TEMPORARY_PREFIX = ".traceparse-tmp."
_TEMPORARY_SUFFIX = ".tmp"
_MAX_LINKS = 40  # as the kernel's ELOOP limit
_STREAM = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/(?P<pid>\d+)/fd)/(?P<fd>\d+)$")
_NAMED_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}

# (device, inode, size, mtime) of every local file read as input by this process.
_inputs: set[tuple[int, int, int, int]] = set()


def note_input(info: os.stat_result) -> None:
    """Remember a file read as input (its ``stat``), so no output replaces it."""
    _inputs.add(_identity(info))


def is_own_temporary(name: str) -> bool:
    """Whether a file name is one of this tool's temporary files."""
    return name.startswith(TEMPORARY_PREFIX) and name.endswith(_TEMPORARY_SUFFIX)


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``path`` as the module docstring says.

    Parent directories are created. On any failure the temporary file is
    removed and ``path`` is left as it was. ``str`` data is written as UTF-8.
    Raises ``UsageError`` for a target that cannot be written safely, and
    ``OSError`` when writing fails.
    """
    target = os.fspath(path)
    payload = _encode(data) if isinstance(data, str) else bytes(data)
    if target.endswith(("/", os.sep)):
        what = (
            "is a directory"
            if os.path.isdir(target)
            else "ends in a slash, so it names a directory"
        )
        raise UsageError(f"{target}: {what}; give a file name", target)
    resolved, stream = _follow_links(target)
    if stream is not None:
        _write_descriptor(stream, payload)
        return
    try:
        info: os.stat_result | None = os.stat(resolved)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        raise _under_a_file(target) from None
    if info is not None:
        _check_kind(target, info)
        if _identity(info) in _inputs:
            raise UsageError(
                f"{target}: is one of the inputs; writing there would destroy it. "
                "Choose another output file",
                target,
            )
        if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
            _write_device(resolved, payload)
            return
    _replace(resolved, payload, target)


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a file name that was not UTF-8, somewhere in the text
        return printable(text).encode("utf-8")


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _follow_links(target: str) -> tuple[str, int | None]:
    """The path the output really goes to, and the descriptor when it is a stream."""
    current = os.path.abspath(target)
    for _ in range(_MAX_LINKS):
        fd = _stream_descriptor(current)
        if fd is not None:
            return current, fd
        try:
            link = os.readlink(current)
        except (OSError, ValueError):
            return current, None  # not a link (or not there)
        current = os.path.join(os.path.dirname(current), link)
    raise UsageError(f"{target}: too many levels of symbolic links", target)


def _stream_descriptor(path: str) -> int | None:
    normal = os.path.normpath(path)
    if normal in _NAMED_STREAMS:
        return _NAMED_STREAMS[normal]
    match = _STREAM.match(normal)
    if match is None:
        return None
    if match.group("pid") is not None and int(match.group("pid")) != os.getpid():
        return None  # another process's descriptor: an ordinary path to follow
    return int(match.group("fd"))


def _check_kind(target: str, info: os.stat_result) -> None:
    mode = info.st_mode
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return
    if stat.S_ISDIR(mode):
        raise UsageError(f"{target}: is a directory; give a file name", target)
    kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else None
    raise UsageError(
        f"{target}: is {kind or 'not a regular file'}; traceparse does not write there. "
        "Choose a file",
        target,
    )


def _under_a_file(target: str) -> UsageError:
    return UsageError(
        f"{target}: a part of the path is a file, not a directory; choose another output",
        target,
    )


def _write_descriptor(fd: int, payload: bytes) -> None:
    """Write to an already open descriptor (stdout), keeping its offset and mode."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            if stream.fileno() == fd:
                stream.flush()
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_device(path: str, payload: bytes) -> None:
    """A character device or FIFO: opened for writing as it is, never created or replaced."""
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    try:
        _write_descriptor(fd, payload)
    finally:
        os.close(fd)


def _replace(path: str, payload: bytes, target: str) -> None:
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _under_a_file(target) from None
    # Keep the mode an ordinary open() would give; mkstemp creates files 0600.
    mode = _default_mode(path)
    # The target's name, shortened so that the temporary's name stays within NAME_MAX.
    name = os.path.basename(path)[:100]
    fd, tmp = tempfile.mkstemp(
        prefix=f"{TEMPORARY_PREFIX}{name}.", suffix=_TEMPORARY_SUFFIX, dir=directory
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
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
