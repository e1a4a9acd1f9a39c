"""CPU time of ``load()`` and ``summary()`` on given captures, this checkout against others.

Each measure runs in a fresh process (``import traceparse, pandas, numpy`` first,
so imports every run pays are left out) and counts the process's CPU time,
not wall time: the machines this runs on are shared, and CPU time moves far
less with the load than wall time. Runs of every checkout are interleaved and
the minimum of ``--repeat`` is reported.

    python benchmarks/bench_summary.py CAPTURE... [--baseline DIR] [--repeat 5]

``--baseline`` is another checkout of traceparse (e.g. a ``git worktree`` of an
older commit); its code is put first on ``PYTHONPATH`` for its runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_PROBE = r"""
import sys, time
import numpy, pandas, traceparse
start = time.process_time()
p = traceparse.load(sys.argv[1])
p.allocations, p.timeline
loaded = time.process_time()
p.summary()
print(loaded - start, time.process_time() - loaded)
"""


def measure(code: Path, capture: Path) -> tuple[float, float]:
    """(load, summary) CPU seconds of one fresh process running ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(capture)],
        capture_output=True,
        text=True,
        env=env,
        cwd=code,
        check=True,
    )
    load, summary = map(float, done.stdout.split())
    return load, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", type=Path)
    parser.add_argument("--baseline", type=Path, action="append", default=[])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    codes = [REPO, *args.baseline]
    best: dict[tuple[Path, Path], tuple[float, float]] = {}
    for _ in range(args.repeat):
        for capture in args.captures:
            for code in codes:
                load, summary = measure(code, capture.resolve())
                old = best.get((capture, code), (float("inf"), float("inf")))
                best[(capture, code)] = (min(old[0], load), min(old[1], summary))
    print(f"{'capture':40s} {'code':30s} {'load (s)':>9s} {'summary (s)':>12s}")
    for (capture, code), (load, summary) in best.items():
        name = "this checkout" if code == REPO else str(code)
        print(f"{str(capture)[-40:]:40s} {name[-30:]:30s} {load:9.3f} {summary:12.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
