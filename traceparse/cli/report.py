"""``traceparse report``: a Markdown, HTML or JSON report of captures."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._options import add_captures, add_output
from traceparse.cli.base import Command, count_type
from traceparse.errors import UsageError
from traceparse.report.formats import FILE_SUFFIXES, NAMES

if TYPE_CHECKING:
    from traceparse.core.profile import Profile
    from traceparse.output.terminal import Terminal

# The report formats (report.formats.REPORT_FORMATS), as --format names them.
REPORT_FORMATS = NAMES
_CHOICES = ", ".join(NAMES[:-1]) + f" or {NAMES[-1]}"


class ReportCommand(Command):
    """Write a report of captures: Markdown (CI job summaries), HTML with plots, or JSON.

    Covers every run and host under each PATH: the peak per allocator and what
    holds it, top tensors, ops and scopes, the attribution, steps, leaks and
    diagnostics. The HTML report is one self-contained file with its plots
    inline. With -o the file is written atomically; without it the report goes
    to stdout. The format follows -o's extension unless --format is given.
    """

    name = "report"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse report logs/ -o report.html\n"
            '  traceparse report logs/ --format md >> "$GITHUB_STEP_SUMMARY"\n'
            "  traceparse report runA/ runB/ --format json -o report.json"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_captures(parser)
        parser.add_argument(
            "--format",
            choices=REPORT_FORMATS,
            help=f"{_CHOICES} (default: from -o's extension, else md)",
        )
        parser.add_argument(
            "--top",
            type=count_type,
            metavar="N",
            help="rows per table in md and html (default 20; 0 shows every row; "
            "json always has every row)",
        )
        add_output(parser)

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.cli._loading import load_each
        from traceparse.output.export import check_extension, format_from_path

        implied = format_from_path(args.output, FILE_SUFFIXES)
        fmt = args.format or (implied if implied in REPORT_FORMATS else "md")
        check_extension(args.output, fmt, args.format is not None, REPORT_FORMATS, FILE_SUFFIXES)
        if fmt == "html" and args.output is None and term.interactive:
            raise UsageError("an HTML report is a file: add -o report.html")
        profiles = load_each(args.paths, term)
        text = write(profiles, fmt, args.output, term, top=args.top)
        if args.output is None:
            term.raw(text)
        else:
            term.note(f"Wrote {args.output}")
        return 0


def write(
    profiles: list[Profile], fmt: str, path: str | None, term: Terminal, *, top: int | None = None
) -> str:
    """Render (and with ``path`` write) a report, with a progress display."""
    from traceparse.analysis.predict import REPLAY_PROGRESS
    from traceparse.report import write_report

    with term.progress(f"Writing the {fmt} report") as bar:

        def replayed(done: int, budget: int | None) -> None:
            # The predictions' replays are most of a large capture's report.
            of = f" of {budget}" if budget else ""
            bar.update(f"Writing the {fmt} report: allocator replay {done}{of}")

        told = REPLAY_PROGRESS.set(replayed)
        try:
            rows = {} if top is None else {"top": top}  # None: the report's default
            return write_report(profiles, fmt, path, **rows)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise UsageError(
                f"{path}: cannot write the report ({reason}); choose another -o", path
            ) from exc
        finally:
            REPLAY_PROGRESS.reset(told)
