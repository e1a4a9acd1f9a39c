"""``traceparse summary``: what holds the memory, per capture and allocator."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from traceparse.cli._options import add_captures, add_output
from traceparse.cli.base import Command, count_type

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal


class SummaryCommand(Command):
    """Summarise captures: the peak and what holds it, per capture and allocator.

    For every run and host under each PATH, and every allocator in it: the peak
    in use (when, which step), capacity and utilisation, heap, reserved bytes
    and fragmentation at the peak, the largest tensors, ops and name scopes live
    at the peak, where the bytes come from (shape x dtype, allocator padding,
    requests beyond the shape, memory allocated before the capture, reserved),
    the leak check, and what the capture lacks.
    """

    name = "summary"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse summary logs/\n"
            "  traceparse summary logs/plugins/profile/2026_11_29_14_11_01 --top 5\n"
            "  traceparse summary logs/ --format json -o summary.json"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_captures(parser)
        parser.add_argument(
            "--top",
            type=count_type,
            default=10,
            metavar="N",
            help="rows per table (default 10; 0 shows every row; a line counts those left out)",
        )
        parser.add_argument(
            "--format",
            choices=["table", "json"],
            default=None,
            help="table (default) or json (every number, raw, for scripts)",
        )
        add_output(parser)

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        import io

        from traceparse.cli._json import summaries_as_dicts
        from traceparse.cli._loading import load_each
        from traceparse.cli._summary_view import print_summaries
        from traceparse.output.export import format_from_path, json_default, write_output
        from traceparse.output.jsonvalues import inert
        from traceparse.output.terminal import Terminal

        fmt = args.format or ("json" if format_from_path(args.output) == "json" else "table")
        profiles = load_each(args.paths, term)
        if fmt == "json":
            data = summaries_as_dicts(profiles)
            text = inert(json.dumps(data, indent=2, ensure_ascii=False, default=json_default))
            text += "\n"
            write_output(text, args.output)
        elif args.output:
            buffer = io.StringIO()
            print_summaries(
                profiles, Terminal(stream=buffer, err=term.err, quiet=term.quiet), top=args.top
            )
            write_output(buffer.getvalue(), args.output)
        else:
            print_summaries(profiles, term, top=args.top)
        if args.output:
            term.note(f"Wrote {args.output}")
        return 0
