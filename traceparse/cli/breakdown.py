"""``traceparse breakdown``: every byte at each peak, one row per holder."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile

# What --by groups on: a column of the breakdown.
GROUPS = ("op", "scope", "layer", "role", "part", "holder", "named_by", "xla_program")


class BreakdownCommand(TableCommand):
    """Every byte at each allocator's peak: one row per thing that holds bytes.

    The table every other view groups: an allocation made during the capture,
    an HLO buffer inside a compiled program's slab, a slab's slack, the value
    a program left in an output, a variable or XLA parameter standing for bytes
    from before the capture, what from before nothing names, allocator padding
    and reserved bytes. Each row has its part (the attribution column it counts
    in), its op, scope, layer and role, dtype and shape, and how its name was
    found (named_by). Per allocator the rows sum exactly to the bytes in use at
    its peak. --by groups the rows on one column (bytes summed, things
    counted); exports give every row with every column. Where the peak is
    reached at several instants (within 1% of it), the rows describe the
    latest at the maximum; --at first, --at last or --at step N another.
    """

    name = "breakdown"
    noun = "Breakdown"
    default_sort = ("bytes",)
    # On a narrow terminal the op (or, grouped, the grouping column) stays readable.
    name_columns = ("op", *GROUPS)
    display_columns = (
        "holder",
        "part",
        "bytes",
        "op",
        "layer",
        "role",
        "dtype",
        "shape",
        "xla_buffer",
        "variable",
        "named_by",
        "items",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--by",
            choices=GROUPS,
            help="one row per allocator and value of this column: its bytes and how many "
            "things hold them",
        )
        from traceparse.cli.peak import add_at_argument

        add_at_argument(parser)

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        from traceparse.cli.peak import parse_at

        at = parse_at(args.at)
        rows = profile.breakdown if at is None else profile.at_instant(at)[1]
        if not args.by:
            return rows
        return group_rows(rows, args.by)


def group_rows(rows: pd.DataFrame, by: str) -> pd.DataFrame:
    """Bytes and things (``item``) per (host, allocator, ``by``), largest first."""
    keys = ["host", "allocator", by]
    grouped = rows.groupby(keys, observed=True, dropna=False, sort=False)
    table = grouped.agg(bytes=("bytes", "sum"), items=("item", "nunique")).reset_index()
    return table.sort_values(
        ["host", "allocator", "bytes"], ascending=[True, True, False], kind="stable"
    ).reset_index(drop=True)
