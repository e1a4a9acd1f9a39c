"""A long JAX capture: a real one's steps repeated, as a training job runs one jitted
step many times.

Every line of every plane of a JAX fixture (``fixtures/jax08_*``) is written
``times`` times, each copy shifted by the capture's span, so the copies follow
each other like the steps of a long run: the same programs, the same run
windows and allocations, the same addresses (each copy frees what it
allocated), the flows (``_p``/``_c``) renumbered per copy as a longer capture
numbers them. The ``/host:metadata`` plane (the programs) is kept once. Written
with traceparse's own protos, no JAX.

    python benchmarks/make_long_jax.py --times 8 --out /tmp/long_jax
"""

from __future__ import annotations

import argparse
from pathlib import Path

from traceparse._proto import xplane_pb2

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_FLOWS = ("_p", "_c")
_FLOW_STEP = 1 << 40  # flow ids of one copy never meet another's


def _span_ps(space: xplane_pb2.XSpace) -> int:
    """From the first event's start to the last one's end, over every line."""
    first, last = None, None
    for plane in space.planes:
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            for event in line.events:
                start = base + event.offset_ps
                end = start + event.duration_ps
                first = start if first is None else min(first, start)
                last = end if last is None else max(last, end)
    return 0 if first is None or last is None else last - first


def repeat(source: Path, times: int) -> bytes:
    """The capture at ``source`` (an ``.xplane.pb``) with its events ``times`` over."""
    space = xplane_pb2.XSpace()
    space.ParseFromString(source.read_bytes())
    shift = _span_ps(space) + 1_000_000  # a microsecond between copies
    for plane in space.planes:
        flows = {k for k, m in plane.stat_metadata.items() if m.name in _FLOWS}
        for line in plane.lines:
            original = list(line.events)
            for copy in range(1, times):
                for event in original:
                    added = line.events.add()
                    added.CopyFrom(event)
                    added.offset_ps = event.offset_ps + copy * shift
                    for stat in added.stats:
                        if stat.metadata_id in flows and stat.WhichOneof("value") == "uint64_value":
                            stat.uint64_value += copy * _FLOW_STEP
                        elif (
                            stat.metadata_id in flows and stat.WhichOneof("value") == "int64_value"
                        ):
                            stat.int64_value += copy * _FLOW_STEP
    return space.SerializeToString()


def write_capture(out: Path, times: int, fixture: str = "jax08_attention") -> Path:
    """A capture directory under ``out`` holding ``fixture`` repeated ``times``."""
    source = next((FIXTURES / fixture).rglob("*.xplane.pb"))
    run = out / f"{fixture}_x{times}" / "plugins" / "profile" / "run1"
    run.mkdir(parents=True, exist_ok=True)
    (run / source.name).write_bytes(repeat(source, times))
    return out / f"{fixture}_x{times}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=8)
    parser.add_argument("--fixture", default="jax08_attention")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/.captures"))
    args = parser.parse_args()
    print(write_capture(args.out, args.times, args.fixture))


if __name__ == "__main__":
    main()
