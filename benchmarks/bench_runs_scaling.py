"""Long JAX captures and large inventories cost time linear in their size (n log n).

Two inputs of issue 37, each in two sizes, timed in this process (CPU time, the
minimum of ``--repeat`` runs, garbage collector off while timing):

- ``jax-runs``: a JAX capture's steps repeated (``make_long_jax.py``), ``--copies``
  and 10 times as many, through ``traceparse summary`` (run records resolved,
  allocations linked to programs). Before, resolution and linking compared every
  run with every other: 8 times the copies took 19 times the time;
- ``jax-runs-8x``: the same, 8 times as many copies (the issue's bound: 10x);
- ``inventory``: ``make_inventory_capture.py``'s capture of N allocations of one
  shape with N variables of that shape, N = ``--variables`` and 10 times that,
  through ``Profile.breakdown`` (variables matched to allocations);
- ``inventory-vs-none``: the larger one against the same capture without its
  inventory (the issue's bound: 3x).

Exits 1 when a ratio passes its bound (``--bound`` for the 10x inputs: 12).

    python benchmarks/bench_runs_scaling.py [--copies 32] [--variables 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_inventory_capture import write_capture as inventory_capture
from make_long_jax import write_capture as jax_capture

import traceparse
from traceparse.cli import app


def cpu_seconds(work: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        start = time.process_time()
        try:
            work()
        finally:
            gc.enable()
        best = min(best, time.process_time() - start)
    return best


def summary(path: Path) -> Callable[[], object]:
    def run() -> object:
        with contextlib.redirect_stdout(io.StringIO()):
            return app.main(["summary", str(path)])

    return run


def breakdown(path: Path) -> Callable[[], object]:
    return lambda: traceparse.load(path).breakdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=32)
    parser.add_argument("--variables", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bound", type=float, default=12.0)
    args = parser.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        small = jax_capture(out, args.copies)
        cases = [
            ("jax-runs", small, jax_capture(out, 10 * args.copies), summary, args.bound),
            ("jax-runs-8x", small, jax_capture(out, 8 * args.copies), summary, 10.0),
            (
                "inventory",
                inventory_capture(out, args.variables),
                inventory_capture(out, 10 * args.variables),
                breakdown,
                args.bound,
            ),
            (
                "inventory-vs-none",
                inventory_capture(out, 10 * args.variables, inventory=False),
                inventory_capture(out, 10 * args.variables),
                breakdown,
                3.0,
            ),
        ]
        summary(small)()  # imports and first-use costs paid before timing
        print(f"{'input':<18} {'small s':>8} {'large s':>8} {'ratio':>6} {'bound':>6}")
        for name, first, second, how, bound in cases:
            a = cpu_seconds(how(first), args.repeat)
            b = cpu_seconds(how(second), args.repeat)
            ratio = b / a if a > 0 else float("inf")
            failed |= ratio > bound
            print(f"{name:<18} {a:>8.2f} {b:>8.2f} {ratio:>6.1f} {bound:>6.0f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
