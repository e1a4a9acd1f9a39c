"""The dtype contract of every public table: one declaration each, applied where it is built.

Each column is declared once, with its dtype and meaning, in ``tables/columns.py``
(``DTYPES`` is its dtypes): a column name has one dtype in every table. Bytes are nullable
``Int64`` wherever they appear (NA: the capture did not say), times in
picoseconds are ``int64`` (``Int64`` where a time can be unknown), repeated
strings are categoricals with string categories. A ``Table`` lists its
columns in order and which of them may hold NA; ``conform`` casts a frame to
it (a frame that conforms is returned as it is) and gives ``host`` and
``allocator`` the categories shared by every table of a Profile (``shared``), so that
tables merge and compare on them without casting to object. ``concat`` joins
per-host tables with the union of their categories.

    >>> STEP_MARKERS.dtypes["host"], STEP_MARKERS.dtypes["step"]
    ('category', 'Int64')
    >>> dtype_of("peak_in_use_bytes"), dtype_of("alloc_ps")
    ('Int64', 'int64')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from traceparse.tables.columns import CATEGORY, COLUMNS, ROLE_BYTE_COLUMNS

# One declaration per column (name, dtype, meaning): tables/columns.py.
DTYPES: dict[str, str] = {name: column.dtype for name, column in COLUMNS.items()}


def dtype_of(column: str) -> str:
    """The dtype of ``column`` in every table; ``KeyError`` for a name never declared."""
    try:
        return COLUMNS[column].dtype
    except KeyError:
        raise KeyError(
            f"{column}: no such column declared; add it to traceparse.tables.columns"
        ) from None


@dataclass(frozen=True)
class Table:
    """A public table: its columns in order, their dtypes and which may hold NA."""

    name: str
    columns: tuple[str, ...]
    nullable: frozenset[str] = field(default_factory=frozenset)

    @cached_property
    def dtypes(self) -> dict[str, str]:
        return {column: dtype_of(column) for column in self.columns}

    def empty(self) -> pd.DataFrame:
        """A zero-row frame with these columns and dtypes."""
        return pd.DataFrame({c: _empty_series(d) for c, d in self.dtypes.items()})

    def markdown(self) -> str:
        """The table's columns as a Markdown table: name, dtype, may be NA, meaning."""
        lines = ["| column | dtype | NA | meaning |", "|---|---|---|---|"]
        for name in self.columns:
            na = "yes" if name in self.nullable else ""
            lines.append(f"| `{name}` | {self.dtypes[name]} | {na} | {COLUMNS[name].meaning} |")
        return "\n".join(lines) + "\n"


# Every declared table, by name: what the contract test walks.
TABLES: dict[str, Table] = {}


def declare(name: str, columns: Iterable[str], nullable: Iterable[str] = ()) -> Table:
    """Declare (or re-declare, adding columns) a public table."""
    table = Table(name, tuple(columns), frozenset(nullable))
    unknown = table.nullable - set(table.columns)
    if unknown:
        raise ValueError(f"{name}: nullable columns not in the table: {sorted(unknown)}")
    table.dtypes  # noqa: B018 (fails now, at import, for an undeclared name)
    TABLES[name] = table
    return table


def conform(
    frame: pd.DataFrame,
    table: Table,
    categories: Mapping[str, pd.CategoricalDtype] | None = None,
) -> pd.DataFrame:
    """``frame`` with ``table``'s columns, in order, each of its declared dtype.

    ``categories`` fixes the dtype of some categorical columns (a Profile's
    hosts and allocators, see ``shared``); other categoricals keep their
    categories, as strings. A frame that already conforms is returned as it
    is, and only the columns that differ are converted: this runs on every
    table of every load.
    """
    fixed = categories or {}
    have = frame.dtypes
    changed: dict[str, pd.Series] = {}
    for column, dtype in table.dtypes.items():
        current = have[column]
        if dtype == CATEGORY:
            wanted = fixed.get(column)
            if wanted is not None:
                if current != wanted:
                    changed[column] = _as_category(frame[column], wanted)
            elif not (isinstance(current, pd.CategoricalDtype) and _string_categories(current)):
                changed[column] = _as_category(frame[column], None)
        elif str(current) != dtype:
            changed[column] = frame[column].astype(dtype)
    out = frame.assign(**changed) if changed else frame
    if tuple(out.columns) != table.columns:
        out = out[list(table.columns)]
    return out


