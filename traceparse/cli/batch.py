"""``traceparse batch``: every capture under many directories, in parallel, into one summary."""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

from traceparse.cli.base import Command, count_type
from traceparse.output.units import plural
from traceparse.report.formats import NAMES

if TYPE_CHECKING:
    from traceparse.batching import BatchResult
    from traceparse.output.terminal import Terminal

_REPORT_CHOICES = NAMES  # report.formats.REPORT_FORMATS
# Failures listed on stderr before pointing at the summary for the rest.
_SHOWN_FAILURES = 20


def reports_type(text: str) -> tuple[str, ...]:
    """An argparse type: ``md,html,json``, a subset of it, or ``none``."""
    if text.strip().lower() == "none":
        return ()
    formats = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    unknown = [fmt for fmt in formats if fmt not in _REPORT_CHOICES]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(_REPORT_CHOICES)}, or none; "
            f"got {text!r}"
        )
    return formats


class BatchCommand(Command):
    """Analyse every capture under many directories or URLs, in parallel, into summary tables.

    Finds every capture below each ROOT (a local path, or an fsspec URL such as
    gs://, s3://, file:// or memory://), analyses each one in its own worker
    process, and writes to OUTDIR:

      summary.csv, summary.parquet, summary.md
          one row per (capture, host, allocator): path, run, host, allocator,
          status, peak, capacity, utilisation, the top op at the peak, the
          attribution parts, the leak verdict and the number of allocations;
      captures/<name>/report.{md,html,json}
          each capture's report (choose with --reports).

    A capture that cannot be read is a row with status "error" and its reason,
    and the batch goes on; a capture without memory events is a row with status
    "empty". The exit code is 3 when any capture failed, else 0.

    Running it again skips every capture whose result exists and whose input
    is unchanged (size and modification time, or the content with --hash), so
    an interrupted batch resumes where it stopped; --force redoes everything.
    Every file is written to a temporary name and then renamed, and a second
    batch into the same OUTDIR is refused while one runs.

    With --scheduler the captures are analysed on a Dask distributed cluster
    instead (pip install 'traceparse[dask]'); the workers must reach the inputs
    and OUTDIR. The results are the same as a local run's.
    """

    name = "batch"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse batch logs/ -o memory-summary\n"
            "  traceparse batch gs://bucket/experiments/ s3://other/runs/ -o out --jobs 8\n"
            "  traceparse batch /shared/logs -o /shared/out --scheduler tcp://10.0.0.5:8786\n"
            "  traceparse batch logs/ -o out --reports md --force"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "roots",
            nargs="+",
            metavar="ROOT",
            help="directory or URL to search for captures (at any depth)",
        )
        parser.add_argument(
            "-o",
            "--output",
            required=True,
            metavar="OUTDIR",
            help="directory for the summaries and reports (created if needed)",
        )
        parser.add_argument(
            "-j",
            "--jobs",
            type=count_type,
            metavar="N",
            help="worker processes (default: the CPUs available); 0 analyses in this process",
        )
        parser.add_argument(
            "--scheduler",
            metavar="ADDRESS",
            help="run on this Dask distributed scheduler (tcp://host:8786) instead",
        )
        parser.add_argument(
            "--force", action="store_true", help="analyse every capture again, changed or not"
        )
        parser.add_argument(
            "--reports",
            type=reports_type,
            default=_REPORT_CHOICES,
            metavar="FORMATS",
            help=f"report formats per capture: a comma-separated subset of {','.join(NAMES)}, "
            f"or none (default: {','.join(NAMES)})",
        )
        parser.add_argument(
            "--hash",
            action="store_true",
            help="decide whether an input changed by its content (SHA-256), not size and mtime",
        )

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.batching import batch

        if args.scheduler and args.jobs is not None:
            term.note("--jobs has no effect with --scheduler: the cluster's workers do the work")
        with _terminate_as_interrupt(), term.progress("Analysing captures") as bar:

            def progress(done: int, total: int) -> None:
                if bar.total != total:
                    bar.update(total=total)
                bar.advance(done - bar.completed)

            result = batch(
                args.roots,
                args.output,
                jobs=args.jobs,
                scheduler=args.scheduler,
                force=args.force,
                reports=args.reports,
                fingerprint="hash" if args.hash else "stat",
                progress=progress,
            )
        report(result, term)
        return result.exit_code


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, ``timeout``, a cancelled CI job) stops the batch as Ctrl-C does:
    the workers are stopped with it instead of finishing their captures as orphans."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def report(result: BatchResult, term: Terminal) -> None:
    """What the batch did, on stdout; each failure on stderr."""
    line = (
        f"{plural(result.captures, 'capture')}: {result.ok} ok, "
        f"{result.empty} without memory events, {result.errors} failed"
    )
    if result.out_of_memory:  # issue 39: listed apart (summary.md "Ended in out-of-memory")
        line += f", {result.out_of_memory} ended in out-of-memory"
    roots = len(result.failed) - result.errors
    if roots:
        line += f"; {plural(roots, 'root')} could not be searched"
    term.line(f"{line} ({result.analysed} analysed now, {result.reused} unchanged and reused)")
    names = ", ".join(path.rsplit("/", 1)[-1] for path in result.files)
    term.line(f"Wrote {names} and the reports under {result.output}")
    for note in result.notes:
        term.note(note)
    for path, reason in result.failed[:_SHOWN_FAILURES]:
        term.warn(f"{path}: {reason}")
    if len(result.failed) > _SHOWN_FAILURES:
        term.warn(f"… and {len(result.failed) - _SHOWN_FAILURES} more: see summary.csv")
