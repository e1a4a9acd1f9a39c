"""Fitting a table to a terminal's width without cutting a number or losing a name.

The rules, in order: every number is shown whole; the name column (layer, op,
scope, program) is always shown, cut in the middle when it must be so both
ends stay readable; a long header wraps at its underscores (``live_at_peak_``
over ``bytes``) rather than being cut; and the columns that still do not fit
are dropped, lowest priority first (``tables.columns.Column.priority``: the
byte column that answers the table's question goes last), from the right
among equals, for the caller to name in one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from traceparse.output.cells import MAX_CELL_WIDTH, least_width, shorten, visible

__all__ = ["Layout", "fit_columns", "render_fitted", "wrap_header"]

# Spaces between two columns.
GAP = 2
# The narrowest the name column is cut to before other columns are dropped:
# enough for both ends of a scoped op name ("gradient_tape/…/MatMul_1").
KEY_MIN = 32
# A numeric column widens until its header takes at most this many lines.
HEADER_LINES = 2
# The narrowest any other text column (dtype, shape, scope) is cut to.
TEXT_MIN = 16

_PIECE = re.compile(r"[^_ ]+[_ ]*|[_ ]+")


@dataclass(frozen=True)
class Layout:
    """Which columns a table shows (indexes, in order), how wide, and which it drops."""

    shown: list[int]
    widths: dict[int, int]
    hidden: list[int]


def _pieces(header: str) -> list[str]:
    return _PIECE.findall(header) or [header]


def wrap_header(header: str, width: int) -> list[str]:
    """``header`` on lines no wider than ``width``, broken after underscores or spaces."""
    lines: list[str] = []
    current = ""
    for piece in _pieces(header):
        if current and len(current + piece.rstrip(" ")) > width:
            lines.append(current.rstrip(" "))
            current = ""
        current += piece
    lines.append(current.rstrip(" "))
    return [shorten(line, width) for line in lines]


def fit_columns(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[bool],
    width: int,
    key: int | None = None,
    priority: Sequence[int] | None = None,
) -> Layout:
    """The layout of a table on ``width`` columns; ``key`` is the name column's index,
    ``priority`` each column's (higher stays longer; default: all equal).

    Without ``key`` the first text column is the name column.
    """
    count = len(headers)
    if key is None:
        key = next((i for i in range(count) if not right[i]), None)
    cells = [max((len(row[i]) for row in rows), default=0) for i in range(count)]
    natural = [min(max(len(headers[i]), cells[i]), MAX_CELL_WIDTH) for i in range(count)]
    need: dict[int, int] = {}
    for i in range(count):
        header_min = max(len(p.rstrip(" ")) for p in _pieces(headers[i]))
        if right[i]:
            need[i] = max(cells[i], header_min)  # a number is never cut
            while len(wrap_header(headers[i], need[i])) > HEADER_LINES:
                need[i] += 1
        else:
            # A source location keeps its file, line and function (cells.least_width).
            floor = KEY_MIN if i == key else max(TEXT_MIN, *(least_width(r[i]) for r in rows))
            need[i] = min(natural[i], max(header_min, floor))

    def used(columns: list[int]) -> int:
        return sum(need[i] for i in columns) + GAP * max(len(columns) - 1, 0)

    shown = list(range(count))
    hidden: list[int] = []
    rank = list(priority) if priority is not None else [0] * count
    while used(shown) > width:
        droppable = [i for i in shown if i != key]
        if not droppable:
            break
        last = min(droppable, key=lambda i: (rank[i], -i))  # the lowest, rightmost
        shown.remove(last)
        hidden.append(last)
    hidden.sort()
    widths = {i: need[i] for i in shown}
    if key is not None and key in shown and used(shown) > width:
        widths[key] = max(1, need[key] - (used(shown) - width))  # only the name is left to cut
    spare = width - (sum(widths.values()) + GAP * max(len(shown) - 1, 0))
    # Spare room goes to the name first, then the other text, then one-line headers.
    order = [i for i in shown if i == key]
    order += [i for i in shown if i != key and not right[i]]
    order += [i for i in shown if right[i]]
    for i in order:
        if spare <= 0:
            break
        grow = min(spare, natural[i] - widths[i])
        if grow > 0:
            widths[i] += grow
            spare -= grow
    return Layout(shown=shown, widths=widths, hidden=hidden)


def render_fitted(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[bool],
    layout: Layout,
    indent: str = "",
) -> tuple[list[str], list[str]]:
    """The header lines and the body lines (the rule, then one per row) of a fitted table."""
    headers = [visible(h, cell=True) for h in headers]
    wrapped = {i: wrap_header(headers[i], layout.widths[i]) for i in layout.shown}
    depth = max((len(lines) for lines in wrapped.values()), default=1)

    def line(cell_of: dict[int, str]) -> str:
        parts = []
        for i in layout.shown:
            text, w = cell_of[i], layout.widths[i]
            if not right[i]:
                text = shorten(text, w)
            parts.append(text.rjust(w) if right[i] else text.ljust(w))
        return (indent + (" " * GAP).join(parts)).rstrip()

    head = []
    for n in range(depth):
        # Headers sit on the bottom line, as the cells under them start there.
        cell_of = {}
        for i in layout.shown:
            lines = wrapped[i]
            k = n - (depth - len(lines))
            cell_of[i] = lines[k] if k >= 0 else ""
        head.append(line(cell_of))
    body = [indent + (" " * GAP).join("-" * layout.widths[i] for i in layout.shown)]
    for row in rows:
        body.append(line({i: visible(row[i], cell=True) for i in layout.shown}))
    return head, body
