"""Human units: bytes as KiB/MiB/GiB, picoseconds as ms, fractions as percent.

Shared by the terminal tables and every report renderer, so a number reads the
same everywhere. Parsing accepts what people type on a command line
(``1.5GiB``, ``512mb``, ``90%``) and raises :class:`UsageError` on anything else.
"""

from __future__ import annotations

import math
import re
from typing import Any

from traceparse.errors import UsageError

# Bytes in words are made before every stage (core's sentences say them too).
from traceparse.units import format_bytes, is_missing

__all__ = [
    "format_bytes",
    "format_count",
    "format_duration_ps",
    "format_percent",
    "is_missing",
    "parse_bytes",
    "parse_duration_s",
    "parse_percent",
]

_BYTE_MULTIPLIERS: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}

_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e([+-]?[0-9]+))?\s*([a-z]*)\s*$", re.I)


def format_duration_ps(ps: Any, *, missing: str = "-") -> str:
    """Picoseconds to the largest sensible unit: ``12_300_000_000 -> "12.3 ms"``."""
    if is_missing(ps):
        return missing
    value = float(ps)
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("µs", 1e6), ("ns", 1e3)):
        if value >= scale:
            return f"{sign}{_three_digits(value / scale)} {unit}"
    return f"{sign}{round(value)} ps"


def format_percent(fraction: Any, *, digits: int = 1, missing: str = "-") -> str:
    """``0.912 -> "91.2%"``; unknown values render as ``missing``."""
    if is_missing(fraction):
        return missing
    return f"{float(fraction) * 100:.{digits}f}%"


def format_change(delta: int, base: int) -> str:
    """A change relative to its base: ``"+12.5%"``; ``"new"`` from nothing, ``"0%"`` for none.

    >>> format_change(25, 200), format_change(5, 0), format_change(0, 0)
    ('+12.5%', 'new', '0%')
    """
    if base <= 0:
        return "new" if delta > 0 else "0%"
    return ("+" if delta > 0 else "") + format_percent(delta / base)


def plural(count: int, word: str) -> str:
    """``plural(1, "step") -> "1 step"``, ``plural(1200, "row") -> "1,200 rows"``."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def format_count(n: Any, *, missing: str = "-") -> str:
    """``1234567 -> "1,234,567"``."""
    if is_missing(n):
        return missing
    return f"{int(n):,}"


def _three_digits(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def parse_bytes(text: str | int) -> int:
    """``"1.5GiB" -> 1610612736``. Accepts B, KB/KiB, MB/MiB, GB/GiB, TB/TiB
    (any case, optional space) and plain integers. Raises :class:`UsageError`.
    """
    if isinstance(text, bool):
        raise UsageError(f"invalid size {text!r}: give a number of bytes such as 512MiB or 2GB")
    if isinstance(text, int):
        if text < 0:
            raise UsageError(f"invalid size {text}: sizes cannot be negative")
        return text
    match = _SIZE_RE.match(str(text))
    if not match:
        raise UsageError(
            f"invalid size {text!r}: give a number with an optional unit, such as 512MiB, "
            "1.5GiB or 2GB (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)"
        )
    number, exponent, unit = match.groups()
    multiplier = _BYTE_MULTIPLIERS.get(unit.lower())
    if multiplier is None:
        raise UsageError(
            f"invalid size {text!r}: unknown unit {unit!r}; use B, KB, KiB, MB, MiB, GB, GiB, "
            "TB or TiB"
        )
    try:
        value = float(number) * (10.0 ** int(exponent) if exponent else 1.0) * multiplier
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or value > 2**63 - 1:
        raise UsageError(f"invalid size {text!r}: too large")
    return round(value)


def parse_percent(text: str | float) -> float:
    """``"90%" -> 0.9``; a bare number is a fraction if <= 1 (``"0.9"``), else a percent."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
        had_sign = False
    else:
        raw = str(text).strip()
        had_sign = raw.endswith("%")
        try:
            value = float(raw[:-1] if had_sign else raw)
        except ValueError:
            raise UsageError(
                f"invalid percentage {text!r}: give a value such as 90% or 0.9"
            ) from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"invalid percentage {text!r}: must be a non-negative number")
    if had_sign or value > 1:
        value /= 100
    return value


def parse_duration_s(text: str | float) -> float:
    """``"1.5" / "1.5s" / "200ms" / "2m" -> seconds``. Raises :class:`UsageError`."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        match = re.match(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min)?\s*$", str(text), re.I)
        if not match:
            raise UsageError(f"invalid duration {text!r}: give seconds such as 2, 1.5s or 500ms")
        value = float(match.group(1))
        unit = (match.group(2) or "s").lower()
        value *= {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0}[unit]
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"invalid duration {text!r}: must be a non-negative number of seconds")
    return value
