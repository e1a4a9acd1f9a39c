"""The decoded content of one capture, whatever file format it came from.

Readers (``decode`` for ``.xplane.pb``, ``legacy`` for pre-converted
``memory_profile`` files) produce a ``MemoryTrace``; ``Profile`` builds every
table from it and never looks at the file again.
"""

from __future__ import annotations

import mmap
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

if TYPE_CHECKING:
    from traceparse.decode.batch import BatchRecord
    from traceparse.decode.failure import FailureRecord
    from traceparse.decode.runs import RunRecords
    from traceparse.decode.sources import SourceRecord
    from traceparse.decode.variables import VariableInventory
from traceparse.decode.xla import XlaSource

# One row per allocator event, in time order. Bytes are Int64, NA when the
# event did not carry the stat; strings are categoricals.
EVENT_COLUMNS: dict[str, str] = {
    "plane": "category",
    "is_allocation": "bool",
    "time_ps": "int64",
    "allocator": "category",
    "address": "Int64",
    "requested_bytes": "Int64",
    "allocation_bytes": "Int64",
    "bytes_allocated": "Int64",
    "bytes_reserved": "Int64",
    "bytes_available": "Int64",
    "peak_bytes_in_use": "Int64",
    "fragmentation": "Float64",
    "tf_op": "category",
    "region_type": "category",
    "data_type": "Int64",
    "shape": "category",
    "step_id": "Int64",
}

STEP_MARKER_COLUMNS: dict[str, str] = {
    "name": "category",
    "step": "int64",
    "start_ps": "int64",
    "end_ps": "int64",
}

OP_TIME_COLUMNS: dict[str, str] = {"op": "object", "count": "int64", "total_ps": "int64"}

# Runs of TF functions on the host's op lines ("__inference_f_27:__inference_f_27"
# events): when each compiled program may have been running.
FUNCTION_RUN_COLUMNS: dict[str, str] = {
    "function": "object",
    "start_ps": "int64",
    "end_ps": "int64",
}


# Zeros of this many bytes or more come on private anonymous pages that are
# never written: the kernel backs them with its one page of zeros, so they hold
# no memory until written (an all-False mask, one group's codes). Smaller ones
# are not worth a mapping each.
_UNWRITTEN_BYTES = 1 << 20


def unwritten_zeros(rows: int, dtype: npt.DTypeLike) -> np.ndarray:
    """``np.zeros(rows, dtype)`` that holds no memory until written.

    ``np.zeros`` may reuse the C heap, which writes the zeros; these pages are
    the kernel's (private: a shared mapping would take memory when read).
    """
    size = rows * np.dtype(dtype).itemsize
    if size < _UNWRITTEN_BYTES:
        return np.zeros(rows, dtype=dtype)
    pages = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(pages, dtype=dtype)


