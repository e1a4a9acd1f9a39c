"""Tensor shapes and the shape x dtype byte estimate (the DataType enum is in decode).

The estimate is the plain formula ``elements x itemsize``. It is only given when
both parts are known exactly: an unknown dimension, or a dtype whose elements
have no fixed size (string, resource, variant), gives ``None`` and a reason,
never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceparse.decode.datatypes import dtype_code, dtype_name, itemsize
from traceparse.decode.trace import categorical_take


def parse_shape(text: str | None) -> tuple[int, ...] | None:
    """Parse the profiler's shape text (``"[128,256,256]"``; ``"[]"`` is a scalar).

    Returns None for an empty or unparseable text and for unknown dimensions
    (``?`` or negative), which is what a temp buffer without a shape gives.
    """
    if text is None:
        return None
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return None
    body = body[1:-1].strip()
    if not body:
        return ()
    dims: list[int] = []
    for part in body.split(","):
        part = part.strip()
        # ASCII digits only ("²".isdigit() is true, int("²") fails), and no more
        # than an int64 holds: the text comes from the capture, which may be hostile.
        if not (part.isascii() and part.isdigit() and len(part) <= 19):
            return None
        dims.append(int(part))
    return tuple(dims)


@dataclass(frozen=True)
class Estimate:
    """The shape x dtype estimate of a tensor's bytes, or why there is none."""

    bytes: int | None
    shape: tuple[int, ...] | None
    dtype: str | None
    num_elements: int | None
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.bytes is not None


def estimate_bytes(value: Any, dtype: Any = None) -> Estimate:
    """Estimate the bytes a tensor occupies: elements x itemsize.

    ``value`` is a ``tf.Tensor``, ``tf.Variable``, ``tf.TensorSpec`` (or another
    TypeSpec with ``shape`` and ``dtype``), a numpy array, or a ``(shape, dtype)``
    pair; ``estimate_bytes(shape, dtype)`` also works. Works without TensorFlow
    for everything but TensorFlow objects.

    >>> estimate_bytes(((128, 256, 256), "float32")).bytes
    33554432
    >>> estimate_bytes(([None, 3], "float32")).reason
    'dimension 0 of the shape is unknown'
    """
    if dtype is None and isinstance(value, tuple) and len(value) == 2:
        value, dtype = value
    if dtype is None:
        shape_obj, dtype = _shape_and_dtype_of(value)
    else:
        shape_obj = value
    name = _dtype_to_name(dtype)
    shape, why = _normalise_shape(shape_obj)
    elements = None if shape is None else math.prod(shape)
    if name is None:
        return Estimate(None, shape, None, elements, f"unknown dtype {dtype!r}")
    if shape is None:
        return Estimate(None, None, name, None, why)
    size = itemsize(name)
    if size is None:
        return Estimate(
            None, shape, name, elements, f"{name} elements have no fixed size in memory"
        )
    return Estimate(elements * size, shape, name, elements)  # type: ignore[operator]


def _shape_and_dtype_of(value: Any) -> tuple[Any, Any]:
    if isinstance(value, np.ndarray | np.generic):
        return value.shape, value.dtype
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return value.shape, value.dtype
    raise TypeError(
        "estimate_bytes takes a tensor, variable, TypeSpec, numpy array or (shape, dtype) pair, "
        f"not {type(value).__name__}"
    )


def _dtype_to_name(dtype: Any) -> str | None:
    if isinstance(dtype, int | np.integer):
        return dtype_name(int(dtype))
    if isinstance(dtype, str):
        code = dtype_code(dtype)
        return None if code is None else dtype_name(code)
    # tf.DType has .name in TF's spelling; numpy dtypes have .name too.
    name = getattr(dtype, "name", None)
    if isinstance(name, str):
        return _dtype_to_name(name)
    try:
        return _dtype_to_name(np.dtype(dtype).name)
    except TypeError:
        return None


def _normalise_shape(shape: Any) -> tuple[tuple[int, ...] | None, str | None]:
    if shape is None:
        return None, "the shape is unknown"
    if isinstance(shape, str):
        parsed = parse_shape(shape)
        return (parsed, None) if parsed is not None else (None, f"unparseable shape {shape!r}")
    dims_attr = getattr(shape, "as_list", None)  # tf.TensorShape
    if callable(dims_attr):
        if getattr(shape, "rank", 0) is None:
            return None, "the rank is unknown"
        shape = dims_attr()
    if not isinstance(shape, Iterable):
        shape = (shape,)
    dims: list[int] = []
    for axis, dim in enumerate(shape):
        dim = getattr(dim, "value", dim)  # TF1 Dimension objects
        if dim is None or (isinstance(dim, int | np.integer) and dim < 0):
            return None, f"dimension {axis} of the shape is unknown"
        dims.append(int(dim))
    return tuple(dims), None


