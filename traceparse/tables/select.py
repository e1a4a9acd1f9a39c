"""Selecting a table's rows by a column's value without an object per row.

The tables' repeated strings are categoricals (``tables.columns``): a row's
value is compared by its category code, not by making millions of Python
strings to compare.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["equal_to", "row_index_type"]


def equal_to(column: pd.Series, value: object, missing_matches: bool = True) -> np.ndarray:
    """Where ``column`` holds ``value`` (a missing value: where it is missing, or
    nowhere where not ``missing_matches``), by its category codes where it has
    them, not an object per row."""
    missing = value is None or value is pd.NA or (isinstance(value, float) and value != value)
    if missing and not missing_matches:
        return np.zeros(len(column), dtype=bool)
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        if missing:
            return codes == -1
        categories = column.cat.categories
        if value not in categories:
            return np.zeros(len(column), dtype=bool)
        return codes == categories.get_loc(value)
    if missing:
        return column.isna().to_numpy(dtype=bool)
    return (column.astype(object) == value).to_numpy(dtype=bool)


def row_index_type(count: int) -> type[np.signedinteger]:
    """The integer type for numbers of ``count`` rows (or codes, or their negatives):
    int32 where they fit, half the memory of int64 for arrays of millions."""
    return np.int32 if count < 2**31 else np.int64
