"""Bytes in words, the one spelling every stage uses: ``1536 -> "1.5 KiB"``.

A foundation module like ``errors``: nothing here imports a stage, so the
sentences ``core`` makes (a Profile's diagnostics) and the tables ``output``
prints say a size the same way. ``traceparse.output.units`` has the rest of
the human units (durations, percentages, parsing).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["format_bytes", "is_missing"]

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def is_missing(value: Any) -> bool:
    """True for None, NaN and pandas NA (without importing pandas)."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    # pandas.NA and NaT: comparisons do not return a plain bool.
    try:
        return bool(value != value)
    except TypeError:
        return True


def format_bytes(n: Any, *, signed: bool = False, missing: str = "-") -> str:
    """``1536 -> "1.5 KiB"``; binary units, three significant digits, exact bytes below 1 KiB.

    ``signed=True`` puts a ``+`` on positive values (for deltas and growth).
    Unknown values (None, NaN, NA) render as ``missing``.
    """
    if is_missing(n):
        return missing
    value = float(n)
    sign = "-" if value < 0 else ("+" if signed and value > 0 else "")
    value = abs(value)
    if value < 1024:
        return f"{sign}{round(value)} B"
    unit = 0
    while value >= 1024 and unit < len(_BINARY_UNITS) - 1:
        value /= 1024
        unit += 1
    # Rounding may push 1023.96 KiB to "1024 KiB"; show it as the next unit instead.
    if round(value, 1 if value < 100 else 0) >= 1024 and unit < len(_BINARY_UNITS) - 1:
        value /= 1024
        unit += 1
    text = f"{value:.1f}" if value < 100 else f"{value:.0f}"
    if text.endswith(".0"):
        text = text[:-2]
    return f"{sign}{text} {_BINARY_UNITS[unit]}"
