"""Run traceparse commands under the bounds every crafted input must meet.

Each command ends within ``LIMIT_S`` seconds of CPU time (a profiling timer
stops it, and the test fails), the process never has more than ``LIMIT_BYTES``
of address space (``RLIMIT_AS``: an allocation past it fails), and the exit
code is 0 or 3. CPU time, because the test machines are shared and wall time
varies with their load; a command that waits without using the CPU (a read
from a FIFO) is stopped by a wall-clock alarm at ``WAIT_S``. The commands run
one after another in one child process (the imports are paid once), each with
its own timers and its own captured stdout and stderr, so a test can count the
lines each command wrote to stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LIMIT_S = 30
WAIT_S = 120
LIMIT_BYTES = 4 * 2**30

_DRIVER = r"""
import contextlib, io, json, resource, signal, sys, time, warnings
limit_s, wait_s, limit_bytes = (int(a) for a in sys.argv[1:4])
resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
warnings.simplefilter("always")  # a warning in a later command shows too
from traceparse.cli import app

class Expired(BaseException):  # not an OSError: no handler of the command takes it
    pass

def expired(*_):
    raise Expired

signal.signal(signal.SIGPROF, expired)
signal.signal(signal.SIGALRM, expired)
done = []
for argv in json.loads(sys.stdin.read()):
    out, err = io.StringIO(), io.StringIO()
    start = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, limit_s)
    signal.alarm(wait_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = app.main(argv)
    except Expired:
        code = "timeout"
    except MemoryError:
        code = "out of memory"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
    seconds = time.process_time() - start
    done.append({"argv": argv, "code": code, "seconds": seconds,
                 "stdout": out.getvalue(), "stderr": err.getvalue()})
print(json.dumps(done))
"""


@dataclass
class Ran:
    """One command's result (``seconds``: CPU time)."""

    argv: list[str]
    code: int | str
    seconds: float
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()


def run_bounded(commands: Sequence[Sequence[str]], cwd: Path) -> list[Ran]:
    """Run each ``traceparse`` command line under the bounds; their results in order."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(LIMIT_S), str(WAIT_S), str(LIMIT_BYTES)],
        input=json.dumps([list(c) for c in commands]),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        # A hang that the alarm could not stop (in C code) still ends the test.
        timeout=WAIT_S * (len(commands) + 1),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [Ran(**r) for r in json.loads(done.stdout)]


def every_command(paths: Sequence[Path], out: Path) -> list[list[str]]:
    """The commands a user runs on captures: summary and the reports over all of
    ``paths`` at once, and the table commands (newest run only) on each."""
    names = [str(p) for p in paths]
    commands = [
        ["summary", *names],
        ["report", *names, "-o", str(out / "report.html")],
        ["report", *names, "-o", str(out / "report.md")],
    ]
    for name in names:
        commands += [["peak", name], ["ops", name], ["layers", name]]
    return commands


def check_bounds(results: Sequence[Ran], problems: int) -> None:
    """Each command ended in time with exit 0 or 3, wrote at most one stderr line per
    problem (plus the "Wrote PATH" note of a report), and no traceback or warning."""
    for ran in results:
        assert ran.code in (0, 3), (ran.argv, ran.code, ran.stderr[-2000:])
        assert ran.seconds < LIMIT_S, (ran.argv, ran.seconds)
        lines = [line for line in ran.stderr_lines if not line.startswith("Wrote ")]
        assert len(lines) <= problems, (ran.argv, lines[:5])
        assert "Traceback" not in ran.stderr and "Warning" not in ran.stderr, ran.stderr[-2000:]
