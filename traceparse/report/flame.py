"""The bytes at an allocator's peak as an icicle graph of the Python stacks that made them.

Each row of boxes is one level of the call stack, the program's own frames
first (outermost at the top; library frames are left out: the user's line is
what this answers), then the op that holds the bytes; a box is as wide as its
bytes and labelled with its line (or op) and bytes. Plain HTML and CSS: no
script, readable in any browser or e-mail client. The tree is the
record's flame section (``records/flame.py``: the breakdown's rows made during
the capture and ``Profile.stacks``, docs/sources.md); this module draws it,
merges boxes too narrow to read, and opens nothing.

>>> html = flame_html(traceparse.load("logs/"))  # doctest: +SKIP
"""

from __future__ import annotations

from traceparse.output.cells import NO_OP
from traceparse.output.units import format_bytes
from traceparse.records.flame import FlameNode, FlameSource, flame_allocators, flame_tree
from traceparse.report.escape import html_text

__all__ = ["FlameSource", "flame_html", "flame_section"]

NO_SOURCE = "(no recorded stack)"
# Boxes narrower than this share of the peak are merged into one per parent.
_MIN_SHARE = 0.005
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


def _boxes(node: FlameNode, total: int, left: float, depth: int, out: list[list[str]]) -> None:
    if depth >= len(out):
        out.append([])
    width = node.size / total
    label = f"{node.name} · {format_bytes(node.size)}"
    out[depth].append(
        f'<div class="box {node.kind}" style="left:{left * 100:.3f}%;width:{width * 100:.3f}%"'
        f' title="{html_text(label)}">{html_text(label)}</div>'
    )
    small = FlameNode("(smaller)", "none")
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
    root = flame_tree(source, host, allocator, no_source=NO_SOURCE, no_op=NO_OP)
    if not root.size or (not len(source.stacks) and not root.has_user_frames):
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
    sections = [
        flame_section(source, host, allocator) for host, allocator in flame_allocators(source)
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
