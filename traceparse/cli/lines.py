"""``traceparse lines``: memory per line of the program's own code."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand
from traceparse.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile
    from traceparse.output.terminal import Terminal


class LinesCommand(TableCommand):
    """Memory per source line: which line of your code holds the bytes.

    One row per allocator and line of the program's own code (the innermost
    frame outside the standard library, site-packages, TensorFlow, Keras and
    traceparse) in the newest run under PATH: bytes live at the allocator's
    peak, bytes requested over the capture and how many allocations, with the
    layers and ops under the line, largest first. A row with no source holds
    what no recorded stack names. --stack keeps whole call stacks apart
    (Profile.stacks lists their frames). Captures made by traceparse.profile(),
    `traceparse run` and the Keras MemoryCallback record the lines; others
    have none (docs/sources.md).
    """

    name = "lines"
    noun = "Lines"
    default_sort = ()  # the table's own order: bytes at the peak, then over the capture
    name_columns = ("source",)
    display_columns = (
        "source",
        "stack",
        "live_at_peak_bytes",
        "requested_bytes",
        "allocations",
        "layers",
        "op_names",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--stack",
            action="store_true",
            help="one row per whole call stack instead of per line",
        )
        parser.add_argument(
            "--flame",
            metavar="FILE",
            help="also write the bytes at each peak as an icicle graph of stacks to FILE "
            "(one HTML page, no script: FILE ends in .html)",
        )

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        if args.flame:
            _check_flame_name(args.flame)
        code = super().run(args, term)
        if args.flame:
            term.note(f"Wrote {args.flame}")
        return code

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        if args.flame:
            from traceparse.output.export import write_output
            from traceparse.report.flame import flame_html

            write_output(flame_html(profile), args.flame)
        table = profile.lines(by_stack=args.stack)
        if not args.stack:
            table = table.drop(columns=["stack"])
        return table

    def table_headers(self, table: pd.DataFrame, args: argparse.Namespace) -> dict[str, str]:
        return {"stack": "stack id"} if "stack" in table.columns else {}

    def table_notes(self, table: pd.DataFrame, args: argparse.Namespace) -> list[str]:
        if "stack" not in table.columns:
            return []
        return [
            "stack id: which recorded call stack made the row's bytes; rows on one line "
            "differ in the frames under it (library code). Profile.stacks lists each "
            "stack's frames by id (traceparse.load(PATH).stacks); --flame FILE.html draws them."
        ]

    def empty_message(self, profile: Profile) -> str:
        note = profile.lines().attrs.get("diagnostic")
        return str(note) if note else super().empty_message(profile)

    def before_table(self, profile: Profile, args: argparse.Namespace, term: Terminal) -> None:
        note = profile.lines().attrs.get("diagnostic")
        if note:
            term.note(str(note))


def _check_flame_name(path: str) -> None:
    """Refuse a --flame name that says another format: the graph is an HTML page
    (boxes in HTML and CSS), which a viewer opening ``flame.svg`` cannot show."""
    import os

    extension = os.path.splitext(path)[1].lower()
    if extension not in ("", ".html", ".htm") and not path.startswith("/dev/"):
        raise UsageError(
            f"{path}: --flame writes an HTML page, not {extension[1:].upper() or extension}; "
            "name the file .html (e.g. --flame flame.html)",
            path,
        )
