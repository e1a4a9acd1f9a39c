"""The dashboard in a real TensorBoard: how soon it answers, and whether it stays responsive.

Issue 51's timing checks, each against a TensorBoard started with the plugin
(``python -m traceparse.integrations.tensorboard.plugin``) on a temporary logdir:

- ``fifty``: 50 runs (each a run directory whose capture is a link to a real
  fixture capture): seconds from starting TensorBoard to its first answer of
  ``/data/plugin/traceparse/runs``, and that answer's own latency (bound: the
  runs list answers in under 2 s after start, i.e. once TensorBoard listens);
  then the time until every run is analysed.
- ``dense``: a synthetic capture of ``--events`` allocator events
  (``make_dense.py``; 800,000 events is about 100 MB) beside two small runs. Its
  report is asked for; while it is analysed, TensorBoard's own routes
  (``/data/plugins_listing``, ``/data/runs``, ``/data/environment``) and the
  runs list are fetched every 0.2 s: their worst latency (bound: 1 s) and the
  progress lines the dashboard showed; then the time until the report is there.

Everything is made under a temporary directory and deleted afterwards.
Exits 1 when a bound is missed.

    python benchmarks/bench_dashboard.py [--events 800000] [--out benchmarks/DASHBOARD_RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from make_dense import write_capture  # noqa: E402

FIXTURES = ROOT / "fixtures"
# Small real captures that load (the fifty runs cycle over them).
GOOD = ["leak", "keras_train", "layers_cnn", "batch_128", "eager_ops", "layers_sequential"]
RUNS_BOUND_S = 2.0
RESPONSIVE_BOUND_S = 1.0
PLUGIN = "/data/plugin/traceparse"


def _get(url: str, timeout: float = 60) -> tuple[int, bytes, float]:
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            body, status = answer.read(), answer.status
    except urllib.error.HTTPError as error:
        body, status = error.read(), error.code
    return status, body, time.perf_counter() - start


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _capture_of(fixture: str) -> Path:
    (found,) = sorted((FIXTURES / fixture).glob("**/plugins/profile/*/*.xplane.pb"))[:1]
    return found


def _run(logdir: Path, name: str, capture: Path, link: bool = True) -> None:
    run = logdir / name / "plugins" / "profile" / "2026_12_05_00_00_00"
    run.mkdir(parents=True)
    if link:
        (run / "localhost.xplane.pb").symlink_to(capture)
    else:
        capture.rename(run / "localhost.xplane.pb")


class Board:
    """TensorBoard with the plugin on ``logdir``; ``started`` is when the process began."""

    def __init__(self, logdir: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "traceparse.integrations.tensorboard.plugin",
                *("--logdir", str(logdir), "--port", str(self.port), "--host", "127.0.0.1"),
            ],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def listening(self) -> float:
        """Seconds from start until TensorBoard answers at all (its own startup)."""
        while True:
            assert self.process.poll() is None, "TensorBoard exited"
            try:
                if _get(self.base + "/data/environment", timeout=10)[0] == 200:
                    return time.perf_counter() - self.started
            except OSError:
                pass
            time.sleep(0.05)

    def first_runs(self) -> tuple[float, float, dict[str, Any]]:
        """(seconds from start to the first answer of runs, that answer's latency, it)."""
        while True:
            assert self.process.poll() is None, "TensorBoard exited"
            try:
                status, body, took = _get(self.base + PLUGIN + "/runs", timeout=10)
            except OSError:
                time.sleep(0.05)
                continue
            if status == 200:
                return time.perf_counter() - self.started, took, json.loads(body)
            time.sleep(0.05)

    def runs(self) -> dict[str, Any]:
        return dict(json.loads(_get(self.base + PLUGIN + "/runs")[1]))

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def fifty(root: Path) -> dict[str, Any]:
    logdir = root / "fifty"
    for i in range(50):
        _run(logdir, f"job{i:02d}", _capture_of(GOOD[i % len(GOOD)]))
    board = Board(logdir)
    try:
        listening = board.listening()
        after_start, latency, first = board.first_runs()
        latencies = [_get(board.base + PLUGIN + "/runs")[2] for _ in range(10)]
        while any(r["status"] == "pending" for r in board.runs()["runs"]):
            time.sleep(0.2)
        all_done = time.perf_counter() - board.started
        statuses = [r["status"] for r in board.runs()["runs"]]
    finally:
        board.close()
    return {
        "runs listed": len(first["runs"]),
        "TensorBoard answers after start s": round(listening, 2),
        "first runs answer after start s": round(after_start, 2),
        "first runs answer after TensorBoard answers s": round(after_start - listening, 3),
        "its latency s": round(latency, 3),
        "runs latency while analysing, median s": round(statistics.median(latencies), 3),
        "runs latency while analysing, max s": round(max(latencies), 3),
        "all 50 analysed after start s": round(all_done, 1),
        "ready": statuses.count("ready"),
        "error": statuses.count("error"),
    }


def dense(root: Path, events: int) -> dict[str, Any]:
    logdir = root / "dense"
    for name in ("leak", "keras_train"):
        _run(logdir, name, _capture_of(name))
    made = root / "made" / "vm.xplane.pb"
    write_capture(events, made)
    size_mb = made.stat().st_size / 1e6
    _run(logdir, "big", made, link=False)
    board = Board(logdir)
    try:
        board.first_runs()
        asked = time.perf_counter()
        status, page, _ = _get(board.base + PLUGIN + "/report?run=big/2026_12_05_00_00_00")
        first_status = status
        progress: list[str] = []
        worst: dict[str, float] = {}
        routes = ["/data/plugins_listing", "/data/runs", "/data/environment", PLUGIN + "/runs"]
        done = False
        while not done:
            for route in routes:
                code, body, took = _get(board.base + route)
                assert code == 200, (route, code)
                worst[route] = max(worst.get(route, 0.0), took)
                if route == PLUGIN + "/runs":
                    (big,) = [r for r in json.loads(body)["runs"] if r["run"].startswith("big/")]
                    if big["status"] == "pending" and big["progress"] not in progress:
                        progress.append(big["progress"])
                    done = big["status"] != "pending"
            time.sleep(0.2)
        status, page, _ = _get(board.base + PLUGIN + "/report?run=big/2026_12_05_00_00_00")
        ready_after = time.perf_counter() - asked
    finally:
        board.close()
    return {
        "events": events,
        "capture MB": round(size_mb, 1),
        "first report answer": first_status,
        "report after s": round(ready_after, 1),
        "report status": status,
        "report KB": round(len(page) / 1e3),
        "progress shown": progress,
        "worst latency s": {route: round(t, 3) for route, t in worst.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=800_000)
    parser.add_argument("--out", type=Path, help="write the results as Markdown here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_dashboard") as tmp:
        results = {"fifty": fifty(Path(tmp)), "dense": dense(Path(tmp), args.events)}
    checks = [
        (
            "runs list answers under 2 s after TensorBoard listens (fifty)",
            results["fifty"]["first runs answer after TensorBoard answers s"] < RUNS_BOUND_S
            and results["fifty"]["its latency s"] < RUNS_BOUND_S
            and results["fifty"]["runs latency while analysing, max s"] < RUNS_BOUND_S,
        ),
        (
            "TensorBoard's routes answer within 1 s while the big capture is analysed",
            all(t < RESPONSIVE_BOUND_S for t in results["dense"]["worst latency s"].values()),
        ),
        ("the big capture showed progress", len(results["dense"]["progress shown"]) >= 2),
        ("then its report", results["dense"]["report status"] == 200),
    ]
    lines = [
        "# The dashboard's timing (issue 51)",
        "",
        f"Made by `python benchmarks/bench_dashboard.py --events {args.events}` on "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}.",
        "",
        "```json",
        json.dumps(results, indent=2),
        "```",
        "",
        *[f"- {name}: {'met' if ok else 'MISSED'}" for name, ok in checks],
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
