"""``traceparse serve``: the dashboard without TensorBoard, on 127.0.0.1 unless told."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from helpers.dashboard import FIXTURES, http_get, wait_all_done

from traceparse.cli.app import build_parser

ROOT = Path(__file__).resolve().parent.parent


def _serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "traceparse", "serve", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_answers_on_loopback_and_stops_on_ctrl_c() -> None:
    process = _serve(str(FIXTURES / "leak"), "--port", "0")
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"at http://(127\.0\.0\.1):(\d+)/", line)
        assert found, line
        base = f"http://127.0.0.1:{found.group(2)}"
        status, page = http_get(base + "/")
        assert status == 200 and b"index.js" in page
        runs = wait_all_done(lambda: json.loads(http_get(base + "/data/plugin/traceparse/runs")[1]))
        (run,) = runs["runs"]
        assert run["status"] == "ready" and run["allocators"][0]["leak_verdict"] == "growing"
        status, report = http_get(f"{base}/data/plugin/traceparse/report?run={run['run']}")
        assert status == 200 and b"traceparse memory report" in report
        assert http_get(f"{base}/data/plugin/traceparse/report?run=..%2F..%2Fetc")[0] == 404
        # Listening on loopback only: the kernel's table of listening sockets says where.
        assert _listening_on(int(found.group(2))) in ({"127.0.0.1"}, None)
    finally:
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "Traceback" not in err


def _listening_on(port: int) -> set[str] | None:
    """The IPv4 addresses listening on ``port`` (Linux's /proc/net/tcp); None elsewhere."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        return None
    found = set()
    for line in table.read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, at = local.split(":")
        if int(at, 16) == port and state == "0A":  # 0A: LISTEN
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def test_serve_defaults_to_loopback() -> None:
    args = build_parser().parse_args(["serve", "logs"])
    assert args.host == "127.0.0.1" and args.logdir == "logs"


def test_serve_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    missing = _serve(str(tmp_path / "nowhere"))
    _out, err = missing.communicate(timeout=60)
    assert missing.returncode == 3 and len(err.strip().splitlines()) == 1, err
    assert "nowhere" in err and "Traceback" not in err

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = _serve(str(FIXTURES / "leak"), "--port", str(taken.getsockname()[1]))
        _out, err = busy.communicate(timeout=60)
    assert busy.returncode == 2 and "choose another --port" in err, err
    assert "Traceback" not in err
