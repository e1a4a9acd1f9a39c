"""``traceparse allocations``: every allocation in the capture."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand
from traceparse.output.cells import ALLOCATION_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile


class AllocationsCommand(TableCommand):
    """List allocations: one row per tensor or buffer, with its op, shape and bytes.

    Every allocation the allocator recorded in the newest run under PATH, with
    the op that made it, dtype and shape, bytes requested and allocated, the
    shape x dtype estimate and the padding, when it was allocated and freed,
    and its step. Largest first. Exports (csv, json, parquet) keep every column
    of Profile.allocations; times are picoseconds from the capture start.
    """

    name = "allocations"
    noun = "Allocations"
    default_sort = ("allocated_bytes",)
    display_columns = ALLOCATION_COLUMNS

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--live",
            action="store_true",
            help="only allocations still live at the end of the capture (never freed)",
        )

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        table = profile.allocations
        if args.live:
            table = table[table["free_ps"].isna().to_numpy(dtype=bool)]
        return table
