"""The dashboard inside a real TensorBoard server, and the entry point that installs it."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from helpers.dashboard import (
    FIXTURES,
    check_served_report,
    http_get,
    make_logdir,
    tensorboard,
)

from traceparse.core.loading import load_all
from traceparse.report import write_report

base_plugin = pytest.importorskip("tensorboard.plugins.base_plugin")

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
EPOCH = "1764547200"  # pins the report's "generated" line in both processes


def _project() -> dict:  # type: ignore[type-arg]
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]


def test_the_entry_point_resolves_to_the_loader(tmp_path: Path) -> None:
    """What pip installs from pyproject.toml is what TensorBoard's default.py loads."""
    points = _project()["entry-points"]["tensorboard_plugins"]
    assert list(points) == ["traceparse"]
    point = metadata.EntryPoint("traceparse", points["traceparse"], "tensorboard_plugins")
    loader_class = point.load()
    assert issubclass(loader_class, base_plugin.TBLoader)
    plugin = loader_class().load(base_plugin.TBContext(logdir=str(FIXTURES / "leak")))
    assert plugin.plugin_name == "traceparse"
    module = plugin.frontend_metadata().es_module_path
    assert module in plugin.get_plugin_apps()
    assert {"/runs", "/report", "/record"} <= set(plugin.get_plugin_apps())
    assert plugin.is_active()
    # Without captures (or without a local logdir) the dashboard is not offered.
    assert not loader_class().load(base_plugin.TBContext(logdir=str(tmp_path))).is_active()
    assert not loader_class().load(base_plugin.TBContext(logdir="")).is_active()


def test_the_extra_admits_the_installed_tensorboard() -> None:
    from packaging.requirements import Requirement

    extra = [Requirement(r) for r in _project()["optional-dependencies"]["tensorboard"]]
    (board,) = [r for r in extra if r.name == "tensorboard"]
    assert board.specifier.contains(metadata.version("tensorboard"))
    assert not board.specifier.contains("2.15.0")  # dynamic plugins as used here: 2.16 on
    assert any(r.name == "traceparse" and "report" in r.extras for r in extra)


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    logs = make_logdir(tmp_path_factory.mktemp("tensorboard"))
    with tensorboard(logs, {"SOURCE_DATE_EPOCH": EPOCH}) as base:
        yield logs, base


@pytest.mark.slow
def test_tensorboard_lists_the_plugin_enabled(board) -> None:  # type: ignore[no-untyped-def]
    _logs, base = board
    status, body = http_get(base + "/data/plugins_listing")
    assert status == 200
    listing = json.loads(body)["traceparse"]
    assert listing["enabled"] is True
    assert listing["loading_mechanism"] == {
        "type": "IFRAME",
        "module_path": "/data/plugin/traceparse/index.js",
    }
    status, module = http_get(base + "/data/plugin/traceparse/index.js")
    assert status == 200 and b"export async function render" in module


@pytest.mark.slow
def test_tensorboard_serves_runs_report_and_record(  # type: ignore[no-untyped-def]
    board, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs, base = board

    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    run_dir, record = check_served_report(base, logs)
    assert record.decode() == write_report(load_all(str(run_dir)), "json")
    # TensorBoard's own routes still answer.
    assert http_get(base + "/data/runs")[0] == 200


@pytest.mark.slow
@pytest.mark.parametrize(
    "query",
    [
        "run=../../etc",
        "run=..%2F..%2Fetc",
        "run=..%252F..%252Fetc",  # encoded twice
        "run=%2Fetc%2Fpasswd",
        "run=cnn%2F..%2F..%2F..%2Fetc",
        "run=cnn/2026_11_30_16_15_41&host=..%2F..%2Fetc",
    ],
)
def test_names_not_in_the_logdir_are_404_in_tensorboard(board, query: str) -> None:  # type: ignore[no-untyped-def]
    _logs, base = board
    for route in ("report", "record"):
        status, body = http_get(f"{base}/data/plugin/traceparse/{route}?{query}")
        assert status == 404, (route, query, body[:200])
