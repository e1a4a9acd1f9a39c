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


PRESENTATION = """
## How columns are shown

Each column's presentation, declared on it (`Column`): how a person reads it
(`display`), the header reports give it, whether a terminal table shows it by
default, its priority when a terminal is too narrow (1 goes first; 3, the
name, last; 2 is a byte column that answers a table's question), and the
column its values are a part of (a table that drops a part says so).

| column | display | header | shown | priority | part of |
|---|---|---|---|---|---|
"""


def document() -> str:
    parts = [HEADER]
    for name, table in all_tables().items():
        parts.append(f"\n## `{name}`\n\n{table.markdown()}")
    parts.append(PRESENTATION)
    for column in sorted(COLUMNS.values(), key=lambda c: c.name):
        part = f"`{column.part_of}`" if column.part_of else ""
        parts.append(
            f"| `{column.name}` | {column.display} | {column.title} | "
            f"{'yes' if column.shown else 'no'} | {column.priority} | {part} |\n"
        )
    return "".join(parts)


def test_every_column_of_every_table_is_declared_once_with_a_meaning() -> None:
    used = {c for table in all_tables().values() for c in table.columns}
    assert used <= set(COLUMNS), sorted(used - set(COLUMNS))
    assert set(COLUMNS) <= used, f"declared, in no table: {sorted(set(COLUMNS) - used)}"
    for column in COLUMNS.values():
        assert column.meaning and "\n" not in column.meaning, column.name
        assert contracts.dtype_of(column.name) == column.dtype


def test_every_column_declares_how_it_is_shown() -> None:
    from traceparse.tables import columns

    listed = [name for names in columns._DISPLAY.values() for name in names]
    assert sorted(listed) == sorted(COLUMNS), "each column in exactly one display kind"
    for column in COLUMNS.values():
        assert column.display in columns.DISPLAYS and column.title, column.name
        assert column.part_of is None or column.part_of in COLUMNS
    # A change is signed; a peak counter is bytes: declared, not guessed from the name.
    assert COLUMNS["growth_bytes_per_step"].display == "signed_bytes"
    assert COLUMNS["peak_bytes_in_use"].display == "bytes"
    assert COLUMNS["live_at_peak_bytes"].priority > COLUMNS["other_bytes"].priority


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
