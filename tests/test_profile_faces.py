"""Profile loads, caches and hands the analyses out (issue 46): what keeps it so.

- No record builder or renderer reads a private attribute of a profile: they
  read its public members (``records.source.RecordSource``), so a section is a
  builder over those, not a reach into ``Profile``'s caches.
- ``core/xla.py`` (parsing and linking programs) calls no analysis.
- ``core.memory.pooled_cache``: one answer per instance and arguments, errors
  not kept.
- The predicting commands' shared options (``cli/_options.py``) check as before.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

import traceparse
from traceparse.core.memory import pooled_cache

PACKAGE = Path(traceparse.__file__).resolve().parent
FIXTURES = PACKAGE.parent / "fixtures"
# Everything after core that is handed a profile.
READERS = ("records", "report", "output", "gate", "cli", "batching", "integrations")


def _private_reads(source: str) -> list[int]:
    """Lines that read a private attribute of something other than ``self``/``cls``:
    ``x._name`` or ``getattr(x, "_name"...)``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in {"profile", "prof", "source", "p"}
        ):
            found.append(node.lineno)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
            and not node.args[1].value.startswith("__")
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in {"profile", "prof", "source", "p"}
        ):
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("stage", READERS)
def test_no_reader_reaches_into_a_profile(stage: str) -> None:
    bad = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted((PACKAGE / stage).rglob("*.py"))
        for line in _private_reads(path.read_text())
    ]
    assert bad == [], "read the profile's public members (records.source.RecordSource)"


def test_the_private_read_check_can_fail() -> None:
    assert _private_reads('getattr(source, "_report_whatif", None)\n') == [1]
    assert _private_reads("profile._report_predictor\n") == [1]
    assert _private_reads("self._cache\nprofile.summary()\n") == []


def test_core_xla_calls_no_analysis() -> None:
    tree = ast.parse((PACKAGE / "core" / "xla.py").read_text())
    imported = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    ]
    assert imported and not [m for m in imported if m.startswith("traceparse.analysis")]


class _Counted:
    def __init__(self) -> None:
        self.calls = 0

    @pooled_cache
    def table(self, depth: int = 1, *, wide: bool = False) -> list[int]:
        self.calls += 1
        if depth < 1:
            raise ValueError(depth)
        return [depth, int(wide)]


def test_pooled_cache_answers_once_per_arguments() -> None:
    one, two = _Counted(), _Counted()
    first = one.table()
    assert one.table(1) is first and one.table(depth=1, wide=False) is first
    assert one.table(2) == [2, 0] and one.table(1, wide=True) == [1, 1]
    assert one.calls == 3
    assert two.table() == first and two.table() is not first  # per instance
    for _ in range(2):
        with pytest.raises(ValueError):
            one.table(0)
    assert one.calls == 5  # an error is not kept: asked again, it is raised again


def test_profile_caches_its_tables_with_arguments() -> None:
    prof = traceparse.load(FIXTURES / "keras_train")
    assert prof.scopes() is prof.scopes(1) is prof.scopes(depth=1, as_written=False)
    assert prof.scopes(2) is not prof.scopes(1)
    assert prof.layers() is prof.layers(by_replica=False, depth=1)
    assert prof.lines() is prof.lines(False)
    peak = prof.peak.iloc[0]
    assert prof.breakdown_at(int(peak["time_ps"]), str(peak["host"])) is prof.breakdown_at(
        int(peak["time_ps"]), str(peak["host"])
    )


def test_the_shared_options_check_as_before() -> None:
    from traceparse.analysis.predict import MAX_BATCH
    from traceparse.cli._options import batch_type, port_type

    assert batch_type("64") == 64 and batch_type(str(MAX_BATCH)) == MAX_BATCH
    for bad in ("0", str(MAX_BATCH + 1), "-3", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            batch_type(bad)
    assert port_type("0") == 0 and port_type("65535") == 65535
    for bad in ("65536", "-1", "web"):
        with pytest.raises(argparse.ArgumentTypeError):
            port_type(bad)
