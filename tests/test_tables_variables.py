"""``Profile.variables``: one convention for its text columns, as the other tables have.

Names (``path``, ``belongs_to``, ``layer``...) are categoricals with string
categories, and an unknown one is NA, never ``None`` in an object column.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import traceparse

REPO = Path(__file__).resolve().parent.parent
TEXT = ["host", "device", "name", "path", "role", "belongs_to", "layer", "model", "allocator"]


@pytest.mark.parametrize("fixture", ["keras_inventory", "keras_memory_callback"])
def test_variable_names_are_categoricals_with_na(fixture: str) -> None:
    variables = traceparse.load(REPO / "fixtures" / fixture).variables
    assert len(variables)
    for column in TEXT:
        dtype = variables[column].dtype
        assert isinstance(dtype, pd.CategoricalDtype), (column, dtype)
        assert all(isinstance(c, str) for c in dtype.categories), column
        assert not any(v is None for v in variables[column].astype(object)), column
    # Weights belong to no other variable: NA there, a weight's path for a slot.
    weights = variables[variables["role"] == "weight"]
    assert weights["belongs_to"].isna().all()
    slots = variables[variables["role"] == "optimizer"].dropna(subset=["belongs_to"])
    assert set(slots["belongs_to"].astype(str)) <= set(weights["path"].astype(str))


def test_the_empty_table_has_the_same_dtypes() -> None:
    empty = traceparse.load(REPO / "fixtures/keras_train").variables
    assert empty.empty
    assert isinstance(empty["path"].dtype, pd.CategoricalDtype)
    assert isinstance(empty["belongs_to"].dtype, pd.CategoricalDtype)
