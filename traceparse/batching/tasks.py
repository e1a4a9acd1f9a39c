"""One capture of a batch: the task a worker runs, and its outcome.

A task is plain data (a ``CaptureFile``, directories, options) and its outcome
is plain data (a dict of JSON values), so both cross process and machine
boundaries unchanged: no ``Profile`` ever leaves the worker that built it.

Each analysed capture gets a directory ``OUTDIR/captures/<name>/`` with its
reports and ``result.json`` (see ``store``). A later batch reuses the result
when the input is unchanged, so the summaries of a resumed batch are assembled
from the same records. Every file is written atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from typing import Any

from traceparse.batching.orphans import stop_if_orphaned
from traceparse.batching.records import Outcome, Status, Task
from traceparse.batching.store import (
    RESULT_NAME,
    Fingerprint,
    fingerprint,
    input_fingerprint,
    report_name,
    reuse,
    store,
    stored_quietly,
)
from traceparse.errors import CaptureTooLargeError, CorruptCaptureError, TraceparseError
from traceparse.files.confined import real_directory
from traceparse.files.discover import CaptureFile
from traceparse.report.formats import NAMES

__all__ = [
    "RESULT_NAME",
    "Fingerprint",
    "Outcome",
    "Task",
    "fingerprint",
    "outcome_of_crash",
    "reuse",
    "run_task",
    "task_for",
]

CAPTURES_DIR = "captures"
REPORT_FORMATS = NAMES  # report.formats.REPORT_FORMATS

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def task_for(
    capture: CaptureFile,
    outdir: str,
    *,
    reports: tuple[str, ...],
    fingerprint: Fingerprint,
    force: bool,
) -> Task:
    """The task of ``capture`` (whose path is absolute or a URL) for a batch into ``outdir``."""
    return Task(
        capture=capture,
        directory=os.path.join(outdir, CAPTURES_DIR, directory_name(capture)),
        reports=reports,
        fingerprint=fingerprint,
        force=force,
    )


def directory_name(capture: CaptureFile) -> str:
    """A readable, filesystem-safe and unique name: logdir, run and host, plus a hash.

    The hash is of the full path, so two logdirs with the same name (or a
    capture and its pre-converted twin) never share a directory.
    """
    parts = capture.run_dir.rstrip("/").split("/")
    if len(parts) >= 3 and parts[-3:-1] == ["plugins", "profile"]:
        logdir = parts[-4] if len(parts) >= 4 else ""
    else:
        logdir = parts[-2] if len(parts) >= 2 else ""
    readable = "-".join(
        _UNSAFE.sub("_", piece).strip("._")[:40] for piece in (logdir, capture.run, capture.host)
    )
    digest = hashlib.sha256(capture.path.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{readable.strip('-') or 'capture'}-{digest}"


# -- the worker --------------------------------------------------------------------


def run_task(task: Task) -> Outcome:
    """Analyse one capture (unless its stored result is still valid) and return its outcome.

    The worker function of every executor: top level, plain data in and out,
    and it never raises for a problem with the capture. A ``TraceparseError``
    becomes ``status="error"`` with its one-line message; any other exception
    becomes ``"internal error: ..."``.
    """
    try:
        return _run(task)
    except Exception as exc:
        return _failed(task, _one_line(f"internal error: {type(exc).__name__}: {exc}"))


def _run(task: Task) -> Outcome:
    try:
        current = input_fingerprint(task.capture, task.fingerprint)
    except TraceparseError as exc:
        return _failed(task, _one_line(str(exc)))
    if not task.force:
        previous = stored_quietly(task, current)
        if previous is not None:
            return previous
    stop_if_orphaned()  # a worker whose batch was killed writes nothing more
    # Only through real directories: a link planted at OUTDIR/captures or at the
    # capture's directory is replaced, so nothing outside OUTDIR is written or deleted.
    try:
        real_directory(os.path.dirname(os.path.dirname(task.directory)), CAPTURES_DIR, task.name)
    except OSError as exc:
        return _failed(task, f"cannot write the reports to {task.directory} ({_reason(exc)})")
    # From here on the directory holds no result that could vouch for a half-made
    # set of reports, and no report of an older version of the input (a link at
    # one of these names goes, not the file it names).
    for name in (RESULT_NAME, *(report_name(fmt) for fmt in REPORT_FORMATS)):
        _remove(os.path.join(task.directory, name))
    outcome, keep = _analyse(task)
    stop_if_orphaned()
    if keep:
        try:
            store(task, outcome, current)
        except OSError as exc:
            return _failed(task, f"cannot write the result to {task.directory} ({_reason(exc)})")
    return outcome


def outcome_of_crash(task: Task, detail: str) -> Outcome:
    """The outcome of a task whose worker process died."""
    return _failed(
        task,
        f"the worker process died while analysing it ({detail}); "
        "it may need more memory than a worker has: rerun it with fewer --jobs",
    )


def _analyse(task: Task) -> tuple[Outcome, bool]:
    """(outcome, whether to store it). Errors the input's bytes decide are stored too."""
    capture = task.capture
    try:
        from traceparse.core.loading import each_profile
        from traceparse.report import write_report

        (profile,) = each_profile([capture])
        summaries = profile.summary()
        stop_if_orphaned()
        os.makedirs(task.directory, exist_ok=True)
        for fmt in task.reports:
            path = os.path.join(task.directory, report_name(fmt))
            stop_if_orphaned()
            write_report([profile], fmt, path)
    except (CorruptCaptureError, CaptureTooLargeError) as exc:
        # Decided by the file's content, which the fingerprint covers: no point retrying.
        return _failed(task, _one_line(str(exc))), True
    except TraceparseError as exc:
        # Missing or unreadable files, network trouble: try again on the next run.
        return _failed(task, _one_line(str(exc))), False
    except MemoryError:
        return _failed(
            task,
            "ran out of memory analysing it; rerun with fewer --jobs "
            "or on a machine with more memory",
        ), False
    except OSError as exc:
        return _failed(
            task, f"cannot write the reports to {task.directory} ({_reason(exc)})"
        ), False
    except Exception as exc:
        return _failed(task, _one_line(f"internal error: {type(exc).__name__}: {exc}")), False
    failed = _out_of_memory(profile)
    if failed is not None:  # issue 39: listed apart, its allocators summarised all the same
        return _outcome(task, "out_of_memory", failed, [summary_row(s) for s in summaries]), True
    if not summaries:
        notes = [_without_path(task, note) for note in profile.diagnostics()]
        message = _one_line(" ".join(notes)) or "the capture has no memory events"
        return _outcome(task, "empty", message, []), True
    return _outcome(task, "ok", None, [summary_row(s) for s in summaries]), True


