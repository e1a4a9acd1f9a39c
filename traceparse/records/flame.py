"""The flame section: the bytes made during the capture and live at an allocator's
peak, as a tree of the Python stacks that made them (the program's own frames,
outermost first, then the op), built from the profile's ``breakdown`` and
``stacks`` (docs/sources.md). ``report/flame.py`` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import pandas as pd

from traceparse.analysis.breakdown import INSIDE
from traceparse.records.allocator import owned

__all__ = ["MAX_LEVELS", "FlameNode", "FlameSource", "flame_allocators", "flame_tree"]

# Levels of a path: the frames beyond go (the op is always the last).
MAX_LEVELS = 24


class FlameSource(Protocol):
    """What the tree is built from (``traceparse.Profile`` has it)."""

    @property
    def breakdown(self) -> pd.DataFrame: ...
    @property
    def stacks(self) -> pd.DataFrame: ...


@dataclass
class FlameNode:
    """One box: a frame (``kind`` user), an op (op) or neither (none), its bytes
    and its children by (name, kind)."""

    name: str
    kind: str
    size: int = 0
    children: dict[tuple[str, str], FlameNode] = field(default_factory=dict)

    @property
    def has_user_frames(self) -> bool:
        """Whether any top-level child is a frame of the program (a line was recorded)."""
        return any(kind == "user" for _name, kind in self.children)


def flame_tree(
    source: FlameSource, host: str, allocator: str, *, no_source: str, no_op: str
) -> FlameNode:
    """The tree of (host, allocator): a path per breakdown row made during the capture
    (``analysis.breakdown.INSIDE``), its stack's user frames (or its source line, or
    ``no_source``), then its op (or ``no_op``). The labels are the renderer's."""
    rows = source.breakdown
    rows = owned(
        rows[rows["holder"].astype(object).isin(INSIDE).to_numpy(dtype=bool)], host, allocator
    )
    stacks = source.stacks
    stacks = stacks[(stacks["host"].astype(object) == host).to_numpy(dtype=bool)]
    user = stacks[stacks["user"].to_numpy(dtype=bool)]
    frames: dict[int, list[str]] = {
        int(stack): list(group.sort_values("depth")["frame"])
        for stack, group in user.groupby("stack", sort=False)
    }
    root = FlameNode("all", "none")
    for stack, source_line, op, size in zip(
        rows["stack"].tolist(),
        rows["source"].astype(object).tolist(),
        rows["op"].astype(object).tolist(),
        rows["bytes"].tolist(),
        strict=True,
    ):
        if size is None or pd.isna(size) or int(size) <= 0:
            continue
        if stack is not None and not pd.isna(stack) and int(stack) in frames:
            path = [(f, "user") for f in frames[int(stack)]]
        elif isinstance(source_line, str):  # a line without a stack (JAX's frames)
            path = [(source_line, "user")]
        else:
            path = [(no_source, "none")]
        path = [*path[: MAX_LEVELS - 1], (op if isinstance(op, str) else no_op, "op")]
        node = root
        node.size += int(size)
        for name, kind in path:
            node = node.children.setdefault((name, kind), FlameNode(name, kind))
            node.size += int(size)
    return root


def flame_allocators(source: FlameSource) -> list[tuple[str, str]]:
    """The (host, allocator) pairs the breakdown has, in its order."""
    peaks = source.breakdown[["host", "allocator"]].drop_duplicates()
    return [
        (host, allocator)
        for host, allocator in zip(
            peaks["host"].astype(object), peaks["allocator"].astype(object), strict=True
        )
        if isinstance(host, str) and isinstance(allocator, str)
    ]
