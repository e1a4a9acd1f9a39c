"""``traceparse layers``: memory per model layer."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand
from traceparse.tables.columns import ROLE_BYTE_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile


class LayersCommand(TableCommand):
    """Memory per model layer: which layer holds the bytes at the peak.

    One row per allocator and layer in the newest run under PATH, the layer
    named as the user wrote it (Keras 3's trace suffixes removed: mycnn_1/conv_a_1
    is conv_a; Keras 2's scopes kept as written: conv2d_3 is conv2d_3). Bytes
    live at the allocator's peak split into activations
    (forward ops), gradients (the backward pass), weights and optimizer state
    (from a variable inventory when the capture has one) and other; plus
    bytes allocated over the capture and the largest tensor. Rows for the
    optimizer's unassigned state, ops outside any layer and bytes from before
    the capture make each allocator's rows sum to its bytes in use at the
    peak. Layers come first, largest first; --by-replica keeps replica_N/
    scopes of distribution strategies apart; --depth 2 or more opens nested
    models into the layers inside them (a path column: block/block_dense).
    """

    name = "layers"
    noun = "Layers"
    default_sort = ()  # the table's own order: layers by bytes, then the explicit rows
    display_columns = (
        "layer",
        "path",
        "replica",
        *ROLE_BYTE_COLUMNS,
        "live_at_peak_bytes",
        "allocated_bytes",
        "largest_tensor",
        "largest_shape",
    )
    # The table's point is the split of each layer's bytes at the peak by role: a
    # narrow terminal drops the bytes over the capture and the largest tensor
    # first, then the weights and other bytes (the parts a change of batch
    # leaves alone), then the optimizer's update and state, the gradients, the
    # activations.
    keep_columns = (
        "path",
        "replica",
        "live_at_peak_bytes",
        "activation_bytes",
        "gradient_bytes",
        "optimizer_state_bytes",
        "optimizer_update_bytes",
        "weight_bytes",
        "other_bytes",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--by-replica",
            action="store_true",
            help="one row per layer and replica (replica_N/ or tower_N/ op scopes)",
        )
        parser.add_argument(
            "--depth",
            type=int,
            default=1,
            metavar="N",
            help="open nested models N levels deep: a row per layer inside them, "
            "with a path column (default 1: one row per layer of the model)",
        )

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        return profile.layers(by_replica=args.by_replica, depth=args.depth)