def masked(values: np.ndarray, mask: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """``values`` as Int64 or Float64 with NA where ``mask``; a large mask with
    no NA is replaced by one that holds no memory (``unwritten_zeros``)."""
    if values.size >= _UNWRITTEN_BYTES and not mask.any():
        mask = unwritten_zeros(values.size, bool)
    if values.dtype.kind == "f":
        return pd.arrays.FloatingArray(values, mask)
    return pd.arrays.IntegerArray(values, mask)


def lean_masks(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each large Int64 or Float64 column that has no NA on a
    mask that holds no memory (``unwritten_zeros``); values are shared, not copied."""
    columns: dict[str, Any] = {}
    for column in frame.columns:
        columns[column] = series = frame[column]
        array = series.array
        if (
            isinstance(array, (pd.arrays.IntegerArray, pd.arrays.FloatingArray))
            and len(array) >= _UNWRITTEN_BYTES
            and not array.isna().any()
        ):
            values = array.to_numpy(dtype=array.dtype.numpy_dtype)  # no NA: no copy
            columns[column] = type(array)(values, unwritten_zeros(len(values), bool))
    # A new frame from arrays and Series, copy=False: assigning would copy arrays.
    return pd.DataFrame(columns, index=frame.index, copy=False)


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    """A zero-row frame with the given columns and dtypes."""
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})


def categorical_from_distinct(distinct: Any, inverse: np.ndarray) -> pd.Categorical:
    """``pd.Categorical(distinct[inverse])``, converting only ``distinct``.

    pandas' string dtype makes building a categorical from many strings slow;
    the distinct values give the same categories (values, order and dtype), and
    each row's code is then a lookup.
    """
    if isinstance(distinct, np.ndarray) and distinct.dtype == object:
        text = distinct[~pd.isna(distinct)]
        if all(type(v) is str for v in text):
            # Plain text, the usual case: pandas would sort it and infer its string
            # dtype, as a CategoricalDtype of the sorted names does, in less time.
            names = sorted(set(text))
            position = {name: i for i, name in enumerate(names)}
            codes = np.array([position.get(v, -1) for v in distinct], dtype=np.int64)
            dtype = pd.CategoricalDtype(names)
            return pd.Categorical.from_codes(codes[inverse], dtype=dtype, validate=False)
    small = pd.Categorical(distinct)
    return pd.Categorical.from_codes(small.codes[inverse], dtype=small.dtype, validate=False)


def categorical_take(values: Any, codes: np.ndarray) -> pd.Categorical:
    """``pd.Categorical(values[codes])`` where code -1 is NA: categories hold only
    the values used, sorted, as if built from the rows themselves."""
    used, inverse = codes_used(codes, len(values))
    with warnings.catch_warnings():
        # pandas 2.1 warns that a NumpyExtensionArray (Series.array) is not an
        # ExtensionArray (its own check misses the class); later versions don't.
        warnings.simplefilter("ignore", FutureWarning)
        distinct = pd.api.extensions.take(values, used, allow_fill=True)
    return categorical_from_distinct(distinct, inverse)


def unique_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for non-negative integer ids; in
    linear time when they are small, as metadata ids are."""
    top = int(values.max()) if values.size else 0
    if top > 8 * values.size + (1 << 16):
        return np.unique(values, return_inverse=True)
    used, inverse = codes_used(values.astype(np.intp), top + 1)
    return used.astype(values.dtype), inverse


def codes_used(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)`` for codes in [-1, size), in linear time."""
    shifted = np.asarray(codes, dtype=np.intp) + 1
    seen = np.zeros(size + 1, dtype=bool)
    seen[shifted] = True
    return np.flatnonzero(seen) - 1, (np.cumsum(seen) - 1)[shifted]


@dataclass
class MemoryTrace:
    """Everything traceparse needs from one host's capture."""

    path: str
    host: str
    format: str  # "xplane", "memory_profile.json" or "memory_profile"
    events: pd.DataFrame
    step_markers: pd.DataFrame = field(default_factory=lambda: empty_frame(STEP_MARKER_COLUMNS))
    op_types: dict[str, str] = field(default_factory=dict)
    op_time: pd.DataFrame = field(default_factory=lambda: empty_frame(OP_TIME_COLUMNS))
    start_ns: int | None = None
    duration_ps: int | None = None
    diagnostics: list[str] = field(default_factory=list)
    # The variable inventory written beside the capture, when there is one.
    inventory: VariableInventory | None = None
    # The exception the capture ended in (``<host>.failure.json``), when it did.
    failure: FailureRecord | None = None
    # The /host:metadata plane's undecoded bytes (XLA programs), when present.
    xla: XlaSource | None = None
    function_runs: pd.DataFrame = field(default_factory=lambda: empty_frame(FUNCTION_RUN_COLUMNS))
    # Every stat metadata name of the planes with events (stat keys and the
    # strings events refer to, such as an HLO op's ``hlo_module``): a program
    # whose module is named here ran, or was compiled, during the capture.
    stat_names: frozenset[str] = frozenset()
    # Program runs on the host lines and the allocations made in them (XLA captures).
    runs: RunRecords | None = None
    # The source record written beside the capture (docs/sources.md), when there is one.
    sources: SourceRecord | None = None
    # Whether one was beside it but refused (its diagnostic says why).
    sources_refused: bool = False
    # The batch size the capture's steps saw (``<host>.batch.json``), when recorded.
    batch: BatchRecord | None = None
