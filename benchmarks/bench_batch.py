"""Batch benchmark: throughput of ``traceparse.batch`` with one worker against several.

Builds a tree of N captures by copying the real fixture captures (keras_train,
eager_ops, leak, keras_callback, two_runs) into a temporary directory, one
logdir each, then times ``traceparse.batch(tree, out, jobs=J, force=True)``
for each J: the whole call, worker start-up and summary writing included. The
settings are interleaved, ``--repeat`` times, so that load from other
processes falls on all of them alike; the table has medians and bests. The
summaries of every run are checked to be byte-identical, whatever the number
of workers.

On a shared machine other processes decide how much parallelism there is to
be had. So each round also times a calibration: a fixed pure-Python loop on J
spawned processes, whose speed-up is what the machine offered; the batch's
speed-up divided by it is its parallel efficiency. And every timed run measures
how much CPU the other processes used meanwhile (from /proc/stat, minus this
process and its workers): ``--wait-idle F`` waits before each run until a share
F of the CPUs is idle, and ``--max-other F`` redoes a run during which others
used more than a share F.

    python benchmarks/bench_batch.py [--captures 40] [--jobs 1 2] [--repeat 3]

Prints a table and writes benchmarks/BATCH_RESULTS.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURES = REPO / "fixtures"
SOURCES = ["keras_train", "eager_ops", "leak", "keras_callback", "two_runs"]
SUMMARIES = ("summary.csv", "summary.parquet", "summary.md")
T = TypeVar("T")


def make_tree(root: Path, count: int) -> list[Path]:
    """``count`` captures under ``root``: copies of the fixtures, round robin."""
    sources = sorted(p for name in SOURCES for p in (FIXTURES / name).rglob("*.xplane.pb"))
    made = []
    for i in range(count):
        run = root / f"job{i:03d}" / "plugins" / "profile" / "2026_01_01_00_00_00"
        run.mkdir(parents=True)
        target = run / "localhost.xplane.pb"
        shutil.copy2(sources[i % len(sources)], target)
        made.append(target)
    return made


def measure(tree: Path, out: Path, jobs: int, reports: tuple[str, ...]) -> bytes:
    import traceparse

    result = traceparse.batch(tree, out, jobs=jobs, reports=reports, force=True)
    assert result.exit_code == 0 and result.analysed == result.captures, result.failed
    return b"".join((out / name).read_bytes() for name in SUMMARIES)


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def calibrate(jobs: int, chunks: int = 8, size: int = 4_000_000) -> None:
    """A fixed amount of pure-Python CPU work on ``jobs`` spawned processes."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs) as pool:
        pool.map(_spin, [size] * chunks, chunksize=1)


