"""Decoder speed (issue 28): against upb and xprof, per MB, and where the time goes.

Four measurements, written as the "Speed" section of benchmarks/RESULTS.md
(the rest of that file is left as it is) and a plot, benchmarks/speed_per_mb.png:

  1. a real capture (the 55-step ResNet50 of make_captures.py, or --resnet):
     (a) read + ``XSpace.FromString`` (upb), (b) xprof's memory_profile
     converter, (c) ``load()`` + ``allocations`` + ``timeline``, and (c') the
     same on the numpy path (``TRACEPARSE_PURE_PYTHON=1``: the fallback where
     the compiled loops were not built), each run in a fresh process after a
     run on the 3-step capture, in turns (a, b, c, c', a, c, c', ...: b every
     third turn) so that load from other jobs falls on all alike; minimum of
     the turns, wall and CPU. (A process that parses
     the same file again and again reuses its heap and runs faster than a
     user's one load: upb took half the CPU time that way here.)
  2. synthetic dense captures (make_dense.py) from 10 MB to 1.2 GB, one load
     per fresh process after a warm-up load of a 10,000-event capture, as a
     user's command makes it, in turns, the minimum of --processes processes
     (two from 200 MB): wall, CPU (user and system apart) and peak RSS over the
     warm-up of (c) as a library user runs it (NumPy's arrays from
     traceparse's pool, ``traceparse.core.memory``), (c0) without the pool
     (``TRACEPARSE_NO_POOL=1``: NumPy's and glibc's defaults), (c*) with the
     memory settings of the commands that read captures
     (``traceparse.cli.process``), and (a) where upb can hold the parse (up to
     --upb-max-mb). Every size gets the same kind of run: a process that loads
     the same file again reuses memory the first load faulted in, which a
     user's one load never does;
  3. (s*) as (c*), then ``summary()``: what ``traceparse summary`` computes,
     per size; and that command on the largest capture, as a user runs it:
     wall, CPU and peak RSS from wait4;
  4. cProfile's top entries (CPU timer) of (c) on the real capture and on the
     1M-event dense capture.

CPU seconds are reported beside wall seconds because the machine this was
written on is shared: wall time swings with the other jobs, CPU time much less.

    python benchmarks/bench_speed.py [--resnet PATH] [--events 100000 ... 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from make_captures import capture_path, make_capture  # noqa: E402
from make_dense import make_dense  # noqa: E402

from traceparse.cli.process import LIBRARY_ENVIRONMENT  # noqa: E402

RESNET_STEPS = 55
WARM_UP_STEPS = 3
SECTION = "# Speed (issue 28)"

# One kind of run on one file, in a fresh process, after imports and a run on a
# small capture (first-use costs: pandas' lazy imports, caches); prints JSON.
_ONE = r"""
import json, resource, sys, time
path, what, warm_up = sys.argv[1], sys.argv[2], sys.argv[3]
import traceparse, traceparse.core.loading
from traceparse._proto import xplane_pb2
def rss_mb():  # MB of 10**6 bytes, as the files' sizes (ru_maxrss is in KiB)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
def ours(p):
    prof = traceparse.load(p)
    prof.allocations, prof.timeline
def summary(p):  # what `traceparse summary` computes
    prof = traceparse.load(p)
    prof.allocations, prof.timeline, prof.summary()
def parse(p):
    with open(p, "rb") as f:
        xplane_pb2.XSpace.FromString(f.read())
def xprof(p):
    from xprof.convert import raw_to_tool_data
    raw_to_tool_data.xspace_to_tool_data([p], "memory_profile", {})
if what != "parse" and what != "xprof":  # the path asked for is the one that runs
    from traceparse.decode import native
    assert native.available() == (what != "traceparse-numpy"), "compiled loops: not as asked"
run = {"traceparse": ours, "traceparse-numpy": ours, "summary": summary, "parse": parse,
       "xprof": xprof}[what]
run(warm_up)
warm = rss_mb()
wall, cpu = time.perf_counter(), time.process_time()
before = resource.getrusage(resource.RUSAGE_SELF)
run(path)
after = resource.getrusage(resource.RUSAGE_SELF)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
# user (the code) and system (mostly first touches of new memory) apart
user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
print(json.dumps({"wall": wall, "cpu": cpu, "user": user, "system": system,
                  "added_mb": rss_mb() - warm}))
"""

_PROFILE = r"""
import cProfile, io, pstats, sys, time
path = sys.argv[1]
import traceparse, traceparse.core.loading
def ours():
    prof = traceparse.load(path)
    prof.allocations, prof.timeline
