"""The decoder on events laid out to be slow (issue 37, item 1): both paths, at n
and 10n events, the CPU time ratio.

Three layouts, each a copy of fixtures/keras_train's host plane whose lines
hold only such events (built with tests/fuzz/wire_mutants.py's encoder):

- ``markers``: every op event carries a stat that opens like a step marker
  (``0x08 <step_num id>``) but holds text: the numpy path confirms each one by
  reading its stats;
- ``fields``: every event has its duration after 40 unknown fields, and its
  metadata id twice: the numpy path reads every field of every event;
- ``long``: one event per line with 20,000 one-byte-value fields: the numpy
  path's step per field gives way to reading the event in Python.

    python benchmarks/bench_decode_adversarial.py [--events 20000 200000]

Wants: time(10n) / time(n) <= 12 for each layout and path.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from fuzz.wire_mutants import LEN, VARINT, Field, encode, parse  # noqa: E402

from traceparse._proto import xplane_pb2  # noqa: E402
from traceparse.decode import native  # noqa: E402
from traceparse.decode.xspace import decode_xspace  # noqa: E402

TEMPLATE = next((HERE.parent / "fixtures" / "keras_train").rglob("*.xplane.pb")).read_bytes()


def _event(kind: str, op_id: int, step_stat: int, i: int) -> bytes:
    if kind == "markers":
        stat = encode([Field(1, VARINT, step_stat), Field(5, LEN, b"not a step")])
        fields = [Field(1, VARINT, op_id), Field(2, VARINT, i), Field(3, VARINT, 7)]
        return encode([*fields, Field(4, LEN, stat)])
    if kind == "fields":
        unknown = [Field(15, VARINT, k) for k in range(40)]
        head = [Field(1, VARINT, 1), Field(2, VARINT, i)]
        return encode([*head, *unknown, Field(3, VARINT, 5), Field(1, VARINT, op_id)])
    return encode([Field(1, VARINT, op_id), *(Field(15, VARINT, 1) for _ in range(20_000))])


def capture(kind: str, events: int) -> bytes:
    """keras_train with its host lines holding ``events`` events of ``kind``."""
    space = xplane_pb2.XSpace.FromString(TEMPLATE)
    top = parse(TEMPLATE)
    planes = iter(space.planes)
    for f in top:
        if f.number != 1 or f.wire != LEN:
            continue
        plane = next(planes)
        if not plane.name.startswith("/host:"):
            continue
        op_id = next(k for k, m in plane.event_metadata.items() if ":" in m.name)
        step = [k for k, m in plane.stat_metadata.items() if m.name == "step_num"] or [1]
        assert isinstance(f.value, bytes)
        fields = parse(f.value)
        lines = [g for g in fields if g.number == 3 and g.wire == LEN]
        per_event = 1 if kind != "long" else 20_000
        count = max(1, events // per_event)
        for k, line in enumerate(lines):
            share = count // len(lines) + (k < count % len(lines))
            body = [Field(4, LEN, _event(kind, op_id, step[0], i)) for i in range(share)]
            assert isinstance(line.value, bytes)
            kept = [g for g in parse(line.value) if g.number != 4]
            line.value = encode(kept + body)
        f.value = encode(fields)
    return encode(top)


def cpu(data: bytes, on: bool, turns: int = 3) -> float:
    best = float("inf")
    with native.use_native(on):
        for _ in range(turns):
            start = time.process_time()
            decode_xspace(data, path="adversarial.xplane.pb", host="h")
            best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs=2, default=[20_000, 200_000])
    args = parser.parse_args(argv)
    small, large = args.events
    paths = [True, False] if native.available() else [False]
    for kind in ("markers", "fields", "long"):
        data = {n: capture(kind, n) for n in (small, large)}
        for on in paths:
            times = {n: cpu(data[n], on) for n in (small, large)}
            ratio = times[large] / max(times[small], 1e-6)
            print(
                f"{kind:8s} {'compiled' if on else 'numpy':8s} "
                f"{len(data[small]) / 1e6:6.1f} MB {times[small]:.3f} s, "
                f"{len(data[large]) / 1e6:6.1f} MB {times[large]:.3f} s: {ratio:.1f}x",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