def load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def idle_fraction(seconds: float = 2.0) -> float:
    """The share of CPU time that was idle over the next ``seconds`` (Linux; else 1)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        return values[3] + values[4], sum(values)  # idle + iowait, total

    try:
        idle0, total0 = sample()
        time.sleep(seconds)
        idle1, total1 = sample()
    except OSError:
        return 1.0
    return (idle1 - idle0) / max(1, total1 - total0)


def wait_for_idle(threshold: float | None) -> float:
    """Wait (up to 20 minutes) until the CPUs are at least ``threshold`` idle; the idle share."""
    if threshold is None:
        return idle_fraction()
    deadline = time.monotonic() + 1200
    while (idle := idle_fraction()) < threshold and time.monotonic() < deadline:
        time.sleep(3)
    return idle


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (Linux; else 0)."""
    try:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
    except OSError:
        return 0.0
    return (sum(values[:8]) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """CPU seconds of this process and of its finished (reaped) children: the workers."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def clean_run(
    work: Callable[[], T], args: argparse.Namespace, cpus: int, label: str
) -> tuple[float, float, T]:
    """(wall seconds, share of the CPUs other processes used meanwhile, result).

    With ``--max-other``, a run during which other processes used more than that
    share of the CPUs is thrown away and done again (up to ``--tries`` times).
    """
    for attempt in range(1, args.tries + 1):
        wait_for_idle(args.wait_idle)
        busy, own, start = busy_seconds(), own_seconds(), time.perf_counter()
        value = work()
        wall = time.perf_counter() - start
        others = busy_seconds() - busy - (own_seconds() - own)
        share = max(0.0, others) / (wall * cpus)
        print(f"{label}: {wall:.2f} s, other processes {share:.0%}", file=sys.stderr)
        if args.max_other is None or share <= args.max_other or attempt == args.tries:
            return wall, share, value
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captures", type=int, default=40)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--reports",
        nargs="+",
        default=["md,html,json", "none"],
        help="report settings to measure (comma lists, or none)",
    )
    parser.add_argument(
        "--wait-idle",
        type=float,
        metavar="FRACTION",
        help="before each run, wait until this share of the CPUs is idle (e.g. 0.9)",
    )
    parser.add_argument(
        "--max-other",
        type=float,
        metavar="FRACTION",
        help="redo a run during which other processes used more than this share of the CPUs",
    )
    parser.add_argument("--tries", type=int, default=5, help="attempts per run (--max-other)")
    parser.add_argument("--output", type=Path, default=HERE / "BATCH_RESULTS.md")
    args = parser.parse_args()

    import traceparse  # noqa: F401  (imported here, not inside the first timed run)

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1
    settings = {s: (() if s == "none" else tuple(s.split(","))) for s in args.reports}
    times: dict[tuple[str, int], list[float]] = {}
    others: list[float] = []
    outputs: dict[str, set[bytes]] = {setting: set() for setting in settings}
    with tempfile.TemporaryDirectory(prefix="traceparse-bench-batch-") as tmp:
        tree = Path(tmp) / "logs"
        files = make_tree(tree, args.captures)
        megabytes = sum(f.stat().st_size for f in files) / 1e6
        # Interleaved, so that what disturbs one setting disturbs the others alike.
        for repeat in range(args.repeat):
            for jobs in args.jobs:
                took, share, _ = clean_run(
                    partial(calibrate, jobs), args, cpus, f"calibration jobs={jobs}"
                )
                times.setdefault(("calibration", jobs), []).append(took)
                others.append(share)
            for setting, reports in settings.items():
                for jobs in args.jobs:
                    out = Path(tmp) / f"out-{repeat}-{setting}-{jobs}"
                    took, share, summary = clean_run(
                        partial(measure, tree, out, jobs, reports),
                        args,
                        cpus,
                        f"reports={setting} jobs={jobs}",
                    )
                    times.setdefault((setting, jobs), []).append(took)
                    others.append(share)
                    outputs[setting].add(summary)
                    shutil.rmtree(out)
    assert all(len(found) == 1 for found in outputs.values()), "summaries differ between runs"

    first = args.jobs[0]

    def speedup(setting: str, jobs: int, pick: Callable[[list[float]], float]) -> float:
        return pick(times[(setting, first)]) / pick(times[(setting, jobs)])

    options = [
        f"--captures {args.captures}",
        "--jobs " + " ".join(map(str, args.jobs)),
        f"--repeat {args.repeat}",
        "--reports " + " ".join(args.reports),
    ]
    if args.wait_idle is not None:
        options.append(f"--wait-idle {args.wait_idle}")
    if args.max_other is not None:
        options.append(f"--max-other {args.max_other} --tries {args.tries}")
    lines = [
        "# Batch benchmark",
        "",
        f"Made by `python benchmarks/bench_batch.py {' '.join(options)}` on "
        f"{platform.machine()}, {cpus} CPUs, Python {platform.python_version()}. "
        f"Other processes used at most {max(others):.0%} of the CPUs during any timed run "
        f"(median {statistics.median(others):.0%}).",
        f"Captures: {args.captures} copies of the real fixture captures "
        f"({', '.join(SOURCES)}), {megabytes:.1f} MB in all, one logdir each.",
        "",
        f"| work | jobs | wall s (median) | wall s (best) | captures/s (median) "
        f"| speed-up vs jobs={first} (median) | (best) | efficiency (median) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for setting in ["calibration", *settings]:
        for jobs in args.jobs:
            values = times[(setting, jobs)]
            median = statistics.median(values)
            rate = "-" if setting == "calibration" else f"{args.captures / median:.2f}"
            gain = speedup(setting, jobs, statistics.median)
            machine = speedup("calibration", jobs, statistics.median)
            label = "calibration (CPU loop)" if setting == "calibration" else f"reports {setting}"
            efficiency = "-" if setting == "calibration" else f"{gain / machine:.0%}"
            lines.append(
                f"| {label} | {jobs} | {median:.2f} | {min(values):.2f} | {rate} "
                f"| {gain:.2f}x | {speedup(setting, jobs, min):.2f}x | {efficiency} |"
            )
    lines += [
        "",
        "Wall time is the whole `traceparse.batch(..., force=True)` call: finding the "
        "captures, starting the spawned workers (each imports traceparse and pandas), "
        "analysing, writing every report and result atomically, and the summaries. "
        "The summaries were byte-identical for every number of workers. The calibration "
        "runs a fixed pure-Python loop on the same number of spawned processes: its "
        "speed-up is the parallelism the machine offered during the rounds, and "
        "efficiency is the batch's speed-up divided by it.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.output.write_text(text)


if __name__ == "__main__":
    main()