# Vectorised versions used to build the allocation table.

_MAX_INT64 = 2**63 - 1


def estimate_columns(
    codes: Sequence[float] | np.ndarray | pd.Series, shapes: pd.Series
) -> tuple[pd.Series, pd.Series, pd.Series]:
    """dtype names, element counts and estimated bytes for table columns.

    ``codes`` holds DataType enum values (NA where unknown); ``shapes`` the
    profiler's shape text. Only distinct codes and (dtype, shape) pairs are
    looked at; rows take their values by index.
    """
    code_series = pd.Series(codes, index=shapes.index, dtype="Int64", copy=False)
    code_index, distinct_codes = pd.factorize(code_series)
    # Mapping the distinct codes gives the names' dtype that mapping the rows
    # would (str, or Int64 when no code has a name).
    names = pd.Series(distinct_codes).map(lambda c: dtype_name(c) if pd.notna(c) else None)
    dtype_col = pd.Series(categorical_take(names.array, code_index), index=shapes.index)
    shape_index, shape_texts = pd.factorize(shapes)
    # One key per (dtype, shape) pair; -1 (NA) shifts to 0.
    dtype_index = dtype_col.cat.codes.to_numpy(dtype=np.int64)
    stride = len(shape_texts) + 1
    inverse, pairs = pd.factorize((dtype_index + 1) * stride + shape_index + 1)
    dtype_names = np.asarray(dtype_col.cat.categories, dtype=object)
    texts = np.asarray(shape_texts, dtype=object)
    counts = np.zeros(pairs.size, dtype=np.int64)
    sizes = np.zeros(pairs.size, dtype=np.int64)
    has_count = np.zeros(pairs.size, dtype=bool)
    has_size = np.zeros(pairs.size, dtype=bool)
    for i, pair in enumerate(pairs.tolist()):
        name_at, text_at = divmod(pair, stride)
        text = texts[text_at - 1] if text_at else None
        shape = parse_shape(text) if isinstance(text, str) else None
        if shape is None:
            continue
        count = math.prod(shape)
        if count > _MAX_INT64:  # an absurd shape: no tensor has that many elements
            continue
        counts[i], has_count[i] = count, True
        name = dtype_names[name_at - 1] if name_at else None
        size = itemsize(name) if isinstance(name, str) else None
        if size is not None and count * size <= _MAX_INT64:
            sizes[i], has_size[i] = count * size, True
    elements = pd.arrays.IntegerArray(counts[inverse], ~has_count[inverse])
    estimated = pd.arrays.IntegerArray(sizes[inverse], ~has_size[inverse])
    return (
        dtype_col,
        pd.Series(elements, index=shapes.index, copy=False),
        pd.Series(estimated, index=shapes.index, copy=False),
    )


ESTIMATE_STATUSES = ("match", "over", "under", "unknown")
_STATUS_DTYPE = pd.CategoricalDtype(list(ESTIMATE_STATUSES))


def estimate_status(estimated: pd.Series, requested: pd.Series) -> pd.Series:
    """``match`` when the request equals the estimate, ``over`` when the request
    is larger than the shape explains, ``under`` when smaller, else ``unknown``."""
    known = estimated.notna().to_numpy(dtype=bool) & requested.notna().to_numpy(dtype=bool)
    # Compared as integers: a float difference would lose bytes past 2**53.
    est = estimated.to_numpy(dtype=np.int64, na_value=0)
    req = requested.to_numpy(dtype=np.int64, na_value=0)
    # The first that holds wins: unknown, match, over, else under (set in reverse,
    # in int8 codes: the rows can be millions).
    status = np.full(len(est), ESTIMATE_STATUSES.index("under"), dtype=np.int8)
    status[req > est] = ESTIMATE_STATUSES.index("over")
    status[req == est] = ESTIMATE_STATUSES.index("match")
    status[~known] = ESTIMATE_STATUSES.index("unknown")
    return pd.Series(
        pd.Categorical.from_codes(status, dtype=_STATUS_DTYPE, validate=False),
        index=estimated.index,
    )
