"""``traceparse advise``: which change saves the most memory at the peak."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from traceparse.cli.base import Command, size_type
from traceparse.cli.predict import batch_type

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal


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
            "  traceparse advise logs/ --capacity 16GiB --format json"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="PATH", help="log directory, run directory or capture")
        parser.add_argument(
            "--from-batch", type=batch_type, metavar="N", help="the batch PATH was captured at"
        )
        parser.add_argument(
            "--capacity", type=size_type, metavar="SIZE", help="the memory to fit in, e.g. 16GiB"
        )
        parser.add_argument("--allocator", metavar="NAME", help="only this allocator")
        parser.add_argument(
            "--format", choices=["table", "json"], default="table", help="output format"
        )

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.analysis.whatif import advice
        from traceparse.cli._loading import load_newest
        from traceparse.core.profile import predictor_of
        from traceparse.errors import UsageError
        from traceparse.output.jsonvalues import dumps

        profile = load_newest(args.path, term)
        predictor = predictor_of(profile, None, args.from_batch)
        keys = [k for k in predictor.rows if args.allocator in (None, str(k[1]))]
        if not keys:
            raise UsageError(
                f"{profile.path}: no allocator named {args.allocator!r} "
                f"(there are: {', '.join(profile.allocators) or 'none'})"
            )
        rows = advice(predictor, keys, args.capacity)
        if args.format == "json":
            term.raw(dumps({"path": str(profile.path), "advice": rows}) + "\n")
            return 0
        _render(term, rows)
        return 0


def _mib(n: Any) -> str:
    return "-" if n is None else f"{n / 2**20:,.1f} MiB"


def _render(term: Terminal, rows: list[dict[str, Any]]) -> None:
    for key in dict.fromkeys((r["host"], r["allocator"]) for r in rows):
        mine = [r for r in rows if (r["host"], r["allocator"]) == key]
        title = f"{key[1]} ({key[0]})"
        term.line(title)
        term.line("=" * len(title))
        term.line(
            f"captured peak at batch {mine[0]['batch_size']}: {_mib(mine[0]['captured_peak_bytes'])}"
        )
        term.line(
            "change                               saved       peak [low, high]                 largest batch"
        )
        for r in mine:
            bounds = f"{_mib(r['peak_bytes'])} [{_mib(r['low_bytes'])}, {_mib(r['high_bytes'])}]"
            term.line(
                f"{r['change']:<36} {_mib(r['saved_bytes']):>11} {bounds:<32} "
                f"{r['largest_batch'] if r['largest_batch'] is not None else '-'}"
            )
            term.line(f"    cost: {r['cost']}")
        term.line("")
