"""A capture's stored result, and the fingerprint that says whether it is still valid.

``OUTDIR/captures/<name>/result.json`` holds the input's fingerprint, the
traceparse version and the summary rows. It is written atomically and after
the reports, so its presence vouches for the reports beside it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from typing import Any

from traceparse.batching.records import Fingerprint, Outcome, Task
from traceparse.core.sidecars import SIDECARS
from traceparse.errors import CaptureNotFoundError, InputError
from traceparse.files.atomic import atomic_write
from traceparse.files.confined import own_file
from traceparse.files.discover import CaptureFile, is_url, not_regular
from traceparse.report.formats import named

__all__ = [
    "RESULT_NAME",
    "Fingerprint",
    "fingerprint",
    "input_fingerprint",
    "report_name",
    "reuse",
    "store",
    "stored",
    "stored_quietly",
]

# Bump when the stored rows change shape, so old results are redone, not misread.
SCHEMA = 1
RESULT_NAME = "result.json"

# fsspec `info()` keys that change when an object is rewritten, by backend:
# local and sftp (mtime), s3 (LastModified, ETag), gcs (updated, generation,
# md5Hash, crc32c), azure (last_modified, etag), memory (created).
_VERSION_KEYS = (
    "mtime",
    "LastModified",
    "ETag",
    "updated",
    "generation",
    "md5Hash",
    "crc32c",
    "last_modified",
    "etag",
    "created",
)
_CHUNK = 1 << 20
# A result.json holds a row per allocator (at most decode.MAX_ALLOCATORS): a
# few KiB. A larger one is damaged or made up and is redone, never read.
MAX_RESULT_BYTES = 4 * 2**20
_INT64 = (-(2**63), 2**63 - 1)


def report_name(fmt: str) -> str:
    """The file a capture's report in format ``fmt`` is written to: ``report.md``..."""
    return "report" + named(fmt).suffix


# -- fingerprints ----------------------------------------------------------------


def input_fingerprint(capture: CaptureFile, how: Fingerprint) -> dict[str, Any]:
    """The fingerprint of every file the analysis of ``capture`` reads: the capture
    and every record beside it that the registry (``core.sidecars.SIDECARS``) marks
    for the fingerprint, under the record's name (adding, changing or removing one
    changes what the analysis says). Raises ``InputError`` as ``fingerprint``."""
    found = fingerprint(capture.path, how)
    for entry in SIDECARS:
        beside = entry.beside(capture) if entry.fingerprint else None
        if beside is not None:
            found[entry.name] = _sidecar_fingerprint(beside.path, how, entry.limit)
    return found


def _sidecar_fingerprint(path: str, how: Fingerprint, limit: int) -> dict[str, Any]:
    """Like ``fingerprint``, but a record that cannot be read is described, not an
    error (the analysis ignores it with a diagnostic). Only a regular file within
    the record's limit (``limit`` bytes) is ever hashed, so a FIFO cannot block the
    check."""
    if is_url(path):
        try:
            return fingerprint(path, how)
        except InputError as exc:
            return {"unreadable": str(exc)}
    try:
        info = os.stat(path)
    except OSError as exc:
        return {"unreadable": exc.strerror or str(exc)}
    kind = not_regular(info.st_mode)
    if kind is not None:
        return {"kind": kind}
    if how == "hash" and info.st_size <= limit:
        try:
            return fingerprint(path, how)
        except InputError as exc:
            return {"unreadable": str(exc)}
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns}


def fingerprint(path: str, how: Fingerprint) -> dict[str, Any]:
    """What identifies this version of the input: size and mtime, or a content hash.

    Opens nothing for writing, and nothing but a regular file. Raises ``InputError``
    when the file cannot be read.
    """
    try:
        if is_url(path):
            return _remote_fingerprint(path, how)
        info = os.stat(path)
        kind = not_regular(info.st_mode)
        if kind is not None:  # a FIFO would block the hash, a device never end it
            raise InputError(f"{path}: not a regular file ({kind})", path)
        if how == "hash":
            with open(path, "rb") as handle:
                return _hash(handle)
        return {"size": info.st_size, "mtime_ns": info.st_mtime_ns}
    except FileNotFoundError as exc:
        raise CaptureNotFoundError(
            f"{path}: the file disappeared before it was read", path
        ) from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})", path) from exc


