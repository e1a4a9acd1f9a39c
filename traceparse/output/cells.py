"""Table cells in human units, chosen from the column names.

``*_bytes`` columns read as KiB/MiB/GiB, ``*_ps`` columns as times or
durations, fractions as percentages. The terminal tables and the Markdown and
HTML reports format cells here, so the same value reads the same everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from traceparse.output.units import (
    format_bytes,
    format_count,
    format_duration_ps,
    format_percent,
    is_missing,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_CELL_WIDTH",
    "MAX_NOTE_WIDTH",
    "MAX_REPORT_CELL_WIDTH",
    "Kind",
    "column_kind",
    "format_cell",
    "formatted_rows",
    "least_width",
    "note_line",
    "render_plain_table",
    "shorten",
    "visible",
]

# Control characters (C0 but tab and newline, DEL, C1). Names come from the user
# (tf.name_scope) and may hold terminal escape sequences: shown, not obeyed.
# Lone surrogates are bytes of a file name that were not UTF-8 (surrogateescape).
# Invisible format characters too: bidirectional overrides and isolates (U+202E
# shows "exe.txt" as "txt.exe"), zero-width spaces and joiners, the byte-order
# mark, and the Unicode line and paragraph separators.
_INVISIBLE = "\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\ud800-\\udfff{_INVISIBLE}]")
_CELL_CONTROL = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f\\ud800-\\udfff{_INVISIBLE}]")


# The widest a cell gets in a table for people: one 100 KB name would otherwise
# pad every row of the table to its width. Files for programs keep full names.
MAX_CELL_WIDTH = 120
# The HTML and Markdown reports wrap long names, so their cells may be longer;
# a crafted 10 MB name is still cut (JSON keeps it whole).
MAX_REPORT_CELL_WIDTH = 500
# A diagnostic line, wherever a person reads it (terminal, reports): the
# sentences are short, but they quote names and values from the capture.
MAX_NOTE_WIDTH = 1000


def visible(text: str, *, cell: bool = False) -> str:
    """``text`` with control characters written as ``\\xNN`` escapes, so a
    hostile name cannot move the cursor or restyle the reader's terminal.
    In a table ``cell`` tabs and newlines are escaped too, to keep its shape."""
    pattern = _CELL_CONTROL if cell else _CONTROL
    return pattern.sub(_escape_one, str(text))


def note_line(text: str) -> str:
    """A diagnostic as one shown line: escaped, then cut to ``MAX_NOTE_WIDTH``."""
    return shorten(visible(text, cell=True), MAX_NOTE_WIDTH)


def _escape_one(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


Kind = Literal[
    "text", "bytes", "signed_bytes", "duration", "time", "percent", "count", "number", "address"
]
# Words shown as they are: long hierarchical names (ops, scopes), short identifiers.
_WORDS = ("name", "ident")
NUMERIC_KINDS: frozenset[str] = frozenset(
    {"bytes", "signed_bytes", "duration", "time", "percent", "count", "number", "address"}
)
# Quantities sort largest first; positions (times, steps, addresses) and text
# sort in their natural order.
DESCENDING_KINDS: frozenset[str] = frozenset(
    {"bytes", "signed_bytes", "duration", "percent", "count"}
)

# Words in a *_ps column name that make it a length of time, not a moment.
_DURATION_WORDS = ("lifetime", "duration", "mean", "total", "elapsed", "median", "compute")
_COUNT_NAMES = {"count", "allocations", "frees", "live", "live_at_peak", "live_at_end"}
_COUNT_NAMES |= {"rows", "tensors", "unestimated"}
_PERCENT_NAMES = {"fragmentation", "utilisation", "utilization", "share", "fraction"}


def column_kind(name: str, dtype: Any = None) -> Kind:
    """How to show a column: as declared (``tables.columns.Column.display``); a column
    of no public table (a frame of one's own) by its name, and dtype for the rest."""
    from traceparse.tables.columns import COLUMNS

    declared = COLUMNS.get(name)
    if declared is not None:
        return cast(Kind, "text" if declared.display in _WORDS else declared.display)
    n = name.lower()
    if n.endswith("_bytes") or n == "bytes":
        signed = any(word in n for word in ("delta", "growth", "change", "diff"))
        return "signed_bytes" if signed else "bytes"
    if n.endswith("_ps"):
        return "duration" if any(word in n for word in _DURATION_WORDS) else "time"
    if n in _PERCENT_NAMES or n.endswith(("_share", "_fraction", "_utilisation")):
        return "percent"
    if n in _COUNT_NAMES or n.endswith(("_count", "_allocations", "_frees")):
        return "count"
    if n == "address":
        return "address"
    if dtype is not None and _is_numeric_dtype(dtype):
        return "number"
    return "text"


def _is_numeric_dtype(dtype: Any) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return bool(is_numeric_dtype(dtype)) and not bool(is_bool_dtype(dtype))


def format_cell(value: Any, kind: Kind) -> str:
    """One cell as text in human units; unknown values show as ``-``."""
    if is_missing(value):
        return "-"
    if kind == "bytes":
        return format_bytes(value)
    if kind == "signed_bytes":
        return format_bytes(value, signed=True)
    if kind in ("duration", "time"):
        return format_duration_ps(value)
    if kind == "percent":
        return format_percent(value)
    if kind == "count":
        return format_count(value)
    if kind == "address":
        try:
            return f"0x{int(value):x}"
        except (TypeError, ValueError):
            return str(value)
    if kind == "number":
        if isinstance(value, float) or type(value).__name__.startswith("float"):
            number = float(value)
            return str(int(number)) if number.is_integer() else f"{number:.4g}"
        return str(value)
    return visible(str(value), cell=True)


# One spelling per meaning wherever a person reads a table: an allocation
# TensorFlow recorded no op for, and (analysis.rollups.NO_SCOPE) an op in no
# name scope, "(top level)". Other unknown values show as "-".
NO_OP = "(no op recorded)"
# Columns several views show, written once: an allocation's (``allocations``;
# ``peak`` leaves the lifetime out, most rows being live then) and a step's
# (the reports; the terminal leaves the marker's ``name`` to ``--columns``).
ALLOCATION_COLUMNS = (
    "op",
    "dtype",
    "shape",
    "region",
    "requested_bytes",
    "allocated_bytes",
    "padding_bytes",
    "alloc_ps",
    "lifetime_ps",
    "step",
)
STEP_COLUMNS = (
    "step",
    "name",
    "start_ps",
    "duration_ps",
    "allocations",
    "allocated_bytes",
    "freed_bytes",
    "peak_in_use_bytes",
    "in_use_end_bytes",
    "growth_bytes",
)
# Bytes in use at a peak that no allocation of the capture holds, as rows of
# their own (``peak``, a failing test's table) so that the rows add up to the
# bytes in use: (attribution part, the row's op, its region).
UNOWNED_ROWS = (
    ("variable_bytes", "(variables allocated before the capture)", "before_capture"),
    ("xla_parameter_bytes", "(read as parameters by XLA programs)", "before_capture"),
    ("before_capture_bytes", "(allocated before the capture)", "before_capture"),
    ("reserved_bytes", "(reserved by the allocator)", "reserved"),
)
_OP_COLUMNS = frozenset({"op", "scope"})


def cell_text(column: str, value: Any, kind: Kind) -> str:
    """One cell as text: ``format_cell``, with a missing op or scope named as such."""
    if column in _OP_COLUMNS and is_missing(value):
        return NO_OP
    return format_cell(value, kind)


def formatted_rows(frame: pd.DataFrame, kinds: Mapping[str, Kind]) -> list[list[str]]:
    columns = [str(c) for c in frame.columns]
    series = [frame[c].tolist() for c in frame.columns]
    return [
        [cell_text(columns[i], series[i][r], kinds[columns[i]]) for i in range(len(columns))]
        for r in range(len(frame))
    ]


# Scopes TensorFlow wraps a function's ops in: they say nothing about the op (the
# analyses' analysis.layer_generation.WRAPPER, not imported: the command line
# starts without loading the analyses, tests/test_cli.py).
_WRAPPER = re.compile(r"^(?:(?:Stateful)?PartitionedCall(?:_\d+)?|__inference_.*|__forward_.*)$")
# Scopes that say which pass or copy an op belongs to: the backward pass of
# tf.GradientTape (``gradient_tape/``) and of a TF1 graph (``gradients/``), and
# the replicas of a distribution strategy (analysis.layer_generation._MARKER).
_DIRECTION = re.compile(r"^(?:gradient_tape|gradients|replica_\d+|tower_\d+)(?:_\d+)?$")
# A shape (``float32[128,2048]``) and a change of shape, as the diff writes it.
_SHAPE = re.compile(r"^(?P<dtype>[^\s\[\]]*)\[(?P<dims>[^\s\[\]]*)\]$")
_SHAPE_CHANGE = re.compile(r"^(?P<a>[^\s\[\]]*\[[^\s\[\]]*\]) → (?P<b>[^\s\[\]]*\[[^\s\[\]]*\])$")
# A source location: a file's path, ``:line``, and the function after a space.
_SOURCE = re.compile(r"^(?P<path>[^\s:]*/[^\s/:]+):(?P<line>\d+)(?P<rest>(?: \S+)?)$")


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut where it says least.

    An op or scope name (``a/b/c``, no spaces) keeps its op and its layer
    whole; its other scopes go while it is too long, TensorFlow's wrapper scopes
    (``StatefulPartitionedCall/``, ``__inference_…``) first, then the model's
    scope, then the scopes between the layer and the op, then the direction
    (``gradient_tape``); each run of dropped scopes reads ``…``. A source
    location (``dir/file.py:12 fn``) loses its directories first. Other text
    loses its middle."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    if "/" in text and not any(c.isspace() for c in text):
        cut = _shorten_name(text.split("/"), width)
        if cut is not None:
            return cut
    change = _SHAPE_CHANGE.match(text)
    if change is not None:
        compact = _compact_change(change["a"], change["b"])
        if len(compact) <= width:
            return compact
    source = _SOURCE.match(text)
    if source is not None:
        rest = text[len(source["path"]) :]
        dirs = source["path"].split("/")
        for start in range(1, len(dirs)):  # the directories nearest the file stay longest
            cut = "…/" + "/".join(dirs[start:]) + rest
            if len(cut) <= width:
                return cut
    head = (width - 1) // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def least_width(text: str) -> int:
    """The narrowest ``text`` stays readable at: a shape change's both sides
    (``float32[128→256,2048]``), a source location's file, line and function
    (``…/model.py:60 train``: which directory matters less); else 0."""
    change = _SHAPE_CHANGE.match(text)
    if change is not None:
        return len(_compact_change(change["a"], change["b"]))
    source = _SOURCE.match(text)
    if source is None:
        return 0
    return len(text) - len(source["path"]) + len(source["path"].rsplit("/", 1)[1]) + 2


def _compact_change(before: str, after: str) -> str:
    """Two shapes in one: what stayed written once, each change as ``old→new``
    (``float32[128,2048] → float32[256,2048]`` is ``float32[128→256,2048]``)."""
    a, b = _SHAPE.match(before), _SHAPE.match(after)
    if a is None or b is None:
        return f"{before}→{after}"
    dtype = a["dtype"] if a["dtype"] == b["dtype"] else f"{a['dtype']}→{b['dtype']}"
    dims_a, dims_b = a["dims"].split(","), b["dims"].split(",")
    if len(dims_a) != len(dims_b):  # another rank: both shapes whole
        return f"{dtype}[{a['dims']}]→[{b['dims']}]"
    dims = [x if x == y else f"{x}→{y}" for x, y in zip(dims_a, dims_b, strict=True)]
    return f"{dtype}[{','.join(dims)}]"


def _keep_order(parts: list[str]) -> tuple[list[int], int | None]:
    """The indexes of a name's scopes, most worth keeping first, and the layer's.

    The op (the last part), then the layer, the direction, the scopes between
    the layer and the op (nearest the op first), and the model; never the
    wrappers.
    The layer is the scope after the model's (``sequential/dense/MatMul``), or
    the first scope when the second is an op's (Keras names layers in snake
    case, TensorFlow's op scopes start with a capital: ``dense/Tensordot/MatMul``)
    or when there is only one (``adam/Sqrt``)."""
    last = len(parts) - 1
    wrappers = [i for i in range(last) if _WRAPPER.match(parts[i])]
    directions = [i for i in range(last) if i not in wrappers and _DIRECTION.match(parts[i])]
    scopes = [i for i in range(last) if i not in wrappers and i not in directions]
    model: list[int] = []
    layer: list[int] = []
    if len(scopes) == 1:
        layer = scopes[:1]
    elif len(scopes) > 1:
        second = parts[scopes[1]]
        if second[:1].isupper():
            layer = scopes[:1]
        else:
            model, layer = scopes[:1], scopes[1:2]
    middle = [i for i in reversed(scopes) if i not in model and i not in layer]
    # Wrappers are never kept: a name cut to fit has no room for what says nothing.
    return [last, *layer, *directions, *middle, *model], (layer[0] if layer else None)


def _joined(parts: list[str], kept: set[int]) -> str:
    """The parts kept, each run of dropped ones as ``…``; leading wrappers go
    without one where another ``…`` already says the name is cut."""
    out: list[str] = []
    for i, part in enumerate(parts):
        if i in kept:
            out.append(part)
        elif not out or out[-1] != "…":
            out.append("…")
    lead = next((i for i, part in enumerate(parts) if not _WRAPPER.match(part)), 0)
    if lead and lead in kept and out.count("…") > 1:
        out = out[1:]
    return "/".join(out)


def _shorten_name(parts: list[str], width: int) -> str | None:
    """``shorten`` of a name split at ``/``; None where not even the op fits whole."""
    order, layer = _keep_order(parts)
    kept: set[int] = set()
    for i in order:
        # The most worth keeping first; a scope too long to fit is skipped, not
        # the end: a shorter one after it may still fit.
        if len(_joined(parts, kept | {i})) <= width:
            kept.add(i)
        elif not kept:
            return None
    if layer is None or layer in kept:
        return _joined(parts, kept)
    # The layer does not fit whole: it is cut in the middle (its number stays) rather
    # than left out for the model's scope, which names every op alike.
    bare = _joined(parts, {order[0], layer})
    room = width - (len(bare) - len(parts[layer]))
    if room < 8:
        return _joined(parts, kept)
    head = (room - 1) // 2
    cut = parts[layer][:head] + "…" + parts[layer][len(parts[layer]) - (room - 1 - head) :]
    return _joined([*parts[:layer], cut, *parts[layer + 1 :]], {order[0], layer})


def render_plain_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[bool],
    width: int | None = None,
    indent: str = "",
) -> list[str]:
    """Aligned columns, two spaces apart, a dashed rule under the header.

    With ``width`` the widest text columns are shortened (middle ellipsis) until
    the lines fit; without it the output does not depend on any terminal.
    """
    # One line per row, whatever a name holds (a newline in an op name, escapes).
    headers = [visible(h, cell=True) for h in headers]
    rows = [[shorten(visible(c, cell=True), MAX_CELL_WIDTH) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    limits = list(widths)
    if width is not None:
        budget = width - len(indent) - 2 * (len(headers) - 1)
        while sum(limits) > budget:
            candidates = [i for i in range(len(limits)) if not right[i] and limits[i] > 8]
            if not candidates:
                break
            widest = max(candidates, key=lambda i: limits[i])
            limits[widest] -= max(1, min(limits[widest] - 8, sum(limits) - budget))

    def line(cells: Sequence[str]) -> str:
        parts = []
        for i, cell in enumerate(cells):
            text = shorten(cell, limits[i])
            parts.append(text.rjust(limits[i]) if right[i] else text.ljust(limits[i]))
        return (indent + "  ".join(parts)).rstrip()

    out = [line(headers), indent + "  ".join("-" * w for w in limits)]
    out.extend(line(row) for row in rows)
    return out
