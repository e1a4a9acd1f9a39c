"""``traceparse ops``: memory per TensorFlow op."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile


class OpsCommand(TableCommand):
    """Memory per op: what each TensorFlow op allocated, and held at the peak.

    One row per allocator and op in the newest run under PATH: how many
    allocations it made, bytes requested, allocated, estimated from shape x
    dtype and lost to padding, its largest single allocation, bytes live at the
    allocator's peak and still live at the end, and the mean lifetime. Ops
    holding the most memory at the peak come first.
    """

    name = "ops"
    noun = "Ops"
    default_sort = ("live_at_peak_bytes", "allocated_bytes")
    display_columns = (
        "op",
        "op_type",
        "count",
        "allocations",
        "allocated_bytes",
        "padding_bytes",
        "largest_bytes",
        "max_bytes",
        "live_at_peak_bytes",
        "live_at_end_bytes",
        "mean_lifetime_ps",
    )

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        return profile.ops
