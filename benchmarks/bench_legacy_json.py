"""Reading legacy ``memory_profile.json.gz`` (issue 37, item 5): CPU time and peak
memory against the JSON's size, at n MB and 10n MB.

The JSON is the fixture's (fixtures/legacy) with its snapshots repeated, each
copy at its own times and addresses, until it is the size asked for: what
xprof writes for a long capture. Each size is read in a fresh process
(``decode_memory_profile``), which reports its CPU seconds and the peak RSS
it added over its imports. ``--json-format`` also times protobuf's
``json_format.Parse`` on the same text, the reader used before (42 s and 1 GB
for 50 MB).

    python benchmarks/bench_legacy_json.py [--mb 5 50] [--json-format]

Wants: 50 MB within 10 s CPU and 1 GB; time(10n) / time(n) <= 12.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = next((HERE.parent / "fixtures" / "legacy").rglob("*.memory_profile.json.gz"))

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from google.protobuf import json_format
from traceparse._proto import memory_profile_pb2
from traceparse.decode.memory_profile import decode_memory_profile
data = Path(sys.argv[1]).read_bytes()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.process_time()
if sys.argv[2] == "json_format":
    json_format.Parse(data.decode(), memory_profile_pb2.MemoryProfile(), ignore_unknown_fields=True)
    rows = None
else:
    rows = len(decode_memory_profile(data, path=sys.argv[1], host="h", binary=False).events)
seconds = time.process_time() - start
added = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps({"seconds": seconds, "added_bytes": added, "rows": rows}))
"""


def legacy_json(size_bytes: int) -> bytes:
    """A memory_profile JSON of about ``size_bytes``: the fixture's snapshots
    repeated, each copy shifted in time and address."""
    doc = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    per = doc["memoryProfilePerAllocator"]
    name = next(iter(per))
    snapshots = per[name]["memoryProfileSnapshots"]
    one = len(json.dumps(snapshots))
    copies = max(1, size_bytes // one)
    grown = []
    span = 10**12
    for k in range(copies):
        for s in snapshots:
            t = dict(s)
            t["timeOffsetPs"] = str(int(s["timeOffsetPs"]) + k * span)
            meta = dict(s["activityMetadata"])
            meta["address"] = str(int(meta["address"]) + k * 2**20)
            t["activityMetadata"] = meta
            grown.append(t)
    per[name]["memoryProfileSnapshots"] = grown
    return json.dumps(doc, separators=(",", ":")).encode()


def measure(path: Path, how: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), how], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs=2, default=[5.0, 50.0])
    parser.add_argument("--json-format", action="store_true")
    args = parser.parse_args(argv)
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mb in args.mb:
            path = Path(tmp) / f"{mb}.json"
            path.write_bytes(legacy_json(int(mb * 1e6)))
            size = path.stat().st_size / 1e6
            got = measure(path, "ours")
            found[mb] = got
            print(
                f"{size:.1f} MB of JSON: {got['seconds']:.2f} s CPU, "
                f"{got['added_bytes'] / 2**20:.0f} MiB added peak RSS, {got['rows']:,} events",
                flush=True,
            )
            if args.json_format:
                old = measure(path, "json_format")
                print(
                    f"  json_format.Parse: {old['seconds']:.2f} s CPU, "
                    f"{old['added_bytes'] / 2**20:.0f} MiB",
                    flush=True,
                )
    small, large = args.mb
    ratio = found[large]["seconds"] / max(found[small]["seconds"], 1e-6)
    print(f"time ratio for {large / small:.0f}x the JSON: {ratio:.1f}x (want <= 12)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
