"""XLA benchmark: ``load()`` of a capture holding a ~20 MB HLO module vs one without.

Builds two captures from fixtures/xla_keras: the fixture as it is (its module
is ~130 kB) and the same capture whose ``Hlo Proto`` stat holds a module grown
to ~20 MB (the entry computation's instructions repeated). For each, in a fresh
process per measurement, times the median of several repetitions of

  (a) ``traceparse.load(path)`` followed by ``allocations`` and ``timeline``;
  (b) the same plus ``summary()`` (which links allocations, so parses programs);

with the code under test (this checkout) and, when given, a baseline checkout
(``--baseline DIR``, e.g. the main worktree) to show ``load()`` is no slower.

    python benchmarks/bench_xla.py [--baseline /work/main] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TARGET_BYTES = 20_000_000

_PROBE = r"""
import json, statistics, sys, time
import traceparse
path, what, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = []
for _ in range(repeat):
    start = time.perf_counter()
    p = traceparse.load(path)
    p.allocations, p.timeline
    if what == "summary":
        p.summary()
    times.append(time.perf_counter() - start)
print(json.dumps({"median_s": statistics.median(times)}))
"""


def grow_capture(source: Path, out: Path) -> int:
    """Write ``source`` with its HLO module grown to about TARGET_BYTES; return its size."""
    sys.path.insert(0, str(REPO))
    from traceparse._proto import hlo_pb2, xplane_pb2

    space = xplane_pb2.XSpace.FromString(source.read_bytes())
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        ids = {k for k, m in plane.stat_metadata.items() if m.name == "Hlo Proto"}
        for meta in plane.event_metadata.values():
            for stat in meta.stats:
                if stat.metadata_id not in ids:
                    continue
                hlo = hlo_pb2.HloProto.FromString(stat.bytes_value)
                module = hlo.hlo_module
                extra = list(module.computations)
                while hlo.ByteSize() < TARGET_BYTES:
                    for comp in extra:
                        copy = module.computations.add()
                        copy.CopyFrom(comp)
                        copy.id = copy.id + 10**9 * len(module.computations)
                stat.bytes_value = hlo.SerializeToString()
                size = len(stat.bytes_value)
    out.write_bytes(space.SerializeToString())
    return size


def probe(code_dir: Path, path: Path, what: str, repeat: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path), what, str(repeat)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(json.loads(done.stdout)["median_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout of the code before (optional)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    source = next((REPO / "fixtures" / "xla_keras").rglob("*.xplane.pb"))
    with tempfile.TemporaryDirectory(prefix="bench-xla-") as tmp:
        big = Path(tmp) / "plugins" / "profile" / "2026_01_01_00_00_00" / "localhost.xplane.pb"
        big.parent.mkdir(parents=True)
        module_bytes = grow_capture(source, big)
        print(
            f"grown HLO module: {module_bytes / 1e6:.1f} MB; file {big.stat().st_size / 1e6:.1f} MB"
        )
        codes = [("this checkout", REPO)]
        if args.baseline:
            codes.append(("baseline", args.baseline))
        print(f"{'code':<14} {'capture':<22} {'load (s)':>9} {'summary (s)':>12}")
        for label, code in codes:
            for name, path in (("fixture (130 kB HLO)", source), ("20 MB HLO module", big)):
                load_s = probe(code, path, "load", args.repeat)
                summary_s = probe(code, path, "summary", args.repeat)
                print(f"{label:<14} {name:<22} {load_s:>9.3f} {summary_s:>12.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
