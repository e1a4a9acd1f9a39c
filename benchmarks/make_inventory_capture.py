"""A capture whose N allocations all have one shape, with an inventory of N variables
of that shape: the worst case for matching variables to allocations.

Each allocation on ``GPU_0_bfc`` is a float32 ``[512,256]`` tensor that lives to
the end of the capture; every other one is made by a variable's initializer
(``layer_i/kernel/Initializer/random_uniform``), the rest by other ops
(``layer_i/MatMul``). The inventory (``localhost.variables.json``, as
``traceparse.profile`` writes it) lists N weights ``layer_i/kernel`` of that
shape, made during the capture. Written with traceparse's own protos.

    python benchmarks/make_inventory_capture.py --n 10000 --out /tmp/inventory
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from traceparse._proto import xplane_pb2

START_NS = 1_795_961_080_992_152_166
SHAPE = [512, 256]
SIZE = 512 * 256 * 4
_STATS = [
    "allocator_name",
    "addr",
    "requested_bytes",
    "allocation_bytes",
    "bytes_allocated",
    "bytes_reserved",
    "bytes_available",
    "peak_bytes_in_use",
    "tf_op",
    "shape",
    "data_type",
    "region_type",
    "GPU_0_bfc",
    "output",
]


def _space(n: int) -> bytes:
    space = xplane_pb2.XSpace()
    env = space.planes.add(name="Task Environment")
    for key, name in ((1, "profile_start_time"), (2, "profile_stop_time")):
        env.stat_metadata[key].id, env.stat_metadata[key].name = key, name
    env.stats.add(metadata_id=1, uint64_value=START_NS)
    env.stats.add(metadata_id=2, uint64_value=START_NS + 10**9)
    plane = space.planes.add(id=1, name="/host:CPU")
    plane.event_metadata[1].id, plane.event_metadata[1].name = 1, "MemoryAllocation"
    ids = {name: k for k, name in enumerate(_STATS, 1)}
    for name, key in ids.items():
        plane.stat_metadata[key].id, plane.stat_metadata[key].name = key, name
    line = plane.lines.add(id=1, timestamp_ns=1000)
    shape = "[" + ",".join(map(str, SHAPE)) + "]"
    for i in range(n):
        op = f"layer_{i}/kernel/Initializer/random_uniform" if i % 2 else f"layer_{i}/MatMul"
        event = line.events.add(metadata_id=1, offset_ps=1_000_000 * (i + 1))
        total = SIZE * (i + 1)
        for name, value in (
            ("addr", 0x10000000 + i * SIZE),
            ("requested_bytes", SIZE),
            ("allocation_bytes", SIZE),
            ("bytes_allocated", total),
            ("bytes_reserved", 0),
            ("bytes_available", 1 << 40),
            ("peak_bytes_in_use", total),
            ("data_type", 1),
        ):
            event.stats.add(metadata_id=ids[name], uint64_value=value)
        event.stats.add(metadata_id=ids["allocator_name"], ref_value=ids["GPU_0_bfc"])
        event.stats.add(metadata_id=ids["region_type"], ref_value=ids["output"])
        event.stats.add(metadata_id=ids["tf_op"], str_value=op)
        event.stats.add(metadata_id=ids["shape"], str_value=shape)
    return space.SerializeToString()


def _inventory(n: int) -> str:
    variables = [
        {
            "name": "kernel",
            "path": f"layer_{i}/kernel",
            "shape": SHAPE,
            "dtype": "float32",
            "device": "/job:localhost/replica:0/task:0/device:GPU:0",
            "estimated_bytes": SIZE,
            "role": "weight",
            "belongs_to": None,
            "layer": f"layer_{i}",
            "model": "wide",
            "at_start": False,
            "at_stop": True,
        }
        for i in range(n)
    ]
    return json.dumps({"format": "traceparse.variables", "version": 1, "variables": variables})


def write_capture(out: Path, n: int, inventory: bool = True) -> Path:
    """A logdir under ``out`` with the capture of ``n`` allocations (and its inventory)."""
    root = out / f"inventory_{n}_{'with' if inventory else 'without'}"
    run = root / "plugins" / "profile" / "run1"
    run.mkdir(parents=True, exist_ok=True)
    (run / "localhost.xplane.pb").write_bytes(_space(n))
    if inventory:
        (run / "localhost.variables.json").write_text(_inventory(n))
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/.captures"))
    args = parser.parse_args()
    print(write_capture(args.out, args.n))
    print(write_capture(args.out, args.n, inventory=False))


if __name__ == "__main__":
    main()
