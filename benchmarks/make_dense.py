"""Synthetic memory-dense captures: N allocator events in a real capture's layout.

Long GPU runs record millions of MemoryAllocation/MemoryDeallocation events.
This writes such an ``.xplane.pb`` without TensorFlow: the planes, lines and
metadata are those of ``fixtures/keras_train`` (read with traceparse's own
protos), the lines' events are replaced by N allocator events laid out as
TensorFlow writes them (the same stats in the same order, refs for strings).

The events are encoded with numpy, a chunk at a time: every field of every
event becomes a varint column, and the columns are interleaved by a mask, so
writing 10M events (1.2 GB)
takes about a minute and under 400 MB.

The simulated allocator: allocation i uses op ``op_of[i]`` (a few thousand
distinct op names, each with its own shape and size: a training step at batch
56, ``_layers``, so that ``report`` and ``predict`` read the batch off it) and is freed L_i
allocations later (mostly soon, some late, a few never within the capture);
addresses are slots reused once freed. Counters (bytes_allocated,
peak_bytes_in_use) are the running sums of the events themselves, so a
decoded capture can be checked against them (``expected``).

    python benchmarks/make_dense.py --events 1000000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TEMPLATE = ROOT / "fixtures" / "keras_train"
CAPTURES = HERE / ".captures"

# Stat metadata ids of the template's /host:CPU plane (fixtures/keras_train).
_ALLOCATOR, _RESERVED, _ALLOCATED, _AVAILABLE, _FRAGMENTATION = 18, 20, 21, 22, 23
_PEAK, _REQUESTED, _ALLOCATION, _ADDR, _TF_OP, _STEP_ID = 24, 25, 26, 27, 28, 29
_REGION, _DATA_TYPE, _SHAPE = 30, 32, 33
_ALLOCATOR_NAME = 19  # "mklcpu"
_REGION_OUTPUT = 31  # "output"
_EVENTS_PER_CHUNK = 1 << 16
_BASE_ADDRESS = 0x7F00_0000_0000
_ALIGN = 1 << 8
_SLOTS = 1 << 17  # addresses are reused after this many allocations
_TOTAL_BYTES = 80 * 2**30  # what the allocator has: bytes_available = this - in use
_STEPS = 1000  # distinct step ids (executions)
BATCH = 56  # the batch size the synthetic step runs at
_OP_TYPES = ("Conv2D", "MatMul", "AddV2", "Relu", "FusedBatchNormV3", "Mul", "Cast", "Sum")


@dataclass
class Plan:
    """The simulated events, in time order: per event its allocation and kind."""

    alloc_of: np.ndarray  # int64: the allocation an event belongs to
    is_free: np.ndarray  # bool
    op_of: np.ndarray  # int32 per allocation: its op (index into op names)
    size_of_op: np.ndarray  # int64 per op: requested bytes
    shape_of_op: np.ndarray  # int64 per op: index into shapes
    step_of_alloc: np.ndarray  # int64 per allocation: its step id
    op_names: list[str]
    op_types: list[str]
    shapes: list[str]
    # int64 per allocation, to replace the reused slots (benchmarks/bench_pairing.py).
    address_of_alloc: np.ndarray | None = None


def _layers(rng: np.random.Generator, ops: int) -> tuple[list[str], list[str], list[str]]:
    """Per op its name, type and shape, in the order a training step runs them: the
    iterator's input and label tensors, a forward pass of batch-led activations
    (with per-channel vectors and ``Tensordot``-style flattens of the activation
    before), then the gradients of the forward tensors in reverse order.

    This is the evidence a real step carries for its batch (``find_batch``): the
    step's inputs as ``IteratorGetNext`` outputs led by the batch, activations
    [N, h, c] beside their gradients [N, h, c] (backprop keeps the shape of what
    it differentiates, under ``gradient_tape/``), and flattens [N*h, c] whose
    elements per example (h*c) are those of the activation they reshape
    (``tf.tensordot`` reshapes [N, h, c] to [N*h, c] before its matmul)."""
    names = ["IteratorGetNext", "IteratorGetNext"]
    types = ["IteratorGetNext", "IteratorGetNext"]
    shapes = [f"[{BATCH},64,64,3]", f"[{BATCH}]"]  # images, labels
    forward = (ops - 2) // 2
    # Powers of two: no dimension here is a multiple of the batch (56 = 7 x 8) by chance.
    h = 2 ** rng.integers(5, 9, forward)  # 32 .. 256
    c = 2 ** rng.integers(6, 10, forward)  # 64 .. 512
    for j in range(forward):
        name = f"model/block_{j // 40}/layer_{j % 40}/op_{j}"
        if j % 10 == 9:  # the previous activation, flattened
            names.append(f"{name}/Tensordot/Reshape")
            types.append("Reshape")
            shapes.append(f"[{BATCH * int(h[j - 1])},{int(c[j - 1])}]")
            h[j], c[j] = h[j - 1], c[j - 1]
        elif j % 10 == 4:  # a per-channel vector: does not grow with the batch
            names.append(name)
            types.append("FusedBatchNormV3")
            shapes.append(f"[{int(c[j])}]")
        else:
            names.append(name)
            types.append(_OP_TYPES[j % len(_OP_TYPES)])
            shapes.append(f"[{BATCH},{int(h[j])},{int(c[j])}]")
    for j in range(ops - 2 - forward):
        k = forward - 1 - j % forward
        names.append(f"gradient_tape/{names[2 + k]}")
        types.append(f"{types[2 + k]}Grad")
        shapes.append(shapes[2 + k])
    return names, types, shapes


def _elements(shape: str) -> int:
    return int(np.prod([int(d) for d in shape.strip("[]").split(",")], dtype=np.int64))


def plan(events: int, seed: int = 0) -> Plan:
    """``events`` allocator events: allocations and their frees, interleaved."""
    rng = np.random.default_rng(seed)
    allocs = events // 2 + events // 16 + 16
    ops = int(min(4000, max(16, events // 50)))
    op_names, op_types, shapes = _layers(rng, ops)
    size_of_op = np.array([_elements(s) for s in shapes], dtype=np.int64) * 4  # float32
    # Ops run in a repeating order (a step); allocation i runs op i mod ops, give or take.
    op_of = ((np.arange(allocs) + rng.integers(0, 3, allocs)) % ops).astype(np.int32)
    # Lifetimes in allocations: most tensors die soon, some live long, a few never die.
    life = rng.geometric(0.2, allocs).astype(np.int64)
    late = rng.random(allocs) < 0.02
    life[late] = rng.integers(50, _SLOTS // 2, int(late.sum()))
    alloc_key = np.arange(allocs, dtype=np.int64) * 2
    free_key = alloc_key + 2 * life + 1
    keys = np.concatenate([alloc_key, free_key])
    del alloc_key, free_key, life
    order = np.argsort(keys, kind="stable")[:events]
    del keys
    step_of_alloc = rng.integers(-(2**62), 2**62, _STEPS)[np.arange(allocs) * _STEPS // allocs]
    return Plan(
        alloc_of=np.where(order >= allocs, order - allocs, order),
        is_free=order >= allocs,
        op_of=op_of,
        size_of_op=size_of_op,
        shape_of_op=np.arange(ops, dtype=np.int64),
        step_of_alloc=step_of_alloc,
        op_names=op_names,
        op_types=op_types,
        shapes=shapes,
    )


def varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value (as uint64) in protobuf's varint encoding: (n x the longest one's
    bytes, lengths). Narrow columns keep the interleaving cheap."""
    v = np.asarray(values).astype(np.uint64, copy=False)
    length = np.ones(v.size, dtype=np.int64)
    for k in range(1, 10):
        longer = v >= np.uint64(1 << (7 * k))
        if not longer.any():
            break
        length += longer
    width = int(length.max()) if v.size else 1
    out = np.empty((v.size, width), dtype=np.uint8)
    for k in range(width):
        byte = (v >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (k < length - 1).astype(np.uint64) << np.uint64(7)
        out[:, k] = (byte | more).astype(np.uint8)
    return out, length


class _Pieces:
    """An event's bytes as columns of pieces, each up to ``w`` bytes wide."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []

    def byte(self, value: int, present: np.ndarray | None = None) -> None:
        column = np.full((self.n, 1), value, dtype=np.uint8)
        self.parts.append((column, _lengths(self.n, 1, present)))

    def varint(self, values: np.ndarray, present: np.ndarray | None = None) -> None:
        column, length = varints(values)
        self.parts.append((column, length if present is None else np.where(present, length, 0)))

    def fixed64(self, values: np.ndarray, present: np.ndarray | None = None) -> None:
        column = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(self.n, 8)
        self.parts.append((column, _lengths(self.n, 8, present)))

    def total(self) -> np.ndarray:
        return np.sum([length for _, length in self.parts], axis=0)

    def stat(self, stat_id: int, tag: int, values: np.ndarray, present: np.ndarray | None) -> None:
        """``0x22 <length> 0x08 <stat id> <tag> <value>`` (a stat is under 128 bytes)."""
        value = _Pieces(self.n)
        if tag == 0x11:
            value.fixed64(values, present)
        else:
            value.varint(values, present)
        # Ids and lengths are under 128 here: the head is five plain bytes.
        assert stat_id < 128
        head = np.empty((self.n, 5), dtype=np.uint8)
        head[:, 0], head[:, 2], head[:, 3], head[:, 4] = 0x22, 0x08, stat_id, tag
        head[:, 1] = 3 + value.total()
        self.parts.append((head, _lengths(self.n, 5, present)))
        self.parts.extend(value.parts)

    def joined(self) -> np.ndarray:
        """The pieces' bytes, event after event."""
        table = np.concatenate([column for column, _ in self.parts], axis=1)
        mask = np.concatenate(
            [np.arange(c.shape[1]) < length[:, None] for c, length in self.parts], axis=1
        )
        return table[mask]


def _lengths(n: int, width: int, present: np.ndarray | None) -> np.ndarray:
    return np.full(n, width, dtype=np.int64) if present is None else np.where(present, width, 0)


def encode_events(columns: dict[str, np.ndarray], ids: dict[str, int]) -> np.ndarray:
    """The ``0x22 <length> <XEvent>`` bytes of a run of events, in order."""
    n = len(columns["offset_ps"])
    alloc = ~columns["is_free"]
    body = _Pieces(n)
    body.byte(0x08)
    body.varint(np.where(alloc, ids["alloc"], ids["free"]))
    body.byte(0x10)
    body.varint(columns["offset_ps"])
    ref, i64, dbl = 0x38, 0x20, 0x11
    body.stat(_ALLOCATOR, ref, np.full(n, _ALLOCATOR_NAME), None)
    body.stat(_RESERVED, i64, np.zeros(n, np.int64), None)
    body.stat(_ALLOCATED, i64, columns["bytes_allocated"], None)
    body.stat(_AVAILABLE, i64, _TOTAL_BYTES - columns["bytes_allocated"], None)
    body.stat(_FRAGMENTATION, dbl, columns["fragmentation"], None)
    body.stat(_PEAK, i64, columns["peak_bytes_in_use"], None)
    body.stat(_REQUESTED, i64, columns["requested_bytes"], None)
    body.stat(_ALLOCATION, i64, columns["allocation_bytes"], None)
    body.stat(_ADDR, i64, columns["address"], None)
    body.stat(_TF_OP, ref, columns["op_ref"], alloc)
    body.stat(_STEP_ID, i64, np.where(alloc, columns["step_id"], 0), None)
    body.stat(_REGION, ref, np.full(n, _REGION_OUTPUT), alloc)
    body.stat(_DATA_TYPE, i64, np.where(alloc, 1, 0), None)  # DT_FLOAT
    body.stat(_SHAPE, ref, columns["shape_ref"], alloc)
    head = _Pieces(n)
    head.byte(0x22)
    head.varint(body.total())
    head.parts.extend(body.parts)
    return head.joined()


def build_template(p: Plan) -> tuple[Any, dict[str, int], dict[str, int]]:
    """The template XSpace with its host plane's events removed and the ops and
    shapes added to its metadata; the memory event ids; the first ref ids."""
    from traceparse._proto import xplane_pb2

    path = next(TEMPLATE.rglob("*.xplane.pb"))
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    host = next(plane for plane in space.planes if plane.name.startswith("/host:"))
    names = {m.name: k for k, m in host.event_metadata.items()}
    stat_names = {k: m.name for k, m in host.stat_metadata.items()}
    expected = {_ALLOCATOR: "allocator_name", _TF_OP: "tf_op", _SHAPE: "shape", _ADDR: "addr"}
    if any(stat_names.get(k) != v for k, v in expected.items()):
        raise SystemExit(f"{path}: its stat metadata is not the layout this script knows")
    for line in host.lines:
        del line.events[:]
    ids = {"alloc": names["MemoryAllocation"], "free": names["MemoryDeallocation"]}
    # Ops and shapes: stat metadata the refs point to; "op:type" event metadata
    # (what names each op's type).
    first_stat = max(host.stat_metadata) + 1
    for i, name in enumerate(p.op_names):
        host.stat_metadata[first_stat + i].id = first_stat + i
        host.stat_metadata[first_stat + i].name = name
    first_shape = first_stat + len(p.op_names)
    for i, shape in enumerate(p.shapes):
        host.stat_metadata[first_shape + i].id = first_shape + i
        host.stat_metadata[first_shape + i].name = shape
    first_event = max(host.event_metadata) + 1
    for i, (name, kind) in enumerate(zip(p.op_names, p.op_types, strict=True)):
        host.event_metadata[first_event + i].id = first_event + i
        host.event_metadata[first_event + i].name = f"{name}:{kind}"
    return space, ids, {"op": first_stat, "shape": first_shape}


def chunk_columns(p: Plan, lo: int, hi: int, carry: dict[str, int]) -> dict[str, np.ndarray]:
    """The stat values of events lo..hi; ``carry`` holds the running counters."""
    rng = np.random.default_rng(lo)
    alloc = p.alloc_of[lo:hi]
    is_free = p.is_free[lo:hi]
    op = p.op_of[alloc]
    requested = p.size_of_op[op]
    allocated = (requested + _ALIGN - 1) // _ALIGN * _ALIGN
    in_use = carry["in_use"] + np.cumsum(np.where(is_free, -allocated, allocated))
    peak = np.maximum.accumulate(np.maximum(in_use, carry["peak"]))
    time_ps = carry["time_ps"] + np.cumsum(rng.integers(1_000, 200_000, hi - lo))
    carry.update(in_use=int(in_use[-1]), peak=int(peak[-1]), time_ps=int(time_ps[-1]))
    return {
        "is_free": is_free,
        "time_ps": time_ps,
        "bytes_allocated": in_use,
        "peak_bytes_in_use": peak,
        "fragmentation": rng.random(hi - lo).round(4),
        "requested_bytes": requested,
        "allocation_bytes": allocated,
        "address": _BASE_ADDRESS + (alloc % _SLOTS) * (1 << 20)
        if p.address_of_alloc is None
        else p.address_of_alloc[alloc],
        "op_ref": op.astype(np.int64),
        "shape_ref": p.shape_of_op[op],
        "step_id": p.step_of_alloc[alloc],
    }


def write_capture(
    events: int, out: Path, seed: int = 0, addresses: Callable[[int], np.ndarray] | None = None
) -> dict[str, int]:
    """Write the capture; return what decoding it must find (``expected``).
    ``addresses(n)``, when given, is the address of each of the n allocations."""
    p = plan(events, seed)
    if addresses is not None:
        p.address_of_alloc = addresses(len(p.op_of))
    space, ids, first = build_template(p)
    host = next(plane for plane in space.planes if plane.name.startswith("/host:"))
    lines = list(host.lines)
    # Events go to the lines at random, the python thread less often.
    weights = np.array([1.0] + [4.0] * (len(lines) - 1))
    base_ps = (max(line.timestamp_ns for line in lines) + 1_000_000) * 1000
    carry = {"in_use": 0, "peak": 0, "time_ps": base_ps}
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        parts = [open(Path(tmp) / f"line{i}", "wb") for i in range(len(lines))]  # noqa: SIM115
        rng = np.random.default_rng(seed + 1)
        for lo in range(0, events, _EVENTS_PER_CHUNK):
            hi = min(events, lo + _EVENTS_PER_CHUNK)
            columns = chunk_columns(p, lo, hi, carry)
            columns["op_ref"] += first["op"]
            columns["shape_ref"] += first["shape"]
            line_of = rng.choice(len(lines), hi - lo, p=weights / weights.sum())
            for i, line in enumerate(lines):
                rows = np.flatnonzero(line_of == i)
                picked = {k: v[rows] for k, v in columns.items()}
                picked["offset_ps"] = picked.pop("time_ps") - line.timestamp_ns * 1000
                parts[i].write(encode_events(picked, ids).tobytes())
        for f in parts:
            f.close()
        _finish_window(space, carry["time_ps"])
        _assemble(space, host, [Path(f.name) for f in parts], out)
    alloc_count = int(np.count_nonzero(~p.is_free))
    return {
        "events": events,
        "allocations": alloc_count,
        "frees": events - alloc_count,
        "final_in_use": carry["in_use"],
        "peak": carry["peak"],
        # Both iterator outputs are one op (the names are what decoding sees).
        "distinct_ops": len({p.op_names[i] for i in np.unique(p.op_of[p.alloc_of[~p.is_free]])}),
    }


def _finish_window(space: Any, last_ps: int) -> None:
    """Move profile_stop_time past the last event."""
    env = next(plane for plane in space.planes if plane.name == "Task Environment")
    names = {k: m.name for k, m in env.stat_metadata.items()}
    start = next(s for s in env.stats if names[s.metadata_id] == "profile_start_time")
    for stat in env.stats:
        if names[stat.metadata_id] == "profile_stop_time":
            stat.uint64_value = start.uint64_value + last_ps // 1000 + 1_000_000


def _tag_length(field: int, length: int) -> bytes:
    column, size = varints(np.array([length]))
    return bytes([(field << 3) | 2]) + column[0, : size[0]].tobytes()


def _assemble(space: Any, host: Any, parts: list[Path], out: Path) -> None:
    """The file: the host plane as id, name, its lines (header then events), then
    its metadata; the other planes and fields as protobuf writes them."""
    from traceparse._proto import xplane_pb2

    head = xplane_pb2.XPlane(id=host.id, name=host.name)
    tail = xplane_pb2.XPlane()
    tail.CopyFrom(host)
    tail.ClearField("lines")
    tail.ClearField("id")
    tail.ClearField("name")
    line_heads = []
    for line, part in zip(host.lines, parts, strict=True):
        line_bytes = line.SerializeToString()
        line_heads.append((line_bytes, part.stat().st_size))
    lines_size = sum(len(_tag_length(3, len(b) + n)) + len(b) + n for b, n in line_heads)
    head_bytes, tail_bytes = head.SerializeToString(), tail.SerializeToString()
    plane_size = len(head_bytes) + lines_size + len(tail_bytes)
    rest = xplane_pb2.XSpace()
    rest.CopyFrom(space)
    del rest.planes[:]
    tmp = out.with_suffix(".partial")
    with open(tmp, "wb") as f:
        for plane in space.planes:
            if plane is not host and plane.name != host.name:
                data = plane.SerializeToString()
                f.write(_tag_length(1, len(data)) + data)
                continue
            f.write(_tag_length(1, plane_size) + head_bytes)
            for (line_bytes, size), part in zip(line_heads, parts, strict=True):
                f.write(_tag_length(3, len(line_bytes) + size) + line_bytes)
                with open(part, "rb") as src:
                    while block := src.read(1 << 24):
                        f.write(block)
            f.write(tail_bytes)
        f.write(rest.SerializeToString())
    os.replace(tmp, out)


def capture_path(events: int) -> Path:
    return CAPTURES / f"dense_{events}" / "plugins" / "profile" / "run" / "vm.xplane.pb"


def make_dense(events: int) -> tuple[Path, dict[str, int]]:
    """The cached capture of ``events`` events (made if missing) and its expectations."""
    path = capture_path(events)
    expected_path = path.with_name("expected.json")
    if path.exists() and expected_path.exists():
        import json

        return path, json.loads(expected_path.read_text())
    expected = write_capture(events, path)
    import json

    expected_path.write_text(json.dumps(expected))
    return path, expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000])
    args = parser.parse_args()
    for events in args.events:
        start = time.perf_counter()
        path, expected = make_dense(events)
        took = time.perf_counter() - start
        size = path.stat().st_size / 1e6
        print(f"{path}: {size:.1f} MB, {took:.1f} s, {expected}")


if __name__ == "__main__":
    main()
