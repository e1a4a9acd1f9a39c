"""Find captures: a file, a run directory, or a logdir at any depth.

The profiler writes ``<logdir>/plugins/profile/<run>/<host>.xplane.pb``; Keras'
TensorBoard callback adds a ``train/`` level; older TensorFlow also left
pre-converted ``<host>.memory_profile.json.gz`` files. Paths may be local or
fsspec URLs (``gs://``, ``s3://``, ``memory://``...).
"""

from __future__ import annotations

import gzip
import io
import mmap
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from traceparse.errors import (
    CaptureNotFoundError,
    CaptureTooLargeError,
    CorruptCaptureError,
    InputError,
    NoCaptureError,
)
from traceparse.files.atomic import note_input
from traceparse.files.names import printable
from traceparse.files.wrong import what_directory, what_file

# File name suffix -> format, most preferred first (a run with both an
# .xplane.pb and a pre-converted file is read from the .xplane.pb).
FORMATS = {
    ".xplane.pb": "xplane",
    ".memory_profile.json.gz": "memory_profile.json",
    ".memory_profile.json": "memory_profile.json",
    ".memory_profile.pb": "memory_profile",
}
# A decompressed capture larger than this is refused instead of filling memory.
# Only pre-converted memory_profile JSON is gzipped; xprof keeps at most 1000
# timeline points plus the peak step in it, so real files are a few MiB, and
# parsing JSON takes ten times its size in memory and more.
MAX_DECOMPRESSED_BYTES = 256 * 2**20
# protobuf cannot parse a message of 2 GiB or more (an .xplane.pb, a binary
# memory_profile); a larger file is refused before it is read.
MAX_PROTOBUF_BYTES = 2**31 - 1
# The records written beside a capture (a variable inventory and its kin), their
# file names and limits, are in one registry: core.sidecars.SIDECARS.
# gzip is expanded this much at a time, so the limit holds before memory fills.
_GZIP_CHUNK = 1 << 20
_RUN_NAME = re.compile(r"^\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}")


@dataclass(frozen=True, order=True)
class CaptureFile:
    """One host's capture file within a run."""

    run_dir: str
    host: str
    path: str
    format: str

    @property
    def run(self) -> str:
        """The run's name: its directory, a timestamp like ``2026_11_29_14_04_41``."""
        return printable(self.run_dir.rstrip("/").rsplit("/", 1)[-1])


