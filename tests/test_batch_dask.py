"""``traceparse batch --scheduler``: the same tasks on a Dask cluster give the same results."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import LazyModule, needs
from helpers.batch import GOOD, make_tree, summary_bytes
from helpers.cli import traceparse_cli

import traceparse

distributed = LazyModule("distributed")
# Every test here, the unreachable scheduler's too, needs dask.distributed installed
# (the compatibility job does not install the dask extra).
pytestmark = needs("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two single-threaded worker processes on loopback, no dashboard."""
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=40,
    ) as local:
        yield local


def test_dask_gives_the_local_results(cluster: Any, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", [*GOOD, "corrupt", "no_memory"])
    local = traceparse.batch(tree, tmp_path / "local", jobs=0, reports=["md", "json"])
    remote = traceparse.batch(
        tree, tmp_path / "dask", scheduler=cluster.scheduler_address, reports=["md", "json"]
    )
    assert summary_bytes(tmp_path / "dask") == summary_bytes(tmp_path / "local")
    assert (remote.analysed, remote.exit_code, remote.failed) == (7, 3, local.failed)
    # The workers wrote the per-capture results and reports themselves.
    assert len(list((tmp_path / "dask").rglob("result.json"))) == 7
    assert len(list((tmp_path / "dask").rglob("report.md"))) == 6

    # Resuming works across executors: a local rerun over the Dask output redoes nothing.
    again = traceparse.batch(tree, tmp_path / "dask", jobs=0, reports=["md", "json"])
    assert (again.analysed, again.reused) == (0, 7)


def test_dask_with_a_client_and_content_hashes(cluster: Any, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak", "two_runs"])
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        first = traceparse.batch(tree, tmp_path / "out", scheduler=client, fingerprint="hash")
        # Hash checks run on the workers: they find every result still valid.
        second = traceparse.batch(tree, tmp_path / "out", scheduler=client, fingerprint="hash")
        assert client.status == "running"  # a client we were given stays open
    assert (first.analysed, second.analysed, second.reused) == (3, 0, 3)


def test_command_with_scheduler(cluster: Any, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak"])
    out = tmp_path / "out"
    result = traceparse_cli(
        "batch", str(tree), "-o", str(out), "--scheduler", cluster.scheduler_address
    )
    assert result.returncode == 0, result.stderr
    assert "1 capture: 1 ok" in result.stdout


def test_unreachable_scheduler_is_a_usage_error(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "logs", ["leak"])
    result = traceparse_cli(
        "batch",
        str(tree),
        "-o",
        str(tmp_path / "out"),
        "--scheduler",
        "tcp://127.0.0.1:9",
        env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"},
    )
    assert result.returncode == 2
    assert "cannot connect to the Dask scheduler" in result.stderr
