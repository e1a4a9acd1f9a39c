"""Issue 46, item 4: the records beside a capture and the report formats are each
listed once (``core/sidecars.py``, ``report/formats.py``) and everything else reads
those lists: a scan of the package finds no file name or format list written
anywhere else, and each reader of a list offers what the list holds."""

from __future__ import annotations

import argparse
import ast
import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

import traceparse
from traceparse.core.sidecars import SIDECARS, Sidecar
from traceparse.report.formats import FILE_SUFFIXES, NAMES, REPORT_FORMATS, format_of_path, named

PACKAGE = Path(traceparse.__file__).parent


def _strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant in a module that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_proto" not in p.parts)


def test_every_record_file_name_is_written_once() -> None:
    home = PACKAGE / "core" / "sidecars.py"
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
        for path in _modules()
        if path != home
        for line, text in _strings(path)
        for entry in SIDECARS
        if entry.suffix in text
    ]
    assert found == []
    assert sum(entry.suffix in text for _, text in _strings(home) for entry in SIDECARS) == len(
        SIDECARS
    )


def test_the_records_are_told_apart() -> None:
    assert len({e.name for e in SIDECARS}) == len({e.suffix for e in SIDECARS}) == len(SIDECARS)
    # No suffix ends another (a host named "x.failure" must not read as x's record).
    for a in SIDECARS:
        for b in SIDECARS:
            assert a is b or not a.suffix.endswith(b.suffix), (a.name, b.name)


@pytest.mark.parametrize("entry", SIDECARS, ids=[e.name for e in SIDECARS])
def test_each_record_is_written_read_and_fingerprinted_through_its_entry(
    tmp_path: Path, entry: Sidecar
) -> None:
    """The registry's writer puts the file where its reader and the batch fingerprint
    look: a damaged one written there is a diagnostic naming it, and changes the
    fingerprint."""
    from traceparse.batching.store import input_fingerprint
    from traceparse.files.discover import find_captures

    source = next((FIXTURES / "leak").rglob("*.xplane.pb"))
    run = tmp_path / "run"
    shutil.copytree(source.parent, run)
    (capture,) = find_captures(run)
    before = input_fingerprint(capture, "hash")
    assert entry.name not in before
    path = entry.write({"format": "not this one"}, run, capture.host)
    assert path == str(run / f"{capture.host}{entry.suffix}")
    assert entry.beside(capture) is not None
    profile = traceparse.load(run)
    assert any(d.startswith(f"{path}: ") for d in profile.diagnostics()), profile.diagnostics()
    assert entry.fingerprint and entry.name in input_fingerprint(capture, "hash")


def test_no_report_format_list_is_written_outside_the_registry() -> None:
    """A tuple or list of two or more report format names is the registry's alone.
    ``cli/diff.py``'s DIFF_FORMATS stays: the diff has renderers of its own (gate)."""
    home = PACKAGE / "report" / "formats.py"
    allowed = {("cli/diff.py", "DIFF_FORMATS")}
    found = []
    for path in _modules():
        if path == home:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            value = node.value if isinstance(node, ast.Assign) else None
            if not isinstance(value, (ast.Tuple, ast.List, ast.Set)):
                continue
            names = [e.value for e in value.elts if isinstance(e, ast.Constant)]
            if len(set(names) & set(NAMES)) < 2:
                continue
            assert isinstance(node, ast.Assign)
            target = node.targets[0]
            name = target.id if isinstance(target, ast.Name) else ast.dump(target)
            where = str(path.relative_to(PACKAGE))
            if (where, name) not in allowed:
                found.append(f"{where}:{node.lineno}: {name}")
    assert found == []


def test_every_reader_of_the_formats_offers_them_all() -> None:
    from traceparse.batching import REPORT_FORMATS as BATCH_REPORTS
    from traceparse.cli.batch import reports_type
    from traceparse.cli.report import ReportCommand
    from traceparse.integrations.pytest_plugin import REPORT_FORMATS as PLUGIN_REPORTS
    from traceparse.report import FORMATS

    parser = argparse.ArgumentParser()
    ReportCommand().prepare_parser(parser)
    (option,) = [a for a in parser._actions if a.dest == "format"]
    assert tuple(option.choices or ()) == NAMES
    assert FORMATS == BATCH_REPORTS == PLUGIN_REPORTS == NAMES
    assert reports_type(",".join(NAMES)) == NAMES
    for fmt in REPORT_FORMATS:
        for suffix in fmt.suffixes:
            assert FILE_SUFFIXES[suffix] == fmt.name
            assert format_of_path(f"memory{suffix.upper()}") is fmt
    assert format_of_path("memory.pdf") is None
    with pytest.raises(traceparse.UsageError, match="unknown report format 'pdf'"):
        named("pdf")


@pytest.mark.parametrize("fmt", NAMES)
def test_each_format_renders_through_its_entry(tmp_path: Path, fmt: str) -> None:
    from traceparse.report import write_report

    profile = traceparse.load(FIXTURES / "leak")
    path = tmp_path / f"report{named(fmt).suffix}"
    text = write_report([profile], fmt, path)
    assert path.read_text() == text and text
    if fmt == "json":
        assert json.loads(text)["schema_version"] == 1
