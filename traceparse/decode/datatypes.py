"""TensorFlow's DataType enum: the numbers a capture stores, their names and item sizes.

A wire fact, so it lives with the decoder; tables/dtypes builds the shape x
dtype estimate on it.
"""

from __future__ import annotations

# DataType enum value -> (TensorFlow's Python dtype name, bytes per element).
# None means the element size is not fixed: a ``tstring`` is a 24-byte header
# whose characters live elsewhere; resource and variant elements are handles.
_DTYPES: dict[int, tuple[str, int | None]] = {
    1: ("float32", 4),
    2: ("float64", 8),
    3: ("int32", 4),
    4: ("uint8", 1),
    5: ("int16", 2),
    6: ("int8", 1),
    7: ("string", None),
    8: ("complex64", 8),
    9: ("int64", 8),
    10: ("bool", 1),
    11: ("qint8", 1),
    12: ("quint8", 1),
    13: ("qint32", 4),
    14: ("bfloat16", 2),
    15: ("qint16", 2),
    16: ("quint16", 2),
    17: ("uint16", 2),
    18: ("complex128", 16),
    19: ("float16", 2),
    20: ("resource", None),
    21: ("variant", None),
    22: ("uint32", 4),
    23: ("uint64", 8),
    24: ("float8_e5m2", 1),
    25: ("float8_e4m3fn", 1),
    26: ("float8_e4m3fnuz", 1),
    27: ("float8_e4m3b11fnuz", 1),
    28: ("float8_e5m2fnuz", 1),
    # TensorFlow stores the sub-byte integer and float types one element per byte.
    29: ("int4", 1),
    30: ("uint4", 1),
    31: ("int2", 1),
    32: ("uint2", 1),
    33: ("float4_e2m1fn", 1),
}

_ITEMSIZE_BY_NAME: dict[str, int | None] = {name: size for name, size in _DTYPES.values()}
_CODE_BY_NAME: dict[str, int] = {name: code for code, (name, _) in _DTYPES.items()}
# xprof and TensorFlow's C++ DataTypeString() spell three types differently.
_CODE_BY_NAME.update({"float": 1, "double": 2, "half": 19})


def dtype_name(code: int) -> str | None:
    """The Python dtype name of a ``DataType`` enum value (``1`` -> ``"float32"``)."""
    entry = _DTYPES.get(int(code))
    return entry[0] if entry else None


def dtype_code(name: str) -> int | None:
    """The enum value for a dtype name in TF's Python or C++ spelling."""
    return _CODE_BY_NAME.get(name.strip().lower().removeprefix("dt_"))


def itemsize(name: str) -> int | None:
    """Bytes per element, or None where the size is not fixed (string, resource, variant)."""
    return _ITEMSIZE_BY_NAME.get(name)