def is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _filesystem(path: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it) for a URL."""
    try:
        import fsspec
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError(
            f"{path}: reading URLs needs fsspec: pip install 'traceparse[remote]'", path
        ) from exc
    try:
        return fsspec.core.url_to_fs(path)
    except (ImportError, ValueError) as exc:
        raise InputError(
            f"{path}: cannot open this URL ({exc}); install the fsspec plugin for its scheme",
            path,
        ) from exc


def split_name(name: str) -> tuple[str, str] | None:
    """(host, format) from a capture file name, or None when it is not one."""
    for suffix, fmt in FORMATS.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], fmt
    return None


def find_captures(path: str | os.PathLike[str]) -> list[CaptureFile]:
    """Every capture under ``path``, oldest run first, hosts in name order.

    Raises ``CaptureNotFoundError`` when the path does not exist and
    ``NoCaptureError`` when it holds no capture.
    """
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://") :]
    if is_url(text):
        fs, root = _filesystem(text)
        protocol = text.split("://", 1)[0]
        if not fs.exists(root):
            raise CaptureNotFoundError(f"{text}: no such file or directory", text)
        files = [root] if fs.isfile(root) else sorted(fs.find(root))
        files = [f if "://" in f else f"{protocol}://{f}" for f in files]
        is_file = len(files) == 1 and files[0].rstrip("/").endswith(text.split("://", 1)[1])
    else:
        if not os.path.exists(text):
            try:
                os.stat(text)
            except PermissionError:
                raise InputError(
                    f"{text}: permission denied; give this user access to it", text
                ) from None
            except OSError:
                pass
            raise CaptureNotFoundError(
                f"{text}: no such file or directory; give a logdir, a run directory "
                "(…/plugins/profile/<run>) or an .xplane.pb file",
                text,
            )
        # Anything but a directory is the file it was given as: a FIFO or a device
        # is then refused by the reader as what it is, not walked as an empty tree.
        is_file = not os.path.isdir(text)
        denied: list[str] = []
        files = [text] if is_file else sorted(_walk(text, denied))
        if not files and denied:
            raise InputError(
                f"{denied[0]}: permission denied; traceparse cannot look for captures "
                "there. Give this user read access to it, or run as its owner",
                denied[0],
            )
    if is_file:
        name = files[0].rstrip("/").rsplit("/", 1)[-1]
        if split_name(name) is None and (wrong := what_file(files[0], not is_url(text))):
            raise InputError(f"{text}: {wrong}", text)
        host, fmt = split_name(name) or (name.split(".", 1)[0], "xplane")
        return [CaptureFile(_parent(files[0]), printable(host), files[0], fmt)]
    return _choose(files, text, lambda: all_files(text, is_url(text)))


def _walk(root: str, denied: list[str]) -> Iterator[str]:
    def unreadable(error: OSError) -> None:
        if isinstance(error, PermissionError) and error.filename:
            denied.append(printable(os.fspath(error.filename)))

    for directory, subdirs, names in os.walk(root, onerror=unreadable):
        subdirs.sort()
        for name in names:
            if split_name(name):
                yield os.path.join(directory, name)


def all_files(root: str, url: bool, limit: int = 10_000) -> list[str]:
    """Up to ``limit`` paths of files under ``root`` (to say what a directory holds)."""
    if url:
        return []  # the listing was the captures' search already: say nothing more
    found: list[str] = []
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()
        found += [os.path.join(directory, n) for n in names]
        if len(found) >= limit:
            break
    return found


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0] if "/" in path else "."


def _choose(files: list[str], root: str, everything: Callable[[], list[str]]) -> list[CaptureFile]:
    best: dict[tuple[str, str], CaptureFile] = {}
    rank = {fmt: i for i, fmt in enumerate(dict.fromkeys(FORMATS.values()))}
    for file in files:
        parsed = split_name(file.rstrip("/").rsplit("/", 1)[-1])
        if parsed is None:
            continue
        host, fmt = parsed
        capture = CaptureFile(_parent(file), printable(host), file, fmt)
        key = (capture.run_dir, host)
        if key not in best or rank[fmt] < rank[best[key].format]:
            best[key] = capture
    if not best:
        why = what_directory(root, everything())
        raise NoCaptureError(f"{root}: no profiler capture here: {why}", root)
    return sorted(best.values(), key=_run_order)


def _run_order(capture: CaptureFile) -> tuple[str, str, str]:
    # Run directories are named by their start time, so names sort oldest first
    # across logdirs; anything else sorts after them by path.
    name = capture.run
    stamp = name if _RUN_NAME.match(name) else "~" + name
    return stamp, capture.run_dir, capture.host


def sidecar(capture: CaptureFile, suffix: str) -> CaptureFile | None:
    """The file ``<host><suffix>`` beside ``capture`` (a record of ``core.sidecars``), if anything
    is there: a FIFO, a directory or a link loop too, so that the reader can say why
    it was not read (``read_bytes`` refuses it without reading)."""
    path = f"{capture.run_dir}/{capture.host}{suffix}"
    try:
        if is_url(path):
            fs, inner = _filesystem(path)
            found = bool(fs.exists(inner))
        else:
            found = os.path.lexists(path)
    except (OSError, InputError):
        found = False
    return CaptureFile(capture.run_dir, capture.host, path, suffix.strip(".")) if found else None


# Local captures this large are read into an anonymous private mapping rather
# than a bytes object: the decoder hands its pages back to the system as it
# passes them (decode/xspace.py), so the file does not stay in memory beside the
# tables it becomes. Smaller files are not worth a mapping.
RELEASABLE_BYTES = 64 * 2**20


def read_bytes(
    capture: CaptureFile,
    limit: int = MAX_DECOMPRESSED_BYTES,
    scan: Callable[[bytes], None] | None = None,
) -> bytes:
    """The file's bytes, gunzipped when its name ends in .gz, within ``limit``.

    The file is opened read-only. Its size is checked before it is read, and
    gzip is expanded a chunk at a time, so an input past ``limit`` raises
    ``CaptureTooLargeError`` without first filling memory. ``scan`` sees each
    expanded chunk (the whole file when it is not gzip) before the next is
    read: a reader's budget (``decode.limits.JsonBudget``) raises there, so a
    small file that expands into too much work is refused early.
    """
    data = read_buffer(capture, limit, releasable=False, scan=scan)
    assert isinstance(data, bytes)
    return data


def read_buffer(
    capture: CaptureFile,
    limit: int = MAX_DECOMPRESSED_BYTES,
    *,
    releasable: bool = True,
    scan: Callable[[bytes], None] | None = None,
) -> bytes | mmap.mmap:
    """``read_bytes``; with ``releasable``, a local file of ``RELEASABLE_BYTES``
    or more (not gzip) comes in a private anonymous mapping that the reader may
    give back page by page (``mmap.madvise(MADV_DONTNEED)``) once it has read
    them: what was given back then reads as zeros, so only a reader that owns
    the buffer may do it."""
    path = capture.path
    data: bytes | mmap.mmap
    try:
        if is_url(path):
            fs, inner = _filesystem(path)
            _check_size(path, fs.size(inner), limit)
            data = fs.cat_file(inner)
        else:
            data = _read_local(path, limit, releasable and not path.endswith(".gz"))
    except FileNotFoundError as exc:
        raise CaptureNotFoundError(f"{path}: the file disappeared while reading it", path) from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})", path) from exc
    _check_size(path, len(data), limit)
    if not path.endswith(".gz"):
        if scan is not None and isinstance(data, bytes):  # read_bytes never maps
            scan(data)
        return data
    assert isinstance(data, bytes)  # gzip files are never mapped
    chunks: list[bytes] = []
    total = 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            while chunk := stream.read(_GZIP_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise CaptureTooLargeError(
                        f"{path}: expands past {_size(limit)} when decompressed "
                        "(a gzip bomb, or not a memory profile); refusing to read it",
                        path,
                    )
                if scan is not None:
                    scan(chunk)
                chunks.append(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise CorruptCaptureError(
            f"{path}: not a readable gzip file ({exc}); copy it again", path
        ) from exc
    return b"".join(chunks)


def _read_local(path: str, limit: int, releasable: bool) -> bytes | mmap.mmap:
    # A FIFO or a device (a link to /dev/zero, say) would block or never end: look
    # before opening, and open without blocking, so that a FIFO put there after the
    # look is refused too (by the descriptor's own type).
    kind = not_regular(os.stat(path).st_mode)
    if kind is None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with open(fd, "rb") as handle:
            info = os.fstat(fd)
            kind = not_regular(info.st_mode)
            if kind is None:
                _check_size(path, info.st_size, limit)
                note_input(info)  # so that no output of this process replaces it
                if releasable and info.st_size >= RELEASABLE_BYTES:
                    return _read_mapped(handle, info.st_size)
                # At most one byte past the size it had: a file that is still growing
                # cannot take the read past the limit (the caller's check catches it).
                return handle.read(info.st_size + 1)
    raise InputError(
        f"{path}: not a regular file ({kind}); traceparse reads files only: "
        "copy the capture to a file and give that",
        path,
    )


def _read_mapped(handle: io.BufferedReader, size: int) -> bytes | mmap.mmap:
    """The file's ``size`` bytes in a private anonymous mapping (``read_buffer``);
    plain bytes if the file changed size meanwhile, as ``handle.read`` gives."""
    buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    with memoryview(buffer) as view:
        got = 0
        while got < size and (n := handle.readinto(view[got:])):
            got += n
    extra = handle.read(1)
    if got == size and not extra:
        return buffer
    with buffer:  # shrank or grew while read: what a plain read would have given
        return buffer[:got] + extra


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file ("a FIFO"...), else None."""
    if stat.S_ISREG(mode):
        return None
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "another kind of file"


def _check_size(path: str, size: int | None, limit: int) -> None:
    if size is None or size <= limit:
        return
    why = (
        " (protobuf cannot parse a message of 2 GiB or more)" if limit == MAX_PROTOBUF_BYTES else ""
    )
    raise CaptureTooLargeError(
        f"{path}: {_size(size)} is past the {_size(limit)} traceparse reads from "
        f"one capture file{why}; capture fewer steps (a shorter profiling window) and "
        "analyse those",
        path,
    )


def _size(n: int) -> str:
    """A size for an error message: whole binary units where exact (the limits), else bytes.

    Not output.units.format_bytes: finding files is the first stage and imports no later one.
    """
    for unit, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n:,} bytes"
