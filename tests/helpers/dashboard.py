"""A logdir of real fixture captures for the dashboard tests, and calling its WSGI apps."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"
# A directory name that is markup: it must reach every page as text.
HOSTILE = "<img src=x onerror=window.__pwned=1>"
# experiment -> fixture copied under it (each holds plugins/profile/<run>/<host>.xplane.pb).
LOGDIR = {"cnn": "layers_cnn", "leak": "leak", "broken": "corrupt", HOSTILE: "keras_train"}


def make_logdir(root: Path) -> Path:
    """``root/logs`` with the fixtures of ``LOGDIR`` copied in (copies: discovery, like
    ``traceparse batch``, does not follow links to directories)."""
    logs = root / "logs"
    for name, fixture in LOGDIR.items():
        shutil.copytree(FIXTURES / fixture, logs / name)
    return logs


def run_of(logs: Path, experiment: str) -> tuple[str, Path]:
    """(the dashboard's name of the run under ``experiment``, its run directory)."""
    (run_dir,) = (logs / experiment / "plugins" / "profile").iterdir()
    return f"{experiment}/{run_dir.name}", run_dir


def call(app: Callable[..., Any], path: str, **query: str) -> tuple[int, dict[str, str], bytes]:
    """(status code, headers, body) of a GET of ``path?query`` on a WSGI app."""
    got: dict[str, Any] = {}

    def start(status: str, headers: list[tuple[str, str]]) -> None:
        got["status"], got["headers"] = int(status.split()[0]), dict(headers)

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": urlencode(query)}
    body = b"".join(app(environ, start))
    return got["status"], got["headers"], body


def wait_all_done(get_runs: Callable[[], dict[str, Any]], timeout: float = 300) -> dict[str, Any]:
    """Poll the runs list until no run is pending; the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        runs = get_runs()
        if all(r["status"] != "pending" for r in runs["runs"]):
            return runs
        assert time.monotonic() < deadline, f"still analysing after {timeout}s: {runs}"
        time.sleep(0.2)


def by_name(runs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["run"]: r for r in runs["runs"]}


def json_of(body: bytes) -> Any:
    return json.loads(body)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def tensorboard(
    logdir: Path,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    cwd: Path | None = None,
) -> Iterator[str]:
    """A TensorBoard server on ``logdir`` on a free local port; its base URL.

    By default the checkout's plugin is passed explicitly (the worktree is not
    pip-installed, so its entry point is not in the environment's metadata;
    test_dashboard_tensorboard.py checks the entry point on its own). ``command``:
    what starts TensorBoard instead (``--logdir``, ``--port`` and ``--host`` are
    added), run in ``cwd`` with ``env`` as the whole environment."""
    port = free_port()
    root = Path(__file__).resolve().parent.parent.parent
    if command is None:
        command = [sys.executable, "-m", "traceparse.integrations.tensorboard.plugin"]
        environ = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    else:
        environ = dict(env or {})
    process = subprocess.Popen(
        [*command, "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1"],
        env=environ,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.communicate()[1][-3000:]
            try:
                with urllib.request.urlopen(base + "/data/plugins_listing", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "TensorBoard did not start in 120 s"
                time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def http_get(url: str, timeout: float = 30) -> tuple[int, bytes]:
    """(status, body) of a GET; an HTTP error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def check_served_report(base: str, logs: Path) -> tuple[Path, bytes]:
    """Wait until every run of ``make_logdir``'s logdir is analysed at the dashboard on
    ``base``, check the runs' statuses and that the cnn run's page is what
    ``traceparse report`` writes for it (set SOURCE_DATE_EPOCH first: the page is
    dated); return (the cnn run's directory, its record route's answer)."""
    from urllib.parse import quote

    from traceparse.core.loading import load_all
    from traceparse.report import write_report

    def runs() -> dict[str, Any]:
        status, body = http_get(base + "/data/plugin/traceparse/runs")
        assert status == 200
        return dict(json.loads(body))

    found = by_name(wait_all_done(runs))
    name, run_dir = run_of(logs, "cnn")
    assert found[name]["status"] == "ready"
    assert found[run_of(logs, "broken")[0]]["status"] == "error"
    run = quote(name, safe="")
    status, page = http_get(f"{base}/data/plugin/traceparse/report?run={run}")
    assert status == 200
    assert page.decode() == write_report(load_all(str(run_dir)), "html")
    status, record = http_get(f"{base}/data/plugin/traceparse/record?run={run}")
    assert status == 200
    return run_dir, record
