"""The decoder on the oldest and the newest supported dependency sets.

Runs bench_decode.py's probes (a) a bare XSpace parse with our message classes
and (c) traceparse from file to allocations and timeline, with each given
interpreter (one virtualenv per dependency set) on the same ResNet50 capture,
and writes benchmarks/COMPAT_RESULTS.md.

    python benchmarks/bench_compat.py --python .venv-old/bin/python .venv/bin/python \\
        [--steps 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_decode import WARM_UP_STEPS, probe  # noqa: E402
from make_captures import capture_path, make_capture  # noqa: E402

_VERSIONS = r"""
import json, numpy, pandas, google.protobuf
from google.protobuf.internal import api_implementation
print(json.dumps({"protobuf": google.protobuf.__version__,
                  "implementation": api_implementation.Type(),
                  "numpy": numpy.__version__, "pandas": pandas.__version__}))
"""


def versions(python: str) -> dict[str, str]:
    out = subprocess.run([python, "-c", _VERSIONS], check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", nargs="+", required=True, help="interpreters to compare")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output", type=Path, default=HERE / "COMPAT_RESULTS.md")
    args = parser.parse_args(argv)

    path = capture_path(args.steps) or make_capture(args.steps)
    warm_up = capture_path(WARM_UP_STEPS) or make_capture(WARM_UP_STEPS)
    size_mb = path.stat().st_size / 1e6
    lines = [
        "| protobuf | runtime | numpy | pandas | (a) parse s | (c) traceparse s "
        "| (c) s/MB | (c) peak RSS MB |",
        "|" + "---|" * 8,
    ]
    for python in args.python:
        found = versions(python)
        parse = probe(path, "parse", args.repeat, python=python)
        load = probe(path, "traceparse", args.repeat, warm_up, python=python)
        row = (
            f"| {found['protobuf']} | {found['implementation']} | {found['numpy']} "
            f"| {found['pandas']} | {parse['median_s']:.3f} | {load['median_s']:.3f} "
            f"| {load['median_s'] / size_mb:.4f} | {load['rss_mb']:.0f} |"
        )
        print(row, flush=True)
        lines.append(row)
    report = [
        "# Decoder on the oldest and newest supported dependencies",
        "",
        f"Made by `python benchmarks/bench_compat.py --steps {args.steps} "
        f"--repeat {args.repeat}` (medians of {args.repeat} runs) on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, on the "
        f"{args.steps}-step ResNet50 capture ({size_mb:.1f} MB, see make_captures.py).",
        "(a) and (c) are bench_decode.py's: a bare `XSpace.FromString` with our message",
        "classes, and traceparse from file to `Profile.allocations` and `Profile.timeline`.",
        "",
        *lines,
        "",
    ]
    args.output.write_text("\n".join(report))
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
