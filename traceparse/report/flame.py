"""The bytes at an allocator's peak as an icicle graph of the Python stacks that made them.

Each row of boxes is one level of the call stack, the program's own frames
first (outermost at the top; library frames are left out: the user's line is
what this answers), then the op that holds the bytes; a box is as wide as its
bytes and labelled with its line (or op) and bytes. Plain HTML and CSS: no
script, readable in any browser or e-mail client. The figures are the
breakdown's rows made during the capture and ``Profile.stacks``
(docs/sources.md); this module renders them and opens nothing.

>>> html = flame_html(traceparse.load("logs/"))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import pandas as pd

from traceparse.output.units import format_bytes
from traceparse.report.escape import html_text

__all__ = ["FlameSource", "flame_html", "flame_section"]

# Holders made during the capture (analysis.breakdown.INSIDE; kept here so that
# a report does not import the analyses).
_INSIDE = ("allocation", "xla_buffer", "xla_value", "xla_slack", "padding")
NO_SOURCE = "(no recorded stack)"
NO_OP = "(no op recorded)"
# Boxes narrower than this share of the peak are merged into one per parent.
_MIN_SHARE = 0.005
_MAX_LEVELS = 24
_ROW_PX = 22

_CSS = """
.tp-flame{font:12px/1.4 system-ui,sans-serif;margin:1em 0}
.tp-flame .lvl{position:relative;height:22px;margin:1px 0}
.tp-flame .box{position:absolute;top:0;height:20px;overflow:hidden;white-space:nowrap;
text-overflow:ellipsis;border:1px solid #fff;box-sizing:border-box;padding:1px 4px;
background:#f4a261;color:#222}
.tp-flame .box.user{background:#e9c46a}.tp-flame .box.op{background:#a8dadc}
.tp-flame .box.none{background:#ddd}
"""


class FlameSource(Protocol):
    """What the graph reads (``traceparse.Profile`` has it)."""

    @property
    def breakdown(self) -> pd.DataFrame: ...
    @property
    def stacks(self) -> pd.DataFrame: ...


@dataclass
class _Node:
    name: str
    kind: str  # user, op or none
    size: int = 0
    children: dict[tuple[str, str], _Node] = field(default_factory=dict)


def _tree(source: FlameSource, host: str, allocator: str) -> _Node:
    rows = source.breakdown
    rows = rows[
        rows["holder"].astype(object).isin(_INSIDE).to_numpy(dtype=bool)
        & (rows["host"].astype(object) == host).to_numpy(dtype=bool)
        & (rows["allocator"].astype(object) == allocator).to_numpy(dtype=bool)
    ]
    stacks = source.stacks
    stacks = stacks[(stacks["host"].astype(object) == host).to_numpy(dtype=bool)]
    user = stacks[stacks["user"].to_numpy(dtype=bool)]
    frames: dict[int, list[str]] = {
        int(stack): list(group.sort_values("depth")["frame"])
        for stack, group in user.groupby("stack", sort=False)
    }
    root = _Node("all", "none")
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
            path = [(NO_SOURCE, "none")]
        path = [*path[: _MAX_LEVELS - 1], (op if isinstance(op, str) else NO_OP, "op")]
        node = root
        node.size += int(size)
        for name, kind in path:
            node = node.children.setdefault((name, kind), _Node(name, kind))
            node.size += int(size)
    return root


def _boxes(node: _Node, total: int, left: float, depth: int, out: list[list[str]]) -> None:
    if depth >= len(out):
        out.append([])
    width = node.size / total
    label = f"{node.name} · {format_bytes(node.size)}"
    out[depth].append(
        f'<div class="box {node.kind}" style="left:{left * 100:.3f}%;width:{width * 100:.3f}%"'
        f' title="{html_text(label)}">{html_text(label)}</div>'
    )
    small = _Node("(smaller)", "none")
    at = left
    for child in sorted(node.children.values(), key=lambda c: -c.size):
        if child.size / total < _MIN_SHARE:
            small.size += child.size
            continue
        _boxes(child, total, at, depth + 1, out)
        at += child.size / total
    if small.size:
        _boxes(small, total, at, depth + 1, out)


def flame_section(source: FlameSource, host: str, allocator: str) -> str:
    """One allocator's graph as an HTML fragment; empty when nothing was
    recorded (no stacks and no source lines)."""
    root = _tree(source, host, allocator)
    if not root.size or (
        not len(source.stacks) and not any(kind == "user" for _n, kind in root.children)
    ):
        return ""
    levels: list[list[str]] = []
    root.name = f"{host} {allocator}: made during the capture, live at the peak"
    _boxes(root, root.size, 0.0, 0, levels)
    rows = "".join(f'<div class="lvl">{"".join(boxes)}</div>' for boxes in levels)
    return (
        f'<figure class="tp-flame"><style>{_CSS}</style>'
        f"<figcaption>Bytes at the peak by the Python stack that made them "
        f"(your code's frames, outermost first, then the op)</figcaption>{rows}</figure>"
    )


def flame_html(source: FlameSource, title: str = "traceparse: bytes at the peak by stack") -> str:
    """A self-contained page with every allocator's graph (no script)."""
    peaks = source.breakdown[["host", "allocator"]].drop_duplicates()
    sections = [
        flame_section(source, str(host), str(allocator))
        for host, allocator in zip(
            peaks["host"].astype(object), peaks["allocator"].astype(object), strict=True
        )
        if isinstance(host, str) and isinstance(allocator, str)
    ]
    body = "".join(s for s in sections if s) or (
        "<p>No source lines were recorded for this capture; capture it with "
        "traceparse.profile(), <code>traceparse run</code> or the Keras MemoryCallback.</p>"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">"
        f"<title>{html_text(title)}</title></head><body><h1>{html_text(title)}</h1>"
        f"{body}</body></html>\n"
    )
