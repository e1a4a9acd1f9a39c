"""The examples in the docstrings run, so they stay true (``make test`` runs them here).

Examples that need a capture on disk or TensorFlow are marked ``+SKIP`` in place.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "traceparse"
# __main__ runs the command when imported; _proto is generated code; a
# deprecated spelling (traceparse.keras) warns when imported and has no examples.
SKIPPED = {"traceparse.__main__", "traceparse.keras"}


def _modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "_proto" in parts:
            continue
        name = ".".join(parts).removesuffix(".__init__")
        if name not in SKIPPED:
            names.append(name)
    return names


def test_some_modules_have_examples() -> None:
    """The walk finds the examples (a doctest run over nothing would pass)."""
    with_examples = [name for name in _modules() if _examples(name)]
    assert {"traceparse.output.units", "traceparse.tables.contracts"} <= set(with_examples)


def _examples(name: str) -> int:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module, name)
    return sum(len(t.examples) for t in tests)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    import traceparse

    result = doctest.testmod(
        module,
        extraglobs={"traceparse": traceparse},
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        report=False,
    )
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
