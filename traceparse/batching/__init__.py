"""Many captures at once: ``traceparse.batch(roots, outdir)`` and ``traceparse batch``.

>>> result = traceparse.batch(["logs/", "gs://bucket/runs/"], "memory-out")  # doctest: +SKIP
>>> result.exit_code, result.failed                                          # doctest: +SKIP
(0, [])
>>> result.table.nlargest(5, "peak_bytes")                                   # doctest: +SKIP

Finds every capture below each root (local paths or fsspec URLs), analyses
each one in a worker process (or on a Dask cluster), and writes
``OUTDIR/summary.{csv,parquet,md}``, one row per (capture, host, allocator),
plus the reports of each capture under ``OUTDIR/captures/``. A bad capture is
a row with ``status="error"``, never the end of the batch. A re-run reuses
every result whose input is unchanged. See docs/batch.md.

On platforms that start workers with ``spawn`` (all of them, here), a script
that calls ``batch`` must guard its entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from traceparse.batching.lock import output_lock, sweep_temporaries
from traceparse.batching.summary import COLUMNS, summary_frame, write_summaries
from traceparse.batching.tasks import (
    CAPTURES_DIR,
    REPORT_FORMATS,
    Fingerprint,
    Outcome,
    Task,
    reuse,
    run_task,
    task_for,
)
from traceparse.errors import EXIT_INPUT, EXIT_OK, TraceparseError, UsageError
from traceparse.files.confined import real_directory
from traceparse.files.discover import CaptureFile, find_captures, is_url

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "REPORT_FORMATS", "BatchResult", "available_cpus", "batch", "run_task"]

# Filesystems whose files exist only in this process: their captures are analysed here.
_PROCESS_LOCAL = ("memory",)

Progress = Callable[[int, int], None]
PathLike = str | os.PathLike[str]


@dataclass(frozen=True, eq=False)
class BatchResult:
    """What a batch did. ``table`` is the summary (``COLUMNS``), also written to disk."""

    output: str
    table: pd.DataFrame = field(repr=False)
    captures: int  # found, after removing duplicates
    analysed: int  # analysed by this batch
    reused: int  # unchanged since an earlier batch: not analysed again
    ok: int  # captures with memory events, analysed now or earlier
    empty: int  # captures without memory events
    errors: int  # captures that failed
    failed: list[tuple[str, str]]  # (path, one-line reason): failed captures, then failed roots
    files: list[str]  # the summary files written
    notes: list[str] = field(default_factory=list)
    out_of_memory: int = 0  # captures that ended in out-of-memory (issue 39)

    @property
    def exit_code(self) -> int:
        """3 when any capture (or root) failed, else 0."""
        return EXIT_INPUT if self.failed else EXIT_OK


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity), not just the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def batch(
    roots: PathLike | Sequence[PathLike],
    output: PathLike,
    *,
    jobs: int | None = None,
    scheduler: str | Any | None = None,
    force: bool = False,
    reports: Sequence[str] = REPORT_FORMATS,
    fingerprint: Fingerprint = "stat",
    progress: Progress | None = None,
) -> BatchResult:
    """Analyse every capture under ``roots`` into ``output``; see the module docstring.

    ``jobs``: worker processes (default: the CPUs available; 0 analyses in this
    process). ``scheduler``: a Dask scheduler address (``tcp://host:8786``) or a
    ``distributed.Client``; the tasks then run on that cluster and ``jobs`` is
    unused. ``force``: analyse again even what is unchanged. ``reports``: the
    report formats written per capture (``()`` for none). ``fingerprint``:
    ``"stat"`` (size and modification time) or ``"hash"`` (SHA-256 of the
    content) decides whether an input changed. ``progress(done, total)`` is
    called after each capture.

    Raises ``UsageError`` for bad options, an unusable output directory, or
    one that another batch is writing to; problems with inputs become rows.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # This is a spawned worker re-running the caller's script: starting a
        # batch here would start workers of workers.
        raise UsageError(
            "traceparse.batch was called while a worker process was starting: call it "
            'under `if __name__ == "__main__":` in your script'
        )
    root_list = [roots] if isinstance(roots, str | os.PathLike) else list(roots)
    if not root_list:
        raise UsageError("give at least one directory or URL to analyse")
    formats = _report_formats(reports)
    if fingerprint not in ("stat", "hash"):
        raise UsageError(f"unknown fingerprint {fingerprint!r}: choose 'stat' or 'hash'")
    if jobs is not None and jobs < 0:
        raise UsageError(f"--jobs must be 0 or more, got {jobs}")
    outdir = _output_directory(output)
    with output_lock(outdir):
        sweep_temporaries(outdir)
        captures, failures = _discover(root_list)
        tasks = [
            task_for(c, outdir, reports=formats, fingerprint=fingerprint, force=force)
            for c in captures
        ]
        outcomes = _execute(tasks, jobs, scheduler, progress)
        rows = failures + [
            row for task in tasks for row in _rows(task, outcomes[task.capture.path], outdir)
        ]
        frame = summary_frame(rows)
        try:
            files, notes = write_summaries(frame, outdir)
        except OSError as exc:
            raise UsageError(
                f"{outdir}: cannot write the summaries ({exc.strerror or exc}); "
                "free some space there or choose another -o",
                outdir,
            ) from None
    done = list(outcomes.values())
    failed = sorted((o["path"], o["message"] or "") for o in done if o["status"] == "error")
    failed += [(f["path"], f["message"]) for f in failures]
    return BatchResult(
        output=outdir,
        table=frame,
        captures=len(tasks),
        analysed=sum(not o["reused"] for o in done),
        reused=sum(o["reused"] for o in done),
        ok=sum(o["status"] == "ok" for o in done),
        empty=sum(o["status"] == "empty" for o in done),
        errors=sum(o["status"] == "error" for o in done),
        out_of_memory=sum(o["status"] == "out_of_memory" for o in done),
        failed=failed,
        files=files,
        notes=notes,
    )


def _report_formats(reports: Sequence[str]) -> tuple[str, ...]:
    if isinstance(reports, str):
        reports = [reports]
    unknown = [fmt for fmt in reports if fmt not in REPORT_FORMATS]
    if unknown:
        raise UsageError(
            f"unknown report format {unknown[0]!r}: choose from {', '.join(REPORT_FORMATS)}"
        )
    return tuple(dict.fromkeys(reports))


def _output_directory(output: PathLike) -> str:
    text = os.fspath(output)
    if is_url(text):
        raise UsageError(
            f"{text}: the output must be a local (or mounted) directory, not a URL", text
        )
    outdir = os.path.abspath(text)
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise UsageError(f"{text}: is a file; give a directory for -o", text)
    try:
        os.makedirs(outdir, exist_ok=True)
        # A link planted at OUTDIR/captures is replaced by a real directory.
        real_directory(outdir, CAPTURES_DIR)
    except OSError as exc:
        raise UsageError(
            f"{text}: cannot create the output directory ({exc.strerror or exc})", text
        ) from exc
    if not os.access(outdir, os.W_OK):
        raise UsageError(f"{text}: the output directory is not writable", text)
    return outdir


def _discover(roots: Sequence[PathLike]) -> tuple[list[CaptureFile], list[dict[str, Any]]]:
    """Every capture under the roots, each once; a root that cannot be read becomes a row."""
    found: dict[str, CaptureFile] = {}
    failures: list[dict[str, Any]] = []
    for root in roots:
        text = os.fspath(root)
        try:
            captures = find_captures(text)
        except TraceparseError as exc:
            failures.append(_root_failure(text, str(exc)))
            continue
        except Exception as exc:  # a filesystem plugin's own errors (credentials, network)
            failures.append(_root_failure(text, f"{text}: cannot list it ({exc})"))
            continue
        for capture in captures:
            capture = _absolute(capture)
            found.setdefault(capture.path, capture)
    return sorted(found.values(), key=lambda c: c.path), failures


def _absolute(capture: CaptureFile) -> CaptureFile:
    # Workers may run with another working directory, or on another machine.
    if is_url(capture.path):
        return capture
    return CaptureFile(
        os.path.abspath(capture.run_dir),
        capture.host,
        os.path.abspath(capture.path),
        capture.format,
    )


def _root_failure(root: str, message: str) -> dict[str, Any]:
    path = root if is_url(root) or root.startswith("file://") else os.path.abspath(root)
    text = " ".join(message.split())
    # The row names the root already.
    for prefix in (f"{root}: ", f"{path}: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    return {"path": path, "status": "error", "message": text}


def _execute(
    tasks: Sequence[Task], jobs: int | None, scheduler: Any, progress: Progress | None
) -> dict[str, Outcome]:
    from traceparse.batching.runners import run_dask, run_inline, run_local

    outcomes: dict[str, Outcome] = {}
    total = len(tasks)

    def done(outcome: Outcome) -> None:
        outcomes[outcome["path"]] = outcome
        if progress is not None:
            progress(len(outcomes), total)

    if progress is not None:
        progress(0, total)
    here = [t for t in tasks if _process_local(t)]
    shareable = [t for t in tasks if not _process_local(t)]
    # Unchanged local inputs are recognised here, without starting any worker.
    # (A content hash, or a remote stat, is left to the workers: it is I/O.)
    pending: list[Task] = []
    for task in shareable:
        previous = None
        if task.fingerprint == "stat" and not is_url(task.capture.path):
            previous = reuse(task)
        if previous is not None:
            done(previous)
        else:
            pending.append(task)
    run_inline(here, done)
    # Largest first: a big capture started last would leave the other workers idle.
    pending.sort(key=_size, reverse=True)
    if scheduler is not None:
        if pending:
            run_dask(pending, scheduler, done)
    else:
        workers = available_cpus() if jobs is None else jobs
        if workers == 0:
            run_inline(pending, done)
        elif pending:
            run_local(pending, min(workers, len(pending)), done)
    return outcomes


def _process_local(task: Task) -> bool:
    return task.capture.path.split("://", 1)[0] in _PROCESS_LOCAL


def _size(task: Task) -> int:
    if is_url(task.capture.path):
        return 0
    try:
        return os.path.getsize(task.capture.path)
    except OSError:
        return 0


def _rows(task: Task, outcome: Outcome, outdir: str) -> list[dict[str, Any]]:
    capture = task.capture
    base: dict[str, Any] = {
        "path": capture.path,
        "run": capture.run,
        "host": capture.host,
        "format": capture.format,
        "status": outcome["status"],
        "message": outcome["message"],
        "report": None
        if outcome["status"] == "error"
        else os.path.relpath(task.directory, outdir).replace(os.sep, "/"),
    }
    if not outcome["rows"]:
        return [base]
    return [{**base, **row} for row in outcome["rows"]]
