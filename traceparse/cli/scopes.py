"""``traceparse scopes``: memory per name scope."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand
from traceparse.cli.base import count_type

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile


class ScopesCommand(TableCommand):
    """Memory per name scope: model/layer/... prefixes of op names, rolled up.

    Groups the allocations of the newest run under PATH by the first DEPTH
    parts of their op name (``model/dense/MatMul`` is in scope ``model`` at
    depth 1 and ``model/dense`` at depth 2), so a layer or a tf.name_scope
    shows as one row.
    """

    name = "scopes"
    noun = "Scopes"
    default_sort = ("live_at_peak_bytes", "allocated_bytes")
    display_columns = (
        "scope",
        "count",
        "allocations",
        "allocated_bytes",
        "padding_bytes",
        "live_at_peak_bytes",
        "live_at_end_bytes",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--depth",
            type=count_type,
            default=1,
            metavar="N",
            help="how many leading scope names to group by (default 1)",
        )

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        return profile.scopes(depth=max(1, args.depth))

    def describe(self, profile: Profile, args: argparse.Namespace) -> str:
        return f"Scopes (depth {max(1, args.depth)}) in run {profile.run} ({profile.host})"
