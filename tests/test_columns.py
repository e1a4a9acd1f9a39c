"""One declaration per column (traceparse/tables/columns.py), and the docs made from it.

``docs/columns.md`` is generated from the declarations; after changing a column
or a table, regenerate it with ``python tests/test_columns.py``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

import traceparse.analysis
from traceparse.tables import contracts
from traceparse.tables.columns import COLUMNS

DOC = Path(__file__).resolve().parent.parent / "docs" / "columns.md"
HEADER = """# Columns of the public tables

Generated from `traceparse/tables/columns.py` (each column's dtype and meaning,
declared once) and the tables' declarations (`declare(...)`: their columns in
order, and which may hold NA). Do not edit: run `python tests/test_columns.py`.
"""


def all_tables() -> dict[str, contracts.Table]:
    """Every declared table: the analyses declare theirs when imported."""
    for module in pkgutil.iter_modules(traceparse.analysis.__path__):
        importlib.import_module(f"traceparse.analysis.{module.name}")
    return dict(sorted(contracts.TABLES.items()))


def document() -> str:
    parts = [HEADER]
    for name, table in all_tables().items():
        parts.append(f"\n## `{name}`\n\n{table.markdown()}")
    return "".join(parts)


def test_every_column_of_every_table_is_declared_once_with_a_meaning() -> None:
    used = {c for table in all_tables().values() for c in table.columns}
    assert used <= set(COLUMNS), sorted(used - set(COLUMNS))
    assert set(COLUMNS) <= used, f"declared, in no table: {sorted(set(COLUMNS) - used)}"
    for column in COLUMNS.values():
        assert column.meaning and "\n" not in column.meaning, column.name
        assert contracts.dtype_of(column.name) == column.dtype


def test_an_undeclared_column_cannot_be_used() -> None:
    with pytest.raises(KeyError, match="no such column"):
        contracts.declare("scratch", ["host", "no_such_column"])


def test_the_column_docs_are_generated_from_the_declarations() -> None:
    assert DOC.read_text(encoding="utf-8") == document(), (
        "docs/columns.md is out of date: run python tests/test_columns.py"
    )


if __name__ == "__main__":
    DOC.write_text(document(), encoding="utf-8")
    sys.stdout.write(f"wrote {DOC}\n")
