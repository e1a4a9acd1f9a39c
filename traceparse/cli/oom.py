"""``traceparse oom``: why a run failed, and what held the memory when it did."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from traceparse.cli._options import add_captures, add_output
from traceparse.cli.base import Command, count_type

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal


class OomCommand(Command):
    """Explain a run that failed (out of memory above all) from its capture.

    For every run and host under each PATH whose capture ended in an exception
    (recorded beside it by traceparse.profile(), the Keras MemoryCallback or
    `traceparse run`): what failed, in which step, what it asked which allocator
    for (op, shape, dtype, bytes), the allocator's bytes in use and free then,
    how much would have had to be freed for the request to fit, and who held
    the memory at that moment, by layer and by op (the rows sum to the
    allocator's own counter then, as the peak's do). Captures that ended
    normally are listed as such.
    """

    name = "oom"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse oom logs/\n"
            "  traceparse oom logs/ --format json -o failure.json"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_captures(parser)
        parser.add_argument(
            "--top", type=count_type, default=10, metavar="N", help="rows per table (default 10)"
        )
        parser.add_argument(
            "--format", choices=["table", "json"], default="table", help="table or json"
        )
        add_output(parser)

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        import io

        from traceparse.cli._failure_view import print_failure_detail
        from traceparse.cli._loading import load_each
        from traceparse.output.export import json_default, write_output
        from traceparse.output.jsonvalues import inert
        from traceparse.output.terminal import Terminal

        profiles = load_each(args.paths, term)
        if args.format == "json":
            from traceparse.cli._json import failures_as_dicts

            data = failures_as_dicts(profiles)
            text = inert(json.dumps(data, indent=2, ensure_ascii=False, default=json_default))
            text += "\n"
            write_output(text, args.output)
            return 0
        buffer = io.StringIO() if args.output else None
        out = term if buffer is None else Terminal(stream=buffer, err=term.err, quiet=term.quiet)
        for index, profile in enumerate(profiles):
            if index:
                out.line()
            out.heading(", ".join(profile.paths), level=1)
            if not print_failure_detail(profile, out, top=args.top or 10**9):
                out.line("The capture ended normally: no failure was recorded beside it.")
        if buffer is not None:
            write_output(buffer.getvalue(), args.output)
            term.note(f"Wrote {args.output}")
        return 0
