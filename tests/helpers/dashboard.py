"""A logdir of real fixture captures for the dashboard tests, and calling its WSGI apps."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
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
