"""``traceparse run``: profile an unmodified Python script, then summarise it."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from traceparse.cli.base import Command, seconds_type
from traceparse.errors import TraceparseError, UsageError

if TYPE_CHECKING:
    from traceparse.capture.child import ChildResult
    from traceparse.output.terminal import Terminal

DEFAULT_LOGDIR = "traceparse-logs"
# Where TensorFlow's C++ log lines go, in the logdir (as `demo` keeps them).
TF_LOG = "tensorflow.log"


@contextlib.contextmanager
def _open_log(path: Path) -> Iterator[BinaryIO]:
    """The log file for this run (each run starts it anew)."""
    try:
        handle = open(path, "wb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot write TensorFlow's log ({exc.strerror or exc})", path
        ) from exc
    with handle:
        yield handle


class RunCommand(Command):
    """Run a Python script under the TensorFlow profiler, then summarise its memory.

    The script runs as `python SCRIPT ARGS...` would run it (same sys.argv,
    __name__ == "__main__", its directory first on sys.path) with its own
    stdout, stderr and exit code: traceparse exits with the script's code. The
    capture goes to LOGDIR/plugins/profile/<run>/, and the summary is printed
    on stderr afterwards, so the script's stdout stays its own. Everything after
    SCRIPT is passed to the script. Needs TensorFlow.

    Each batch of a Keras Model.fit in the script is marked as a profiler step
    (fit is wrapped for the run to add a step-marking callback; the script is
    not changed), so a plain fit gets a steps table and a leak check. The
    capture also lists the live variables (LOGDIR/.../<host>.variables.json),
    which name the bytes allocated before the capture. TF_ENABLE_ONEDNN_OPTS is
    set to 1 unless already set: without oneDNN, TensorFlow's CPU allocator
    records no memory events. TensorFlow's own C++ log lines go to
    LOGDIR/tensorflow.log, named at the end (--verbose shows them as they come).
    """

    name = "run"
    reads_captures = False  # the user's script runs in a child of this process

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse run train.py --epochs 1\n"
            "  traceparse run --logdir logs/ --delay 10 --duration 5 train.py"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--logdir",
            default=DEFAULT_LOGDIR,
            metavar="DIR",
            help=f"where the profiler writes the capture (default ./{DEFAULT_LOGDIR}, in the "
            "current directory; keep it out of version control)",
        )
        parser.add_argument(
            "--delay",
            type=seconds_type,
            metavar="SECONDS",
            help="start profiling this long after the script starts (skip start-up), "
            "e.g. 10 or 1.5s or 500ms",
        )
        parser.add_argument(
            "--duration",
            type=seconds_type,
            metavar="SECONDS",
            help="stop profiling this long after it started (default: when the script ends)",
        )
        parser.add_argument(
            "--no-summary",
            action="store_true",
            help="only capture; print where the capture is",
        )
        parser.add_argument(
            "--verbose",
            action="store_true",
            help="show TensorFlow's C++ log lines on stderr as they come "
            "(default: in LOGDIR/tensorflow.log)",
        )
        parser.add_argument("script", metavar="SCRIPT", help="the Python script to run")
        parser.add_argument(
            "script_args",
            nargs=argparse.REMAINDER,
            metavar="ARGS",
            help="arguments for the script",
        )

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        import importlib.util

        from traceparse.capture import TENSORFLOW_MISSING, enable_onednn
        from traceparse.capture.checks import check_logdir
        from traceparse.capture.child import run_in_child

        if not os.path.isfile(os.path.expanduser(args.script)):
            raise UsageError(f"no such script: {args.script}", args.script)
        # Here, not only in the child: its error would come after the script's start.
        # (find_spec does not import TensorFlow; the child checks its version.)
        if importlib.util.find_spec("tensorflow") is None:
            raise UsageError(TENSORFLOW_MISSING)
        # Absolute before the script runs: an os.chdir in it moves nothing of ours.
        logdir = check_logdir(args.logdir, create=True, what="--logdir")
        enable_onednn()  # inherited by the child, before it imports TensorFlow
        log_path = logdir / TF_LOG
        with contextlib.ExitStack() as stack:
            tf_log = None if args.verbose else stack.enter_context(_open_log(log_path))
            result = run_in_child(
                args.script,
                list(args.script_args),
                logdir=logdir,
                delay_s=args.delay,
                duration_s=args.duration,
                tf_log=tf_log,
            )
        sys.stdout.flush()
        report = term.for_stream(sys.stderr)
        try:
            return self._report(args, result, logdir, report)
        finally:
            if result.log_lines:
                errors = f", {result.log_errors} of them errors" if result.log_errors else ""
                line = (
                    f"TensorFlow's log ({result.log_lines} lines{errors}): {log_path} "
                    "(--verbose shows it as it comes)"
                )
                # An error TensorFlow logged may say why the script failed: shown
                # even with --quiet then.
                if result.exit_code and result.log_errors:
                    report.warn(line)
                else:
                    report.note(line)

    def _report(
        self, args: argparse.Namespace, result: ChildResult, logdir: Path, report: Terminal
    ) -> int:
        """What became of the script and its capture, and the capture's summary."""
        run_dir = result.run_dir
        if result.signal_name is not None:
            report.warn(f"the script was killed by {result.signal_name}")
        if run_dir is None:
            if result.signal_name is not None:
                why = (
                    "it died before the profiler stopped, and a capture is written when "
                    "profiling stops; use --duration to stop it before the crash"
                )
            elif result.interrupted:
                why = "it was interrupted before the profiler wrote anything"
            else:
                why = "the script ended before --delay was up; use a shorter --delay"
            report.warn(f"the profiler wrote nothing under {logdir}: {why}")
            return result.exit_code
        if result.interrupted:  # Ctrl-C or SIGTERM: the capture is kept, not summarised
            report.line(f"Capture kept: {run_dir}")
            return result.exit_code
        try:
            if not args.no_summary:
                from traceparse.cli._loading import load_each
                from traceparse.cli._summary_view import print_summaries

                report.line()
                print_summaries(load_each([str(run_dir)], report), report)
        except TraceparseError as exc:
            # The script's exit code matters more than a summary that failed.
            print(f"traceparse: error: {exc}", file=sys.stderr)
            return result.exit_code or exc.exit_code
        report.line()
        report.line(f"Capture: {run_dir}")
        report.note(f"Next: traceparse report {run_dir} --format html -o report.html")
        if result.exit_code:
            report.note(f"The script exited with code {result.exit_code}.")
        return result.exit_code
