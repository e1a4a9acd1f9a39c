"""Public names that moved keep their old spelling for a release, with a
DeprecationWarning naming the new one (CHANGELOG.md lists them)."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.leaks import LeakReport


@pytest.fixture(scope="module")
def prof() -> traceparse.Profile:
    return traceparse.load(FIXTURES / "layers_cnn")


def test_the_new_spellings_are_silent(prof: traceparse.Profile) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(prof.layers()) and len(prof.layers(by_replica=True))
        assert isinstance(prof.leaks(), LeakReport)
        assert callable(prof.layers) and callable(prof.leaks)


def test_layers_and_leaks_read_as_properties_warn_and_answer(prof: traceparse.Profile) -> None:
    with pytest.warns(DeprecationWarning, match=r"Profile\.layers as a property.*layers\(\)"):
        first = prof.layers["layer"].iloc[0]
    assert first == prof.layers()["layer"].iloc[0]
    with pytest.warns(DeprecationWarning, match=r"Profile\.layers\(\)"):
        assert len(prof.layers) == len(prof.layers())
    with pytest.warns(DeprecationWarning, match=r"Profile\.leaks\(\)"):
        assert prof.leaks.verdict == prof.leaks().verdict
    with pytest.warns(DeprecationWarning, match=r"layers\(by_replica=True\)"):
        assert prof.layers_by_replica.equals(prof.layers(by_replica=True))


def test_the_warning_blames_the_callers_line(prof: traceparse.Profile) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof.leaks.verdict  # noqa: B018
    assert [w.filename for w in caught] == [__file__]


def test_traceparse_keras_still_imports_with_a_warning() -> None:
    pytest.importorskip("keras")
    sys.modules.pop("traceparse.keras", None)
    with pytest.warns(DeprecationWarning, match=r"traceparse\.integrations\.keras"):
        old = importlib.import_module("traceparse.keras")
    from traceparse.integrations.keras import MemoryCallback

    assert old.MemoryCallback is MemoryCallback is traceparse.MemoryCallback


def test_the_layers_optimizer_bytes_column_is_read_with_a_warning(
    prof: traceparse.Profile,
) -> None:
    """optimizer_bytes split into optimizer_state_bytes and optimizer_update_bytes
    (issue 48): the old name answers with their sum for a release."""
    table = prof.layers()
    assert "optimizer_bytes" not in table.columns
    with pytest.warns(DeprecationWarning, match=r"optimizer_state_bytes \+ optimizer_update_bytes"):
        old = table["optimizer_bytes"]
    assert old.equals(
        (table["optimizer_state_bytes"] + table["optimizer_update_bytes"]).rename("optimizer_bytes")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(table[table["layer"] != ""]["optimizer_state_bytes"]) == len(table)
