"""A capture's stored result, and the fingerprint that says whether it is still valid.

``OUTDIR/captures/<name>/result.json`` holds the input's fingerprint, the
traceparse version and the summary rows. It is written atomically and after
the reports, so its presence vouches for the reports beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from traceparse.batching.records import Fingerprint, Outcome, Task
from traceparse.errors import CaptureNotFoundError, InputError
from traceparse.files.atomic import atomic_write
from traceparse.files.discover import is_url

__all__ = [
    "RESULT_NAME",
    "Fingerprint",
    "fingerprint",
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


# -- fingerprints ----------------------------------------------------------------


def fingerprint(path: str, how: Fingerprint) -> dict[str, Any]:
    """What identifies this version of the input: size and mtime, or a content hash.

    Opens nothing for writing. Raises ``InputError`` when the file cannot be read.
    """
    try:
        if is_url(path):
            return _remote_fingerprint(path, how)
        if how == "hash":
            with open(path, "rb") as handle:
                return _hash(handle)
        stat = os.stat(path)
        return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
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
        current = fingerprint(task.capture.path, task.fingerprint)
        return stored(task, current)
    except Exception:
        return None


def stored(task: Task, current: dict[str, Any]) -> Outcome | None:
    from traceparse.version import __version__

    try:
        with open(os.path.join(task.directory, RESULT_NAME), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
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
            if not os.path.isfile(os.path.join(task.directory, f"report.{fmt}")):
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
            if value is not None and (isinstance(value, bool) or not isinstance(value, expected)):
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
    atomic_write(os.path.join(task.directory, RESULT_NAME), text + "\n")


def stored_quietly(task: Task, current: dict[str, Any]) -> Outcome | None:
    """``stored``, or None on anything unexpected (then the capture is analysed again)."""
    try:
        return stored(task, current)
    except Exception:
        return None
