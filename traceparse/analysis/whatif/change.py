"""What to change (docs/whatif.md): ``Change``, the what-if as ``predict``'s
options and ``Profile.predict``'s keywords give it, checked by ``parse_change``."""

from __future__ import annotations

from dataclasses import dataclass

from traceparse.analysis.naming.optimizers import SLOTS
from traceparse.errors import UsageError

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")

OPTIMIZERS = tuple(k for k in SLOTS if k not in ("adamax", "nadam", "adadelta", "lamb"))


@dataclass
class Change:
    """What to change: any of the three (None: as captured); ``fresh``: run the
    program in a fresh process (``advise`` offers it where earlier models show)."""

    precision: str | None = None
    optimizer: str | None = None
    remat: tuple[str, ...] | None = None  # ("all",) or layer names
    fresh: bool = False

    def label(self) -> str:
        parts = []
        if self.precision:
            parts.append(self.precision)
        if self.optimizer:
            parts.append(self.optimizer)
        if self.remat:
            parts.append("remat " + ",".join(self.remat))
        if self.fresh:
            parts.append("a fresh process")
        return " + ".join(parts) or "as captured"

    def __bool__(self) -> bool:
        return bool(self.precision or self.optimizer or self.remat or self.fresh)


def parse_change(
    precision: str | None,
    optimizer: str | None,
    remat: str | tuple[str, ...] | None,
    fresh: bool = False,
) -> Change:
    """A Change from user text; an unknown precision or optimizer is a UsageError."""
    if precision is not None and precision not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    if optimizer is not None:
        optimizer = optimizer.lower()
        if optimizer not in SLOTS:
            raise UsageError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    layers: tuple[str, ...] | None = None
    if remat is not None:
        names = remat.split(",") if isinstance(remat, str) else list(remat)
        layers = tuple(n.strip() for n in names if n.strip())
        if not layers:
            raise UsageError("--remat needs 'all' or layer names separated by commas")
    return Change(precision, optimizer, layers, fresh)
