"""Memory-dense captures: time and peak memory of traceparse on N allocator events.

For each size, makes (or reuses) a synthetic capture with make_dense.py and
measures, each in a process of its own:

  (c) ``traceparse.load(path)`` then ``.allocations`` and ``.timeline``;
  (d) the same, then ``Profile.summary()``;

with the process's peak RSS (``ru_maxrss``) and what it added over the peak
after imports and one load of a tiny dense capture (what pandas imports on
first use then counts as imports). The goal (issue 17, item 11): RSS added
<= 2 x file + the tables' own size (``memory_usage(deep=True)``). Writes
benchmarks/DENSE_RESULTS.md.

    python benchmarks/bench_dense.py [--events 100000 1000000 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_dense import make_dense  # noqa: E402

WARM_UP_EVENTS = 10_000

_PROBE = r"""
import json, resource, sys, time
path, what, warm_up = sys.argv[1], sys.argv[2], sys.argv[3]
import traceparse, traceparse.core.loading  # the package is lazy: import what load uses
def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
base = rss_mb()
prof = traceparse.load(warm_up)
prof.allocations, prof.timeline
if what == "summary":
    prof.summary()
del prof
warm = rss_mb()
start = time.perf_counter()
prof = traceparse.load(path)
allocations, timeline = prof.allocations, prof.timeline
load_s = time.perf_counter() - start
load_peak = rss_mb()
summary_s = None
if what == "summary":
    start = time.perf_counter()
    prof.summary()
    summary_s = time.perf_counter() - start
tables = [int(t.memory_usage(deep=True).sum()) for t in (allocations, timeline)]
print(json.dumps({
    "load_s": load_s, "summary_s": summary_s, "base_mb": base, "warm_mb": warm,
    "load_peak_mb": load_peak, "peak_mb": rss_mb(), "allocations": len(allocations),
    "timeline": len(timeline), "allocations_mb": tables[0] / 1e6, "timeline_mb": tables[1] / 1e6,
}))
"""


def probe(path: Path, what: str, warm_up: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path), what, str(warm_up)],
        check=True,
        capture_output=True,
        text=True,
        cwd=HERE.parent,  # `python -c` imports from its directory first: this checkout
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(events: int, warm_up: Path) -> dict[str, Any]:
    path, expected = make_dense(events)
    size_mb = path.stat().st_size / 1e6
    load = probe(path, "load", warm_up)
    summary = probe(path, "summary", warm_up)
    if load["allocations"] != expected["allocations"] or load["timeline"] != events:
        raise SystemExit(f"{path}: decoded {load} but the capture holds {expected}")
    return {"events": events, "file_mb": size_mb, "load": load, "summary": summary}


def rows(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| events | file MB | bytes/event | (c) load s | (c) peak RSS MB | (c) added MB "
        "| allocations MB | timeline MB | bytes/allocation row | bytes/timeline row "
        "| (d) summary s | (d) peak RSS MB | (d) added MB | 2 x file + tables MB |",
        "|" + "---|" * 14,
    ]
    for r in results:
        c, d = r["load"], r["summary"]
        tables = c["allocations_mb"] + c["timeline_mb"]
        added = c["load_peak_mb"] - c["warm_mb"]
        lines.append(
            f"| {r['events']:,} | {r['file_mb']:.1f} | {r['file_mb'] * 1e6 / r['events']:.0f} "
            f"| {c['load_s']:.2f} | {c['load_peak_mb']:.0f} | {added:.0f} "
            f"| {c['allocations_mb']:.1f} | {c['timeline_mb']:.1f} "
            f"| {c['allocations_mb'] * 1e6 / c['allocations']:.0f} "
            f"| {c['timeline_mb'] * 1e6 / c['timeline']:.0f} "
            f"| {d['summary_s']:.2f} | {d['peak_mb']:.0f} | {d['peak_mb'] - d['warm_mb']:.0f} "
            f"| {2 * r['file_mb'] + tables:.0f} |"
        )
    return lines


def goals(results: list[dict[str, Any]]) -> list[str]:
    out = ["Goal: peak RSS added <= 2 x file + tables.", ""]
    for r in results:
        c, d = r["load"], r["summary"]
        bound = 2 * r["file_mb"] + c["allocations_mb"] + c["timeline_mb"]
        for name, probe_result, peak in (
            ("load", c, c["load_peak_mb"]),
            ("summary", d, d["peak_mb"]),
        ):
            added = peak - probe_result["warm_mb"]
            mark = "met" if added <= bound else "NOT met"
            out.append(
                f"- {r['events']:,} events, {name}: {added:.0f} MB added "
                f"({added / r['file_mb']:.2f} x file) {mark} (<= {bound:.0f} MB)"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--output", type=Path, default=HERE / "DENSE_RESULTS.md")
    args = parser.parse_args(argv)
    warm_up, _ = make_dense(WARM_UP_EVENTS)
    results = []
    for events in args.events:
        r = measure(events, warm_up)
        results.append(r)
        print(json.dumps(r), flush=True)
    command = "python benchmarks/bench_dense.py --events " + " ".join(map(str, args.events))
    text = [
        "# Memory-dense captures (issue 17, item 11)",
        "",
        f"Made by `{command}` on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}. Captures: make_dense.py (the layout of "
        "fixtures/keras_train, N MemoryAllocation/MemoryDeallocation events).",
        "",
        *rows(results),
        "",
        *goals(results),
        "",
    ]
    print("\n".join(text))
    args.output.write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