def shared(names: Iterable[str]) -> pd.CategoricalDtype:
    """The categorical dtype of a column whose categories every table shares."""
    return pd.CategoricalDtype(_names(sorted(set(names))))


def violations(frame: pd.DataFrame, table: Table) -> list[str]:
    """How ``frame`` breaks ``table``'s contract (empty when it keeps it)."""
    found = []
    if tuple(frame.columns) != table.columns:
        found.append(f"{table.name}: columns {list(frame.columns)} != {list(table.columns)}")
    for column, dtype in table.dtypes.items():
        if column not in frame.columns:
            continue
        values = frame[column]
        if dtype == CATEGORY:
            ok = isinstance(values.dtype, pd.CategoricalDtype) and _string_categories(values.dtype)
        else:
            ok = str(values.dtype) == dtype
        if not ok:
            found.append(f"{table.name}.{column}: {values.dtype}, declared {dtype}")
        if column not in table.nullable and values.isna().any():
            found.append(f"{table.name}.{column}: holds NA, declared never NA")
    return found


def concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per-host frames as one, each categorical column with the union of their categories."""
    if len(frames) == 1:
        return frames[0]
    frames = [frame.copy(deep=False) for frame in frames]
    for column in frames[0].columns:
        dtypes = [frame[column].dtype for frame in frames]
        if all(isinstance(d, pd.CategoricalDtype) for d in dtypes):
            union = shared(str(c) for d in dtypes for c in d.categories)
            for frame in frames:
                frame[column] = _as_category(frame[column], union)
    return pd.concat(frames, ignore_index=True)


def _names(names: Iterable[str]) -> pd.Index:
    """Category names, with the dtype pandas gives text (str in pandas 3, object before)."""
    return pd.Index(list(names), dtype=_TEXT)


_TEXT = pd.Index(["text"]).dtype
_TEXT_ONLY = not isinstance(_TEXT, np.dtype)  # pandas 3's str dtype holds nothing but text


def _as_category(values: pd.Series, wanted: pd.CategoricalDtype | None) -> pd.Series:
    if wanted is not None:
        if values.dtype == wanted:
            return values
        if not isinstance(values.dtype, pd.CategoricalDtype):
            return values.astype(object).astype(wanted)
        return values.cat.set_categories(wanted.categories).astype(wanted)
    if not isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object).astype(CATEGORY)
    if _string_categories(values.dtype):
        return values
    # The same codes over string categories (an all-NA column may have numeric ones).
    dtype = pd.CategoricalDtype(_names(str(c) for c in values.cat.categories))
    codes = values.cat.codes.to_numpy(dtype=np.int64)
    return pd.Series(
        pd.Categorical.from_codes(codes, dtype=dtype, validate=False),
        index=values.index,
        name=values.name,
    )


def _string_categories(dtype: pd.CategoricalDtype) -> bool:
    categories = dtype.categories
    if len(categories) == 0:
        return True
    if categories.dtype != _TEXT:
        return False
    return _TEXT_ONLY or pd.api.types.infer_dtype(categories) == "string"


def _empty_series(dtype: str) -> pd.Series:
    if dtype == CATEGORY:
        return pd.Series(pd.Categorical([], categories=_names([])))
    return pd.Series(dtype=dtype)


# The tables built from a capture (tables/build.py); the analyses declare theirs
# in their own modules with ``declare``.
ALLOCATIONS = declare(
    "allocations",
    [
        "host",
        "allocator",
        "address",
        "op",
        "op_type",
        "region",
        "dtype",
        "shape",
        "num_elements",
        "estimated_bytes",
        "requested_bytes",
        "allocated_bytes",
        "padding_bytes",
        "estimate_status",
        "alloc_ps",
        "free_ps",
        "lifetime_ps",
        "step",
        # The allocator's own step id, and the rows of the timeline where the
        # allocation and its free happen (for "live at" queries).
        "step_id",
        "alloc_event",
        "free_event",
        # The XLA program allocation a slab is linked to (docs/xla.md).
        "xla_program",
        "xla_allocation_index",
        # The user's Python frame that made it, where the capture has frames.
        "source",
    ],
    nullable=[
        "xla_program",
        "xla_allocation_index",
        "source",
        "allocator",
        "address",
        "op",
        "op_type",
        "region",
        "dtype",
        "shape",
        "num_elements",
        "estimated_bytes",
        "requested_bytes",
        "allocated_bytes",
        "padding_bytes",
        "free_ps",
        "lifetime_ps",
        "step",
        "step_id",
        "free_event",
    ],
)

FREES_WITHOUT_ALLOCATION = declare(
    "frees_without_allocation",
    ["host", "allocator", "address", "allocated_bytes", "free_ps", "free_event", "step"],
    nullable=["allocator", "address", "allocated_bytes", "step"],
)

TIMELINE = declare(
    "timeline",
    [
        "host",
        "allocator",
        "time_ps",
        "kind",
        "in_use_bytes",
        "heap_bytes",
        "reserved_bytes",
        "available_bytes",
        "fragmentation",
        "delta_bytes",
        "address",
        "requested_bytes",
        "allocation_bytes",
        "peak_bytes_in_use",
        "op",
        "step",
    ],
    nullable=[
        "allocator",
        "in_use_bytes",
        "heap_bytes",
        "reserved_bytes",
        "available_bytes",
        "fragmentation",
        "delta_bytes",
        "address",
        "requested_bytes",
        "allocation_bytes",
        "peak_bytes_in_use",
        "op",
        "step",
    ],
)

STEP_MARKERS = declare("step_markers", ["name", "step", "start_ps", "end_ps", "host"])
# The recorded Python stacks, one row per frame (docs/sources.md).
STACKS = declare("stacks", ["host", "stack", "depth", "frame", "user"])


_LAYER_BYTES = [
    *ROLE_BYTE_COLUMNS,
    "live_at_peak_bytes",
    "allocated_bytes",
    "live_tensors",
    "largest_tensor",
    "largest_shape",
    "largest_bytes",
]
_LAYER_NA = ["largest_tensor", "largest_shape", "largest_bytes"]
LAYERS = declare("layers", ["host", "allocator", "layer", *_LAYER_BYTES], _LAYER_NA)
LAYERS_BY_REPLICA = declare(
    "layers_by_replica",
    ["host", "allocator", "layer", "replica", *_LAYER_BYTES],
    ["replica", *_LAYER_NA],
)
# layers(depth=N > 1): a row per layer and path of nested layers inside it.
LAYER_PATHS = declare(
    "layer_paths", ["host", "allocator", "layer", "path", *_LAYER_BYTES], _LAYER_NA
)
LAYER_PATHS_BY_REPLICA = declare(
    "layer_paths_by_replica",
    ["host", "allocator", "layer", "path", "replica", *_LAYER_BYTES],
    ["replica", *_LAYER_NA],
)

VARIABLES = declare(
    "variables",
    [
        "host",
        "device",
        "name",
        "path",
        "role",
        "belongs_to",
        "layer",
        "model",
        "dtype",
        "shape",
        "estimated_bytes",
        "allocator",
        "traced",
        "at_start",
        "at_stop",
    ],
    ["device", "belongs_to", "layer", "model", "dtype", "shape", "estimated_bytes", "allocator"],
)

XLA_PROGRAMS = declare(
    "xla_programs",
    [
        "host",
        "program",
        "module",
        "function",
        "instructions",
        "temp_bytes",
        "output_bytes",
        "parameter_bytes",
        "constant_bytes",
        "thread_local_bytes",
        "runs",
    ],
    ["module", "function"],
)

XLA_BUFFERS = declare(
    "xla_buffers",
    [
        "host",
        "program",
        "allocation_index",
        "allocation_kind",
        "parameter_number",
        "offset",
        "size_bytes",
        "instruction",
        "opcode",
        "dtype",
        "shape",
        "estimated_bytes",
        "tf_op",
        "tf_op_type",
        "source",
        "logical_buffer",
        "instruction_id",
        "named_by",
    ],
    [
        "parameter_number",
        "dtype",
        "shape",
        "estimated_bytes",
        "tf_op",
        "tf_op_type",
        "source",
        "instruction_id",
        "named_by",
    ],
)

XLA_PARAMETERS = declare(
    "xla_parameters",
    [
        "host",
        "program",
        "module",
        "function",
        "parameter_number",
        "allocation_index",
        "instruction",
        "dtype",
        "shape",
        "size_bytes",
        "updated",
        "read_by",
        "allocator",
        "ran",
        "counted",
        "reason",
    ],
    ["module", "function", "instruction", "dtype", "shape", "read_by", "allocator", "reason"],
)
