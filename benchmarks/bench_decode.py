"""Decoder benchmark: traceparse against a bare protobuf parse and xprof.

For each ResNet50 capture made by make_captures.py (3, 20 and 80 training
steps by default; RESULTS.md also has 55 and 250), measures the median of
several repetitions of:

  (a) XSpace.ParseFromString of the whole file (upb): the floor for a full parse;
  (b) xprof's memory_profile conversion of the same file: the peer;
  (c) traceparse from file to Profile.allocations and Profile.timeline;
  (d) `traceparse summary FILE` as a whole process, interpreter start included;

plus the peak RSS of (c) and (d), each in a fresh process: (c)'s is that of one
load (a process that loads several captures of up to 32 MB keeps more, see
RESULTS.md). Prints a table and the issue's goals as met or not, and writes
benchmarks/RESULTS.md.

    python benchmarks/bench_decode.py [--steps 3 20 80] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_captures import capture_path, make_capture  # noqa: E402

# Each probe runs in a fresh interpreter and prints JSON: seconds per repetition
# and the process's peak RSS.
_PROBE = r"""
import json, resource, sys, time
path, what, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
if what == "parse":
    from traceparse._proto import xplane_pb2
    def run():
        with open(path, "rb") as f:
            xplane_pb2.XSpace.FromString(f.read())
elif what == "xprof":
    from xprof.convert import raw_to_tool_data
    def run():
        raw_to_tool_data.xspace_to_tool_data([path], "memory_profile", {})
else:
    import traceparse, traceparse.core.loading  # the package is lazy: import what load uses
    def run(capture=path):
        prof = traceparse.load(capture)
        return prof.allocations, prof.timeline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
warm_base = base
if what == "traceparse" and len(sys.argv) > 4:
    # One load of a tiny capture first: what pandas and pyarrow import on first
    # use then counts as imports, not as this capture's memory.
    run(sys.argv[4])
    warm_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
times = []
for _ in range(repeat):
    start = time.perf_counter()
    tables = run()
    times.append(time.perf_counter() - start)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
