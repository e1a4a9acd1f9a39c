"""The HTML report's chart of layers at the peak: one stacked bar per layer.

Each bar splits a layer's bytes at the peak into activations, gradients,
weights, optimizer state and other, in that order, with the same colours for
every layer; the explicit rows (before the capture, no layer) stay out of the
chart (the table and the attribution chart show them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.report.plots import (
    _BINARY,
    PALETTE,
    _figure,
    _svg,
    _unit,
    _with_titles,
    label_bars,
    name_ticks,
)
from traceparse.tables.columns import ROLE_BYTE_COLUMNS

__all__ = ["LAYER_PARTS", "layers_of", "layers_svg", "middle_cut"]

# Kind column -> legend label, in stacking order.
LAYER_PARTS: dict[str, str] = dict(
    zip(
        ROLE_BYTE_COLUMNS,
        (
            *("activations", "gradients", "weights", "optimizer state", "optimizer update"),
            *("other", "unknown"),
        ),
        strict=True,
    )
)
# Layers a chart shows at most (the largest).
MAX_LAYERS = 12
# Characters of a layer's name on its axis label; the full name shows on hover.
LABEL_LIMIT = 40


def middle_cut(name: str, limit: int = LABEL_LIMIT) -> str:
    """A long layer name cut in the middle: both ends stay, where layer names differ
    (``transformer_block_3_attention`` vs ``..._mlp``; ``encoder_12`` vs ``decoder_12``).

    >>> middle_cut("a_very_long_transformer_encoder_block_name_with_layer_index_11", 24)
    'a_very_long…yer_index_11'
    """
    if len(name) <= limit:
        return name
    head = (limit - 1) // 2
    tail = limit - 1 - head
    return name[:head] + "…" + name[-tail:]


def layers_of(layers: pd.DataFrame | None) -> pd.DataFrame:
    """The model layers of one allocator's record holding bytes at the peak (no
    explicit rows), the largest ``MAX_LAYERS``."""
    from traceparse.records.terms import EXPLICIT_ROWS

    if layers is None or layers.empty:
        return pd.DataFrame(columns=["layer", *LAYER_PARTS])
    mine = layers[
        ~layers["layer"].astype(object).isin(EXPLICIT_ROWS) & (layers["live_at_peak_bytes"] > 0)
    ]
    return mine.head(MAX_LAYERS)


def layers_svg(frame: pd.DataFrame, *, label: str, salt: str = "layers") -> str:
    """Horizontal stacked bars, the first layer on top, each with its total."""
    names = [str(x) for x in frame["layer"].astype(object)]
    values = {c: frame[c].to_numpy(dtype=np.float64) for c in LAYER_PARTS}
    totals = sum(values.values(), np.zeros(len(names)))
    n = max(len(names), 1)
    with _figure(10, 1.1 + 0.32 * n, salt) as (fig, ax):
        unit, scale = _unit(float(totals.max()) if len(totals) else 0.0, _BINARY)
        positions = np.arange(len(names))[::-1]
        left = np.zeros(len(names))
        for i, (column, legend) in enumerate(LAYER_PARTS.items()):
            if not values[column].any():
                continue
            ax.barh(
                positions,
                values[column] / scale,
                left=left / scale,
                color=PALETTE[i % len(PALETTE)],
                height=0.68,
                label=legend,
            )
            left += values[column]
        # Cut in the middle: layer names differ at both ends (block_3/dense_2).
        titles = name_ticks(ax, positions, names, salt, shorten=middle_cut)
        label_bars(ax, positions, totals, scale, headroom=1.18)
        ax.set_xlabel(f"bytes live at the peak ({unit})")
        ax.legend(loc="lower right", fontsize=8, frameon=False)
        return _with_titles(_svg(fig, label), titles)
