"""XLA benchmark: ``load()`` of a capture holding a ~20 MB HLO module vs one without.

Builds a capture from fixtures/xla_keras whose ``Hlo Proto`` stat holds a
module grown to ~20 MB (the computations repeated under new ids), and times,
for it, the fixture itself and keras_train (no programs), in fresh processes
(``import traceparse, pandas, numpy`` first, so imports that every run pays
are left out):

  (a) ``traceparse.load(path)`` followed by ``allocations`` and ``timeline``
      (links allocator events to programs: the skim read, docs/xla.md);
  (b) then ``summary()`` (expands the linked slabs live at the peak).

with the code under test (this checkout) and, when given, baseline checkouts
(``--baseline DIR``, repeatable), runs interleaved; the minimum of
``--repeat`` runs is reported (the CPUs are shared, so medians swing).

    python benchmarks/bench_xla.py [--baseline /tmp/xla-base] [--repeat 5]
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
import json, sys, time
import numpy, pandas, traceparse
start = time.perf_counter()
p = traceparse.load(sys.argv[1])
p.allocations, p.timeline
loaded = time.perf_counter()
p.summary()
print(json.dumps([loaded - start, time.perf_counter() - loaded, "tensorflow" in sys.modules]))
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


def probe(code_dir: Path, path: Path) -> tuple[float, float]:
    """(load s, summary s) of one fresh process running ``code_dir``'s traceparse."""
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    load_s, summary_s, tensorflow = json.loads(done.stdout.strip().splitlines()[-1])
    if tensorflow:
        raise SystemExit(f"{code_dir}: loading imported tensorflow")
    return float(load_s), float(summary_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", type=Path, action="append", default=[], help="a checkout of the code before"
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    source = next((REPO / "fixtures" / "xla_keras").rglob("*.xplane.pb"))
    plain = REPO / "fixtures" / "keras_train"
    with tempfile.TemporaryDirectory(prefix="bench-xla-") as tmp:
        big = Path(tmp) / "plugins" / "profile" / "2026_01_01_00_00_00" / "localhost.xplane.pb"
        big.parent.mkdir(parents=True)
        module_bytes = grow_capture(source, big)
        print(
            f"grown HLO module: {module_bytes / 1e6:.1f} MB; file {big.stat().st_size / 1e6:.1f} MB"
        )
        codes = [("this checkout", REPO), *((str(b), b) for b in args.baseline)]
        captures = [
            ("keras_train (no programs)", plain),
            ("xla_keras", source),
            ("20 MB HLO module", big),
        ]
        best: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeat):
            for name, path in captures:
                for label, code in codes:
                    times = probe(code, path)
                    found = best.setdefault((label, name), list(times))
                    best[(label, name)] = [min(a, b) for a, b in zip(found, times, strict=True)]
        print(f"{'capture':<26} {'code':<30} {'load (s)':>9} {'summary (s)':>12}")
        for name, _ in captures:
            for label, _ in codes:
                load_s, summary_s = best[(label, name)]
                print(f"{name:<26} {label:<30} {load_s:>9.3f} {summary_s:>12.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