def _remote_fingerprint(url: str, how: Fingerprint) -> dict[str, Any]:
    import fsspec

    fs, inner = fsspec.core.url_to_fs(url)
    if how == "hash":
        with fs.open(inner, "rb") as handle:
            return _hash(handle)
    info = fs.info(inner)
    found = {"size": info.get("size")}
    found.update({key: str(info[key]) for key in _VERSION_KEYS if info.get(key) is not None})
    return found


def _hash(handle: Any) -> dict[str, Any]:
    digest = hashlib.sha256()
    size = 0
    while chunk := handle.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


# -- the stored result -----------------------------------------------------------


def reuse(task: Task) -> Outcome | None:
    """The stored outcome when it is still valid for the input as it is now, else None.

    Never raises: anything unexpected means "analyse it again".
    """
    if task.force:
        return None
    try:
        current = input_fingerprint(task.capture, task.fingerprint)
        return stored(task, current)
    except Exception:
        return None


def stored(task: Task, current: dict[str, Any]) -> Outcome | None:
    from traceparse.version import __version__

    data = _read_result(task)
    if not isinstance(data, dict):
        return None
    if (
        data.get("schema") != SCHEMA
        or data.get("traceparse") != __version__
        or data.get("path") != task.capture.path
        or data.get("fingerprint") != current
    ):
        return None
    # The reports asked for now must all be there (an earlier batch may have made
    # fewer). A capture that failed has none.
    if data.get("status") != "error":
        for fmt in task.reports:
            if not os.path.isfile(os.path.join(task.directory, report_name(fmt))):
                return None
    if not _well_formed(data):
        return None  # damaged, though its fingerprint matches: analyse it again
    outcome: Outcome = {
        "path": task.capture.path,
        "status": data["status"],
        "message": data.get("message"),
        "rows": list(data.get("rows", [])),
        "reused": True,
    }
    return outcome


def _read_result(task: Task) -> Any:
    """The stored record, or None when there is none to trust: the task's directory
    or ``result.json`` is a link, a FIFO, a device (refused without opening it), or
    the file is too large or not JSON (then the capture is analysed again)."""
    path = os.path.join(task.directory, RESULT_NAME)
    try:
        for level in (os.path.dirname(task.directory), task.directory):
            if not stat.S_ISDIR(os.lstat(level).st_mode):  # a planted link
                return None
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RESULT_BYTES:
            return None
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the lstat
                return None
            text = handle.read(MAX_RESULT_BYTES + 1)
        if len(text) > MAX_RESULT_BYTES:
            return None
        return json.loads(text)
    except (OSError, ValueError, RecursionError):
        return None


def _well_formed(data: dict[str, Any]) -> bool:
    """Whether a stored record has the shape and types the summary needs."""
    from traceparse.batching.summary import COLUMNS, STATUSES

    if data.get("status") not in STATUSES or not isinstance(data.get("message"), (str, type(None))):
        return False
    rows = data.get("rows", [])
    if not isinstance(rows, list):
        return False
    kinds: dict[str, type | tuple[type, ...]] = {
        "Int64": int,
        "Float64": (int, float),
        "string": str,
    }
    for row in rows:
        if not isinstance(row, dict):
            return False
        for name, value in row.items():
            if name not in COLUMNS:
                return False
            expected = kinds.get(COLUMNS[name], object)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, expected):
                return False
            # The summary's columns are int64 and finite floats: anything else
            # would fail every rerun instead of being analysed again.
            if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
                return False
            if isinstance(value, float) and not math.isfinite(value):
                return False
    return True


def store(task: Task, outcome: Outcome, current: dict[str, Any]) -> None:
    from traceparse.version import __version__

    record = {
        "schema": SCHEMA,
        "traceparse": __version__,
        "path": task.capture.path,
        "host": task.capture.host,
        "run": task.capture.run,
        "format": task.capture.format,
        "fingerprint": current,
        "reports": list(task.reports),
        "status": outcome["status"],
        "message": outcome["message"],
        "rows": outcome["rows"],
    }
    text = json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
    atomic_write(own_file(os.path.join(task.directory, RESULT_NAME)), text + "\n")


def stored_quietly(task: Task, current: dict[str, Any]) -> Outcome | None:
    """``stored``, or None on anything unexpected (then the capture is analysed again)."""
    try:
        return stored(task, current)
    except Exception:
        return None