table_bytes = sum(int(t.memory_usage(deep=True).sum()) for t in tables or ())
print(json.dumps(
    {"times": times, "rss_kb": peak, "base_rss_kb": base, "warm_rss_kb": warm_base,
     "table_mb": table_bytes / 1e6}
))
"""


WARM_UP_STEPS = 3


def probe(
    path: Path,
    what: str,
    repeat: int,
    warm_up: Path | None = None,
    python: str = sys.executable,
) -> dict[str, float]:
    extra = [str(warm_up)] if warm_up else []
    out = subprocess.run(
        [python, "-c", _PROBE, str(path), what, str(repeat), *extra],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "median_s": statistics.median(result["times"]),
        "rss_mb": result["rss_kb"] / 1024,
        "base_rss_mb": result["base_rss_kb"] / 1024,
        "warm_rss_mb": result["warm_rss_kb"] / 1024,
        "table_mb": result["table_mb"],
    }


def whole_command(path: Path, repeat: int) -> dict[str, float]:
    """(d): the CLI as a user runs it, timed from outside; RSS from wait4."""
    times, peaks = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "traceparse", "summary", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - start)
        peaks.append(usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"traceparse summary {path} failed")
    return {"median_s": statistics.median(times), "rss_mb": max(peaks)}


def goals(rows: list[tuple]) -> list[str]:  # type: ignore[type-arg]
    """The issue's goals, checked on this run's medians."""
    out = ["Goals (captures of 5 MB or more):", ""]
    big = [r for r in rows if r[1] >= 5]
    for steps, size_mb, a, b, c, _ in big:
        ratio = c["median_s"] / a["median_s"]
        speedup = b["median_s"] / c["median_s"]
        added = c["one_rss_mb"] - c["one_warm_rss_mb"]
        bound = 2 * size_mb + c["table_mb"]
        out.append(
            f"- {steps} steps ({size_mb:.0f} MB): (c)/(a) {ratio:.2f}x {_mark(ratio <= 1.5)} "
            f"(<= 1.5x); (b)/(c) {speedup:.1f}x {_mark(speedup >= 10)} (>= 10x); "
            f"RSS added after warm-up {added:.0f} MB {_mark(added <= bound)} "
            f"(<= 2 x file + tables = {bound:.0f} MB)"
        )
    if len(big) >= 3:
        # Linear growth: a straight line through (MB, seconds) fits every capture.
        sizes = [r[1] for r in big]
        times = [r[4]["median_s"] for r in big]
        slope, fixed = statistics.linear_regression(sizes, times)
        worst = max(abs(t - (fixed + slope * m)) / t for m, t in zip(sizes, times, strict=True))
        out.append(
            f"- linear: (c) = {fixed * 1000:.0f} ms + {slope * 1000:.1f} ms/MB fits every capture "
            f"within {worst:.0%} {_mark(worst <= 0.1)} (within 10%)"
        )
    near = min(rows, key=lambda r: abs(r[1] - 28))
    out.append(
        f"- (d) on the {near[1]:.0f} MB capture: {near[5]['median_s']:.2f} s "
        f"{_mark(near[5]['median_s'] < 1.5)} (< 1.5 s)"
    )
    return out


def _mark(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[3, 20, 80])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args(argv)

    rows = []
    # The smallest capture warms up (c)'s second memory figure.
    warm_up = capture_path(WARM_UP_STEPS) or make_capture(WARM_UP_STEPS)
    for steps in args.steps:
        path = capture_path(steps) or make_capture(steps)
        size_mb = path.stat().st_size / 1e6
        a = probe(path, "parse", args.repeat)
        b = probe(path, "xprof", max(1, args.repeat // 2))
        c = probe(path, "traceparse", args.repeat, warm_up)
        # Memory of one load, in a process of its own: repeated loads also measure
        # what the C allocator keeps of the earlier ones.
        one = probe(path, "traceparse", 1, warm_up)
        c.update({f"one_{key}": one[key] for key in ("rss_mb", "base_rss_mb", "warm_rss_mb")})
        d = whole_command(path, args.repeat)
        rows.append((steps, size_mb, a, b, c, d))
        print(
            f"{steps:>3} steps {size_mb:6.1f} MB  parse {a['median_s']:.3f}s  "
            f"xprof {b['median_s']:.3f}s  traceparse {c['median_s']:.3f}s  "
            f"summary {d['median_s']:.3f}s",
            flush=True,
        )

    header = (
        "| steps | file MB | (a) parse s | (b) xprof s | (c) traceparse s | (c)/(a) | (b)/(c) "
        "| (c) s/MB | (c) peak RSS MB | added after imports | added after warm-up "
        f"| added after {args.repeat} loads | tables MB | (d) summary s | (d) peak RSS MB |"
    )
    lines = [header, "|" + "---|" * 15]
    for steps, size_mb, a, b, c, d in rows:
        lines.append(
            f"| {steps} | {size_mb:.1f} | {a['median_s']:.3f} | {b['median_s']:.3f} "
            f"| {c['median_s']:.3f} | {c['median_s'] / a['median_s']:.2f}x "
            f"| {b['median_s'] / c['median_s']:.1f}x | {c['median_s'] / size_mb:.4f} "
            f"| {c['one_rss_mb']:.0f} | {c['one_rss_mb'] - c['one_base_rss_mb']:.0f} "
            f"| {c['one_rss_mb'] - c['one_warm_rss_mb']:.0f} "
            f"| {c['rss_mb'] - c['warm_rss_mb']:.0f} | {c['table_mb']:.1f} "
            f"| {d['median_s']:.2f} | {d['rss_mb']:.0f} |"
        )
    table = "\n".join([*lines, "", *goals(rows)])
    print()
    print(table)
    report = [
        "# Decoder benchmark",
        "",
        f"Made by `python benchmarks/bench_decode.py --steps {' '.join(map(str, args.steps))} "
        f"--repeat {args.repeat}` (medians of {args.repeat} runs, (b) of "
        f"{max(1, args.repeat // 2)}) on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}.",
        "Captures: ResNet50 (64x64 inputs, batch 8) trained on CPU, see make_captures.py.",
        "",
        table,
        "",
        "(c) is file to `Profile.allocations` and `Profile.timeline`. Its peak RSS is that",
        "of one load in a process of its own, the whole process (interpreter, numpy, pandas,",
        "protobuf); 'added after imports' is the peak less the RSS after `import traceparse`,",
        f"'added after warm-up' the peak less the peak after one load of the {WARM_UP_STEPS}-step",
        "capture (what pandas and pyarrow import on first use, about 20 MB, is then counted",
        f"as imports). 'added after {args.repeat} loads' is the same figure from the timing",
        "process, which loaded the capture that many times: glibc raises its mmap threshold",
        "when a large block is freed (up to 32 MB), so a later buffer the size of the file",
        "comes from the heap and stays resident after it is freed. Captures over 32 MB are",
        "not affected. 'tables MB' is `memory_usage(deep=True)` of the two tables. (d) is",
        "`traceparse summary FILE` timed from outside, interpreter start included.",
        "",
    ]
    # Its own part is the file's first section; the sections after it (written by
    # hand or by other benchmarks) stay.
    old = args.output.read_text() if args.output.exists() else ""
    later = old.find("\n# ")
    rest = old[later:] if later >= 0 else ""
    args.output.write_text("\n".join(report) + rest)
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