ours()
profiler = cProfile.Profile(time.process_time)
profiler.runcall(ours)
out = io.StringIO()
pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(int(sys.argv[2]))
print(out.getvalue())
"""


# The memory settings of a run on a dense capture (see the module's docstring).
MEMORY = {"ours": {}, "no_pool": {"TRACEPARSE_NO_POOL": "1"}, "settled": LIBRARY_ENVIRONMENT}


def _python(code: str, *args: object, pure: bool = False, memory: str = "ours") -> str:
    """Run ``code`` in a fresh interpreter; ``pure``: without the compiled loops;
    ``memory``: a key of ``MEMORY``."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **MEMORY[memory]}
    if pure:
        env["TRACEPARSE_PURE_PYTHON"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,  # `python -c` imports from its directory first: this checkout
        env=env,
    )
    return out.stdout


def one(path: Path, what: str, warm_up: Path, memory: str = "ours") -> dict[str, float]:
    out = _python(_ONE, path, what, warm_up, pure=what == "traceparse-numpy", memory=memory)
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def real_capture(path: Path, warm_up: Path, turns: int) -> dict[str, Any]:
    """(a), (c) and every third turn (b), each one run in a fresh process, in turns."""
    runs: dict[str, list[dict[str, float]]] = {
        "parse": [],
        "xprof": [],
        "traceparse": [],
        "traceparse-numpy": [],
    }
    for turn in range(turns):
        for what in runs:
            if what != "xprof" or turn % 3 == 0:
                runs[what].append(one(path, what, warm_up))
    best: dict[str, Any] = {
        what: {key: min(r[key] for r in results) for key in ("wall", "cpu")}
        for what, results in runs.items()
    }
    best["turns"] = {what: len(results) for what, results in runs.items()}
    return best


# Per size: (key, what runs, memory settings); see the module's docstring.
KINDS = (
    ("ours", "traceparse", "ours"),
    ("no_pool", "traceparse", "no_pool"),
    ("settled", "traceparse", "settled"),
    ("summary", "summary", "settled"),
    ("upb", "parse", "ours"),
)
# Their names in the tables and the plot (upb's is drawn apart), and the plot's marks.
LABELS = {
    "ours": ("(c)", "o"),
    "no_pool": ("(c0)", "v"),
    "settled": ("(c*)", "s"),
    "summary": ("(s*)", "D"),
}


def per_size(events: list[int], upb_max_mb: float, processes: int) -> list[dict[str, Any]]:
    """Per size: (c), (c0), (c*), (s*) and (a), one fresh process per run, in
    turns; the run of least CPU time of each."""
    warm_up, _ = make_dense(10_000)
    rows = []
    for count in events:
        path, _ = make_dense(count)
        size_mb = path.stat().st_size / 1e6
        kinds = [k for k in KINDS if k[0] != "upb" or size_mb <= upb_max_mb]
        runs: dict[str, list[dict[str, float]]] = {key: [] for key, _, _ in kinds}
        for _ in range(processes if size_mb < 200 else min(processes, 2)):
            for key, what, memory in kinds:
                runs[key].append(one(path, what, warm_up, memory))
        row: dict[str, Any] = {"events": count, "file_mb": size_mb, "upb": None}
        row.update({key: min(results, key=lambda r: r["cpu"]) for key, results in runs.items()})
        row["processes"] = len(runs["ours"])
        rows.append(row)
        print(json.dumps(rows[-1]), flush=True)
    return rows


def spread(rows: list[dict[str, Any]], key: str) -> float:
    """Highest CPU ms per MB over the lowest, across the sizes: 1.0 is flat."""
    per_mb = [r[key]["cpu"] / r["file_mb"] for r in rows]
    return max(per_mb) / min(per_mb)


def exponent(rows: list[dict[str, Any]], key: str) -> float:
    """k of the least-squares fit CPU = c * MB**k (in logs): 1.0 is linear, where
    spread also counts each size's noise."""
    import numpy as np

    sizes = np.log([r["file_mb"] for r in rows])
    times = np.log([r[key]["cpu"] for r in rows])
    return float(np.polyfit(sizes, times, 1)[0])


