"""``traceparse baseline``: record a capture's figures for later runs to be checked against."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._options import PATHS_HELP, add_capture, add_output
from traceparse.cli.base import Command
from traceparse.errors import InputError

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal


class BaselineCommand(Command):
    """Record a baseline: the memory figures later runs are compared with (versioned JSON).

    Reads the newest run under PATH and writes, per allocator of each host, the
    peak in use, the capacity, the bytes and padding live at the peak, the bytes
    allocated, and per op the bytes live at the peak, the bytes allocated and
    the allocation count. The JSON has a format name and version, keys in a
    fixed order and allocators and ops sorted by name, so the same capture
    always gives the same file and a change reads well in a code review.
    Compare later runs with 'traceparse check PATH --baseline FILE' or
    'traceparse diff FILE PATH'.
    """

    name = "baseline"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse baseline logs/ -o memory-baseline.json\n"
            "  traceparse check logs/ --baseline memory-baseline.json --tolerance 5%\n"
            "  traceparse diff memory-baseline.json logs/"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_capture(parser, help=PATHS_HELP)
        add_output(parser)

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.cli._loading import load_newest
        from traceparse.gate.baseline import baseline_of
        from traceparse.output.export import write_output
        from traceparse.output.units import format_bytes

        profile = load_newest(args.path, term)
        baseline = baseline_of(profile)
        if not baseline.allocators:
            raise InputError(
                f"{profile.path}: the capture has no memory events, so there is no baseline "
                "to record",
                profile.path,
            )
        write_output(baseline.to_json(), args.output)
        if args.output:
            peaks = ", ".join(
                f"{a.allocator} on {a.host} {format_bytes(a.peak_bytes)}"
                for a in baseline.allocators
            )
            term.note(f"Wrote {args.output}: peak {peaks}")
        return 0
