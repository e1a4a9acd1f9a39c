"""``traceparse advise``: which change saves the most memory at the peak."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli import _options as options
from traceparse.cli.base import Command

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal
    from traceparse.records.whatif import WhatIfRecord


class AdviseCommand(Command):
    """Rank the changes that would lower the peak: mixed precision (or float32
    from a mixed capture), a lighter optimizer, rematerialising layers, and
    useful combinations. Each is predicted from the capture by resizing its
    allocations and replaying them through the allocator model (as predict
    does), with bounds where its effect is uncertain; ranked by bytes saved at
    the predicted peak, with what it costs (compute, numerics or convergence) in
    one line, and the largest batch each allows under --capacity (default: the
    allocator's capacity in the capture). docs/whatif.md says what each change
    is assumed to do and how close it came on real captures.
    """

    name = "advise"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse advise logs/\n"
            "  traceparse advise logs/ --capacity 16GiB --format json\n"
            "  traceparse advise logs/ --format html -o advice.html"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        options.add_capture(parser)
        options.add_batch(
            parser,
            "--from-batch",
            "the global batch size PATH was captured at (default: as predict reads it)",
        )
        options.add_capacity(
            parser, "the memory to fit in, e.g. 16GiB (default: each allocator's capacity)"
        )
        options.add_allocator(parser)
        options.add_format(parser, ["table", "json", "md", "html"])
        options.add_output(parser)

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.core.profile import predictor_of
        from traceparse.output.export import write_output
        from traceparse.output.jsonvalues import dumps
        from traceparse.records.whatif import build_whatif
        from traceparse.report.whatif import whatif_html, whatif_markdown

        profile = options.load_to_predict(args.path, term, args.from_batch is not None)
        predictor = predictor_of(profile, None, args.from_batch)
        keys = [k for k in predictor.rows if args.allocator in (None, str(k[1]))]
        if not keys:
            raise options.no_allocator(profile, args.allocator)
        record = build_whatif(predictor, str(profile.path), keys, args.capacity)
        if args.format == "table" and args.output is None:
            _render(term, record)
            return 0
        text = {
            "json": lambda: dumps(record.to_dict()) + "\n",
            "md": lambda: whatif_markdown(record),
            "html": lambda: whatif_html(record),
            "table": lambda: whatif_markdown(record),
        }[args.format]()
        if args.output is None:
            term.raw(text)
        else:
            write_output(text, args.output)
        return 0


def _render(term: Terminal, record: WhatIfRecord) -> None:
    from traceparse.report.whatif import (  # records load pandas
        allocator_rows,
        row_cells,
        unchanged_largest,
    )
    from traceparse.units import format_bytes

    for key in record.allocators():
        mine = allocator_rows(record, key)
        title = f"{key[1]} ({key[0]})"
        term.line(title)
        term.line("=" * len(title))
        first = mine[0]
        captured = (
            f"captured peak at batch {first.batch_size}: {format_bytes(first.captured_peak_bytes)}"
            if first.failed_request is None
            else f"at batch {first.batch_size} as captured, with the request it ran out of "
            f"memory at ({first.failed_request}) asked again: "
            f"{format_bytes(first.captured_peak_bytes)}"
        )
        if not any(r.saved_bytes for r in mine):
            # A host allocator beside a device's: a table of zeros says nothing.
            term.line(f"{captured}; none of the {len(mine)} changes moves it (at that batch)")
            term.line("")
            continue
        term.line(
            f"{captured}; each change predicted at that batch, ranked by bytes saved at the peak"
        )
        unchanged = unchanged_largest(first)
        if unchanged:
            term.line(unchanged)
        term.line(f"{'change':<34} {'saved':>11}  {'peak [low, high]':<34} largest batch")
        for r in mine:
            change, saved, bounds, largest, cost = row_cells(r)
            term.line(f"{change:<34} {saved:>11}  {bounds:<34} {largest}")
            term.line(f"    cost: {cost}")
        capacity = first.capacity_bytes
        if capacity is not None:
            term.line(
                f"largest batch: the largest whose predicted peak fits {format_bytes(capacity)}"
                + (
                    "; the peak is predicted up to the request the capture ran out of memory "
                    "at, asked again, and what the step holds after it may not be in the "
                    "capture (traceparse predict says)"
                    if first.failed_request is not None
                    else ""
                )
            )
        term.line("")