def _out_of_memory(profile: Any) -> str | None:
    """The sentence of the capture's out-of-memory failure; None when it has none."""
    from traceparse.records.failure import failure_sections

    for view in failure_sections(profile):
        if view.failure.out_of_memory:
            from traceparse.output.failure import failure_sentence

            return _one_line(failure_sentence(view.failure, view.holders()))
    return None


def summary_row(summary: Any) -> dict[str, Any]:
    """The batch columns of one allocator's record, as JSON values."""
    from traceparse.output.jsonvalues import json_value
    from traceparse.records.terms import PARTS

    # The record's whole tables are not needed: its largest op is their first row.
    fields = ("allocator", "peak_bytes", "capacity_bytes", "utilisation", "peak_step")
    data = json_value(
        {
            **{name: getattr(summary, name) for name in fields},
            "top_ops": summary.top_ops.head(1),
            "attribution": summary.attribution,
            "leak_verdict": summary.leak_verdict,
            "allocations": summary.allocations,
            "live_at_peak": summary.live_at_peak,
        }
    )
    top = data["top_ops"][0] if data["top_ops"] else {}
    return {
        "allocator": data["allocator"],
        "peak_bytes": data["peak_bytes"],
        "capacity_bytes": data["capacity_bytes"],
        "utilisation": data["utilisation"],
        "peak_step": data["peak_step"],
        "top_op": top.get("op"),
        "top_op_bytes": top.get("live_at_peak_bytes"),
        **{part: data["attribution"].get(part) for part in PARTS},
        "leak_verdict": data["leak_verdict"],
        "allocations": data["allocations"],
        "live_at_peak": data["live_at_peak"],
    }


def _outcome(
    task: Task, status: Status, message: str | None, rows: list[dict[str, Any]]
) -> Outcome:
    return {
        "path": task.capture.path,
        "status": status,
        "message": message,
        "rows": rows,
        "reused": False,
    }


def _failed(task: Task, message: str) -> Outcome:
    return _outcome(task, "error", _without_path(task, message), [])


def _without_path(task: Task, message: str) -> str:
    """The message without a leading ``PATH:``: the row names the capture already."""
    prefix = f"{task.capture.path}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
