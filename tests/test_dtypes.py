"""estimate_bytes and the DataType table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traceparse import estimate_bytes
from traceparse.tables.dtypes import (
    dtype_code,
    dtype_name,
    estimate_columns,
    estimate_status,
    parse_shape,
)


def test_the_seed_example() -> None:
    est = estimate_bytes(((128, 256, 256), "float32"))
    assert est.bytes == 33_554_432
    assert est.num_elements == 8_388_608
    assert est.reason is None and bool(est)


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((), "float64", 8),  # a scalar is one element
        ((0, 5), "float32", 0),
        ((3, 4), np.float16, 24),
        ([2, 2], "bfloat16", 8),
        ((10,), "complex128", 160),
        ((7,), "bool", 7),
        ((9,), "int4", 9),  # TensorFlow keeps sub-byte types one per byte
        ((4,), 1, 16),  # the DataType enum value
        ((4,), "half", 8),  # C++ spelling
    ],
)
def test_known_shapes_and_dtypes(shape: tuple[int, ...], dtype: object, expected: int) -> None:
    assert estimate_bytes(shape, dtype).bytes == expected


@pytest.mark.parametrize(
    ("shape", "dtype", "reason"),
    [
        ((None, 3), "float32", "dimension 0 of the shape is unknown"),
        ((3, -1), "float32", "dimension 1 of the shape is unknown"),
        ((3,), "string", "string elements have no fixed size in memory"),
        ((1,), "resource", "resource elements have no fixed size in memory"),
        ((1,), "variant", "variant elements have no fixed size in memory"),
        ((1,), "nonsense", "unknown dtype 'nonsense'"),
    ],
)
def test_unknowns_give_none_and_a_reason(shape: object, dtype: str, reason: str) -> None:
    est = estimate_bytes(shape, dtype)
    assert est.bytes is None and not est
    assert est.reason == reason


def test_numpy_arrays() -> None:
    assert estimate_bytes(np.zeros((5, 6), np.int32)).bytes == 120


def test_rejects_things_without_shape_and_dtype() -> None:
    with pytest.raises(TypeError, match="not object"):
        estimate_bytes(object())


def test_tensorflow_objects() -> None:
    tf = pytest.importorskip("tensorflow")
    assert estimate_bytes(tf.zeros((128, 256, 256))).bytes == 33_554_432
    assert estimate_bytes(tf.Variable(tf.zeros((3, 4), tf.float64))).bytes == 96
    assert estimate_bytes(tf.TensorSpec((2, 3), tf.bfloat16)).bytes == 12
    assert estimate_bytes(tf.TensorSpec((None, 3), tf.float32)).bytes is None
    assert estimate_bytes(tf.TensorSpec(None, tf.float32)).reason == "the rank is unknown"
    strings = estimate_bytes(tf.constant(["a", "bc"]))
    assert strings.bytes is None and strings.num_elements == 2
    assert estimate_bytes(tf.RaggedTensorSpec((2, None), tf.int32)).bytes is None


def test_every_tensorflow_dtype_agrees_with_tensorflow() -> None:
    tf = pytest.importorskip("tensorflow")
    from tensorflow.core.framework import types_pb2

    for code in types_pb2.DataType.values():
        if code == 0 or code >= 100:
            continue
        dtype = tf.dtypes.as_dtype(code)
        assert dtype_name(code) == dtype.name
        assert dtype_code(dtype.name) == code
        if dtype not in (tf.string, tf.resource, tf.variant):
            assert estimate_bytes((2,), dtype).bytes == 2 * dtype.size


def test_parse_shape() -> None:
    assert parse_shape("[128,256,256]") == (128, 256, 256)
    assert parse_shape("[]") == ()
    assert parse_shape(" [ 1 , 2 ] ") == (1, 2)
    for bad in ("", None, "[?,3]", "[-1]", "128", "[1,,2]"):
        assert parse_shape(bad) is None


def test_table_columns_and_status() -> None:
    shapes = pd.Series(["[2,3]", "[2,3]", "", "[4]", None], dtype="category")
    codes = pd.Series([1, 1, 1, 7, pd.NA], dtype="Int64")
    dtypes, elements, estimated = estimate_columns(codes, shapes)
    assert dtypes.astype(object).where(dtypes.notna(), None).tolist() == [
        "float32",
        "float32",
        "float32",
        "string",
        None,
    ]
    assert elements.tolist() == [6, 6, pd.NA, 4, pd.NA]
    assert estimated.tolist() == [24, 24, pd.NA, pd.NA, pd.NA]
    requested = pd.Series([24, 20, 8, 96, 1], dtype="Int64")
    status = estimate_status(estimated, requested)
    assert status.tolist() == ["match", "under", "unknown", "unknown", "unknown"]
    assert estimate_status(
        pd.Series([8], dtype="Int64"), pd.Series([16], dtype="Int64")
    ).tolist() == ["over"]
