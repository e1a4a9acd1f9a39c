"""The one conversion of traceparse's values to JSON: every JSON output goes through here.

``json_value`` turns what the tables and analyses hold into plain JSON types:

- missing values (``None``, ``pd.NA``, ``pd.NaT``, NaN, infinities): ``null``;
- numpy and pandas scalars: ``bool``, ``int`` (exact, never via float) or ``float``;
- durations (``pd.Timedelta``, ``datetime.timedelta``, ``np.timedelta64``): seconds,
  a number (1.5 s is ``1.5``); instants: ISO 8601 text;
- tuples, lists, arrays, Series and categoricals: lists; mappings: objects with
  text keys; a DataFrame: a list of row objects, columns in order;
- anything else: its ``str``.

CSV, JSON and Parquet exports, the JSON report, ``summary --format json`` and
the batch results all use it, so one value reads the same in each.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

# Never JSON syntax (which is printable ASCII), so only ever inside a string, where
# \uXXXX means the same.
_UNSAFE_IN_JSON = re.compile(
    "[\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff]"
)

__all__ = ["dumps", "inert", "json_default", "json_records", "json_value"]


def json_value(value: Any) -> Any:
    """``value`` as plain JSON types (see the module's docstring)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    # Before the numbers: numpy's timedelta64 is an integer type.
    if isinstance(value, (pd.Timedelta, dt.timedelta, np.timedelta64)):
        return _seconds(value)
    if isinstance(value, (pd.Timestamp, dt.datetime, dt.date, np.datetime64)):
        stamp = pd.Timestamp(value)
        return None if stamp is pd.NaT else stamp.isoformat()
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, pd.DataFrame):
        return json_records(value)
    if isinstance(value, (pd.Series, pd.Index, pd.Categorical, pd.api.extensions.ExtensionArray)):
        return [json_value(v) for v in value.astype(object).tolist()]
    if isinstance(value, (list, tuple, set, frozenset, np.ndarray)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [json_value(v) for v in items]
    if isinstance(value, np.generic):  # any other numpy scalar (complex, bytes, ...)
        return json_value(value.item())
    return str(value)


def _seconds(value: pd.Timedelta | dt.timedelta | np.timedelta64) -> float | None:
    delta = pd.Timedelta(value)
    if delta is pd.NaT:
        return None
    # Integer nanoseconds first: exact for whole numbers of seconds and below.
    return float(delta.value) / 1e9


def json_records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
    """A DataFrame as a list of JSON objects, columns in order, NA as None."""
    if frame is None or len(frame) == 0:
        return []
    names = [str(c) for c in frame.columns]
    rows = frame.astype(object).itertuples(index=False, name=None)
    return [dict(zip(names, map(json_value, row), strict=True)) for row in rows]


def json_default(value: Any) -> Any:
    """For ``json.dumps(default=...)``: a value JSON does not know, converted."""
    converted = json_value(value)
    if converted is value:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")
    return converted


def dumps(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as JSON text (UTF-8, no NaN), every value through :func:`json_value`.

    What a terminal or editor would act on rather than show (C1 controls, bidi
    overrides, line separators, lone surrogates; json.dumps escapes C0 itself) is
    written as ``\\uXXXX``: the same string to a JSON reader, inert on a screen."""
    return inert(json.dumps(json_value(data), indent=indent, ensure_ascii=False, allow_nan=False))


def inert(text: str) -> str:
    """JSON text with what a terminal would obey inside its strings written as
    ``\\uXXXX`` (see :func:`dumps`), for the writers that call json.dumps themselves."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