def summary_command(path: Path) -> dict[str, float]:
    """`traceparse summary FILE` as a user runs it: wall, CPU, peak RSS (wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "traceparse", "summary", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"traceparse summary {path} failed")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "user": usage.ru_utime,
        "system": usage.ru_stime,
        # MB of 10**6 bytes, as the file's size (ru_maxrss is in KiB).
        "rss_mb": usage.ru_maxrss * 1024 / 1e6,
    }


def profile_top(path: Path, entries: int) -> str:
    text = _python(_PROFILE, path, entries)
    # Keep the table; shorten this machine's paths.
    lines = [line for line in text.splitlines() if re.match(r"\s*(ncalls|\d)", line)]
    return "\n".join(re.sub(r"\S*/(site-packages|traceparse)/", r"\1/", line) for line in lines)


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["file_mb"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, (name, mark) in LABELS.items():
        for part, line in (("cpu", "-"), ("system", ":")):
            per_mb = [r[key][part] / r["file_mb"] * 1000 for r in rows]
            ax.plot(sizes, per_mb, mark + line, label=f"{name} {'CPU' if part == 'cpu' else part}")
    upb = [r for r in rows if r["upb"]]
    ax.plot(
        [r["file_mb"] for r in upb],
        [r["upb"]["cpu"] / r["file_mb"] * 1000 for r in upb],
        "^--",
        label="(a) upb parse, CPU",
    )
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("capture size (MB, dense synthetic)")
    ax.set_ylabel("ms per MB")
    ax.set_title(
        "Time per MB: (c) load + tables, (c0) without the pool, (c*) with the CLI's "
        "settings, (s*) + summary()"
    )
    ax.title.set_fontsize("small")
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def report(
    real: dict[str, Any] | None,
    real_mb: float,
    rows: list[dict[str, Any]],
    summary: dict[str, float],
    profiles: dict[str, str],
    command: str,
) -> str:
    out = [
        SECTION,
        "",
        f"Made by `{command}` on {platform.machine()} ({_cpu_name()}), {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; the only kind of CPU this was run on. "
        "Wall and CPU seconds: the machine was shared with other jobs, so wall time is "
        "the noisier of the two; each figure is the minimum of its runs.",
        "",
    ]
    if real:
        a, b, c, n = real["parse"], real["xprof"], real["traceparse"], real["traceparse-numpy"]
        out += [
            f"## Real capture: ResNet50, {RESNET_STEPS} steps, {real_mb:.1f} MB",
            "",
            "Each run in a fresh process after a warm-up run on the 3-step capture, in "
            "turns (parse, xprof every third turn, traceparse, traceparse on its numpy "
            f"path): {real['turns']['parse']} / {real['turns']['xprof']} / "
            f"{real['turns']['traceparse']} / {real['turns']['traceparse-numpy']} runs.",
            "",
            "| | wall s | CPU s |",
            "|---|---|---|",
            f"| (a) read + upb `XSpace.FromString` | {a['wall']:.3f} | {a['cpu']:.3f} |",
            f"| (b) xprof memory_profile converter | {b['wall']:.3f} | {b['cpu']:.3f} |",
            f"| (c) traceparse load + allocations + timeline | {c['wall']:.3f} | {c['cpu']:.3f} |",
            f"| (c)/(a) (goal <= 0.8) | {c['wall'] / a['wall']:.2f}x "
            f"| {c['cpu'] / a['cpu']:.2f}x |",
            f"| (b)/(c) (goal >= 12) | {b['wall'] / c['wall']:.1f}x | {b['cpu'] / c['cpu']:.1f}x |",
            f"| (c') (c) on the numpy path (`TRACEPARSE_PURE_PYTHON=1`) | {n['wall']:.3f} "
            f"| {n['cpu']:.3f} |",
            f"| (c')/(a) | {n['wall'] / a['wall']:.2f}x | {n['cpu'] / a['cpu']:.2f}x |",
            "",
        ]
    out += [
        "## Time per MB, 10 MB to 1.2 GB (dense synthetic captures)",
        "",
        "One load per fresh process after a warm-up load of a 10,000-event capture, "
        "in turns; the run of least CPU time of "
        + ", ".join(f"{r['processes']}" for r in rows)
        + " processes per size. (c) as a library user runs it (NumPy's arrays from "
        "traceparse's pool, `traceparse/core/memory.py`); (c0) without the pool "
        "(`TRACEPARSE_NO_POOL=1`: NumPy's and glibc's defaults); (c*) with the memory "
        "settings the commands that read captures make (`traceparse/cli/process.py`, "
        "given here as environment variables); (a) where upb's objects fit in memory. "
        "System time is mostly the kernel handing over fresh pages.",
        "",
        "| events | file MB | (c) CPU s | (c) CPU ms/MB | (c) user ms/MB | (c) system ms/MB "
        "| (c0) CPU ms/MB | (c0) system ms/MB | (c*) CPU ms/MB | (c*) system ms/MB "
        "| (c) RSS added MB | (a) CPU s | (c)/(a) CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c, bare, settled, a = r["ours"], r["no_pool"], r["settled"], r["upb"]
        mb = r["file_mb"] / 1000
        out.append(
            f"| {r['events']:,} | {r['file_mb']:.1f} | {c['cpu']:.2f} | {c['cpu'] / mb:.1f} "
            f"| {c['user'] / mb:.1f} | {c['system'] / mb:.1f} | {bare['cpu'] / mb:.1f} "
            f"| {bare['system'] / mb:.1f} | {settled['cpu'] / mb:.1f} "
            f"| {settled['system'] / mb:.1f} | {c['added_mb']:.0f} "
            + (f"| {a['cpu']:.2f} | {c['cpu'] / a['cpu']:.2f}x |" if a else "| not run | |")
        )
    out += [
        "",
        "How flat, per kind of run: k of the fit CPU = c x MB^k over the sizes (1.00 is "
        "linear: time per MB that neither grows nor falls with the file), and the highest "
        "CPU time per MB over the lowest (which also counts each size's noise): "
        + ", ".join(
            f"{name} k = {exponent(rows, key):.2f}, {spread(rows, key):.2f}x"
            for key, (name, _) in LABELS.items()
        )
        + ".",
    ]
    out += [
        "",
        "(s*) the same process and settings as (c*), then `summary()`: what `traceparse "
        "summary` computes, without starting Python and importing pandas, which cost "
        "the same at every size.",
        "",
        "| events | file MB | (s*) CPU s | (s*) CPU ms/MB | (s*) user ms/MB "
        "| (s*) system ms/MB | (s*) RSS added MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        run, mb = r["summary"], r["file_mb"] / 1000
        out.append(
            f"| {r['events']:,} | {r['file_mb']:.1f} | {run['cpu']:.2f} | {run['cpu'] / mb:.1f} "
            f"| {run['user'] / mb:.1f} | {run['system'] / mb:.1f} | {run['added_mb']:.0f} |"
        )
    big = rows[-1]
    out += [
        "",
        "![time per MB](speed_per_mb.png)",
        "",
        f"## `traceparse summary` end to end, {big['events']:,} events ({big['file_mb']:.0f} MB)",
        "",
        f"As a user runs it, in a fresh process: wall {summary['wall']:.1f} s, CPU "
        f"{summary['cpu']:.1f} s (user {summary['user']:.1f}, system {summary['system']:.1f}), "
        f"peak RSS {summary['rss_mb']:.0f} MB ({summary['rss_mb'] / big['file_mb']:.2f}x the "
        "file; MB are 10^6 bytes throughout).",
        "",
    ]
    for name, text in profiles.items():
        out += [
            f"## Profile: {name} (cProfile, CPU timer, by own time)",
            "",
            "```",
            text,
            "```",
            "",
        ]
    return "\n".join(out)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def write_section(path: Path, section: str) -> None:
    """Replace this script's section of ``path`` (or append it); the rest stays."""
    text = path.read_text() if path.exists() else ""
    head, _, _ = text.partition(SECTION)
    path.write_text(head.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resnet", type=Path, help="the real capture (default: 55 steps)")
    parser.add_argument("--warm-up", type=Path, help="its warm-up capture (default: 3 steps)")
    parser.add_argument(
        "--events", type=int, nargs="+", default=[100_000, 300_000, 1_000_000, 3_000_000]
    )
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--processes", type=int, default=5, help="per dense size (2 from 200 MB)")
    parser.add_argument("--upb-max-mb", type=float, default=400)
    parser.add_argument("--profile-entries", type=int, default=15)
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args(argv)

    resnet = args.resnet or capture_path(RESNET_STEPS) or make_capture(RESNET_STEPS)
    small = args.warm_up or capture_path(WARM_UP_STEPS) or make_capture(WARM_UP_STEPS)
    real = real_capture(resnet, small, args.turns)
    print(json.dumps(real), flush=True)
    rows = per_size(sorted(args.events), args.upb_max_mb, args.processes)
    summary = summary_command(make_dense(max(args.events))[0])
    print(json.dumps(summary), flush=True)
    profiles = {f"ResNet50 {RESNET_STEPS} steps": profile_top(resnet, args.profile_entries)}
    if 1_000_000 in args.events:
        dense = make_dense(1_000_000)[0]
        profiles["1M-event dense capture"] = profile_top(dense, args.profile_entries)
    plot(rows, args.output.parent / "speed_per_mb.png")
    command = "python benchmarks/bench_speed.py " + " ".join(argv or sys.argv[1:])
    section = report(real, resnet.stat().st_size / 1e6, rows, summary, profiles, command)
    print(section)
    write_section(args.output, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
