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
    """Memory per name scope: layer/... prefixes of op names, rolled up.

    Groups the allocations of the newest run under PATH by the first DEPTH
    scopes of their op name, counted from the model's layers: a Keras op
    ``gradient_tape/mycnn_1/conv_a_1/Conv2D`` is in scope ``conv_a`` at depth
    1 (the layer as the user named it, forward and backward together) and
    ``conv_a/Conv2D``'s scope at depth 2. Ops outside a model (``adam/...``,
    a tf.name_scope) keep their scopes as written. --as-written groups every
    op by its scopes as written (``mycnn_1`` at depth 1).
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
        parser.add_argument(
            "--as-written",
            action="store_true",
            help="scopes as the op names write them (model first), not from the layer",
        )

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        return profile.scopes(depth=max(1, args.depth), as_written=args.as_written)

    def describe(self, profile: Profile, args: argparse.Namespace) -> str:
        written = ", as written" if args.as_written else ""
        return f"Scopes (depth {max(1, args.depth)}{written}) in run {profile.run} ({profile.host})"
