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


def test_diagnostics_and_failures_are_methods_and_the_old_spelling_warns(
    prof: traceparse.Profile,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        notes, failures = prof.diagnostics(), prof.failures()
    assert isinstance(notes, list) and failures == [] and prof.failure is None
    with pytest.warns(DeprecationWarning, match=r"Profile\.diagnostics\(\)"):
        assert list(prof.diagnostics) == notes
    with pytest.warns(DeprecationWarning, match=r"Profile\.failures\(\)"):
        assert prof.failures == []  # the comparison old code made still answers
    with pytest.warns(DeprecationWarning, match=r"Profile\.failures\(\)"):
        assert not prof.failures
    failed = traceparse.load(FIXTURES / "oom_run_graph")
    with pytest.warns(DeprecationWarning, match=r"Profile\.failures\(\)"):
        assert failed.failures[0] == failed.failures()[0] == failed.failure


def test_the_record_moved_to_traceparse_records() -> None:
    from traceparse.records import AllocatorRecord, build_records

    for old in ("traceparse.analysis.record", "traceparse.analysis.summary"):
        sys.modules.pop(old, None)
        with pytest.warns(DeprecationWarning, match=r"traceparse\.records"):
            module = importlib.import_module(old)
        assert module.AllocatorRecord is AllocatorRecord
    import traceparse.analysis as analysis

    with pytest.warns(DeprecationWarning, match=r"traceparse\.records\.build_records"):
        assert analysis.build_records is build_records
    with pytest.warns(DeprecationWarning, match=r"traceparse\.records\.AllocatorRecord"):
        assert analysis.AllocatorRecord is AllocatorRecord is traceparse.AllocatorRecord


def test_the_face_exports_the_record_the_errors_and_the_predictor() -> None:
    from traceparse.analysis.predict import Predictor
    from traceparse.errors import BudgetExceededError, OutOfMemoryError
    from traceparse.records import AllocatorRecord

    assert traceparse.OutOfMemoryError is OutOfMemoryError
    assert traceparse.BudgetExceededError is BudgetExceededError
    assert traceparse.AllocatorRecord is AllocatorRecord and traceparse.Predictor is Predictor
    prof = traceparse.load(FIXTURES / "batch_128")
    assert isinstance(prof.summary()[0], traceparse.AllocatorRecord)
    # The breakdown is a method's answer; the attrs spelling still holds it.
    breakdown = prof.predicted_breakdown(256)
    assert len(breakdown) and breakdown.equals(prof.predict(256).attrs["breakdown"])
    predictor = traceparse.predictor_of(prof)
    assert isinstance(predictor, traceparse.Predictor)
    assert predictor.breakdown(256).equals(breakdown)


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


def test_a_moved_module_imports_from_its_old_path_with_a_warning() -> None:
    """Every module moved into analysis/predict/ (and analysis/naming/) keeps its old
    dotted name for a release: the same module object, a warning naming the new
    home and blaming the importing line, and silence on the new path."""
    from traceparse.analysis import MOVED_MODULES

    assert MOVED_MODULES, "the alias table is empty"
    for old, new in MOVED_MODULES.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is importlib.import_module(new), old
        assert module.__name__ == new and sys.modules[old] is module
        moved = [w for w in caught if issubclass(w.category, DeprecationWarning)]
        assert [str(w.message).split(" moved to ")[1].split(";")[0] for w in moved] == [new]
        assert moved[0].filename == __file__, (old, moved[0].filename)
    # The import statement too, and a name from the old module answers.
    sys.modules.pop("traceparse.analysis.predict_capacity", None)
    with pytest.warns(DeprecationWarning, match=r"traceparse\.analysis\.predict\.capacity"):
        from traceparse.analysis.predict_capacity import Fit
    from traceparse.analysis.predict import Fit as new_fit

    assert Fit is new_fit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.import_module("traceparse.analysis.predict.simulate")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("traceparse.analysis.predict_nothing")
