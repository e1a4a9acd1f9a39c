"""Hand-built XSpace captures: SpaceBuilder and its alloc/free events."""

from __future__ import annotations

from fuzz.mutations import STAT_NAMES

import traceparse
from traceparse._proto import xplane_pb2
from traceparse.decode.xspace import decode_xspace

START_NS = 1_795_961_080_992_152_166


NAMES = STAT_NAMES


class SpaceBuilder:
    """Builds an XSpace the way TensorFlow lays one out, with knobs for oddities."""

    def __init__(self) -> None:
        self.space = xplane_pb2.XSpace()
        env = self.space.planes.add(name="Task Environment")
        env.stat_metadata[1].id, env.stat_metadata[1].name = 1, "profile_start_time"
        env.stat_metadata[2].id, env.stat_metadata[2].name = 2, "profile_stop_time"
        env.stats.add(metadata_id=1, uint64_value=START_NS)
        env.stats.add(metadata_id=2, uint64_value=START_NS + 10**9)
        self.plane = self.space.planes.add(id=1, name="/host:CPU")
        for i, name in enumerate(
            ["MemoryAllocation", "MemoryDeallocation", "train", "dense/MatMul:MatMul"], 1
        ):
            self.plane.event_metadata[i].id, self.plane.event_metadata[i].name = i, name
        for i, name in enumerate(NAMES, 1):
            self.plane.stat_metadata[i].id, self.plane.stat_metadata[i].name = i, name
        # Interned strings for ref_value stats live in stat_metadata too.
        self.refs: dict[str, int] = {}
        self.lines: list[xplane_pb2.XLine] = []

    def stat_id(self, name: str) -> int:
        return NAMES.index(name) + 1

    def ref(self, text: str) -> int:
        if text not in self.refs:
            key = 1000 + len(self.refs)
            self.plane.stat_metadata[key].id, self.plane.stat_metadata[key].name = key, text
            self.refs[text] = key
        return self.refs[text]

    def line(self, timestamp_ns: int = 4967) -> xplane_pb2.XLine:
        line = self.plane.lines.add(id=len(self.plane.lines), timestamp_ns=timestamp_ns)
        self.lines.append(line)
        return line

    def event(
        self, line: xplane_pb2.XLine, metadata_id: int, offset_ps: int, **stats: object
    ) -> xplane_pb2.XEvent:
        event = line.events.add(metadata_id=metadata_id, offset_ps=offset_ps)
        for name, value in stats.items():
            stat = event.stats.add(metadata_id=self.stat_id(name))
            if isinstance(value, float):
                stat.double_value = value
            elif isinstance(value, str):
                if name in ("tf_op", "shape"):
                    stat.str_value = value
                else:
                    stat.ref_value = self.ref(value)
            elif isinstance(value, int) and value < 0:
                stat.int64_value = value
            else:
                stat.uint64_value = int(value)  # type: ignore[call-overload]
        return event

    def decode(self) -> traceparse.Profile:
        trace = decode_xspace(self.space.SerializeToString(), path="test.xplane.pb", host="h")
        return traceparse.Profile([trace])


def alloc(
    b: SpaceBuilder,
    line: xplane_pb2.XLine,
    t: int,
    addr: int,
    size: int,
    total: int,
    **extra: object,
) -> None:
    _memory_event(b, line, 1, t, addr, size, total, **extra)


def free(b: SpaceBuilder, line: xplane_pb2.XLine, t: int, addr: int, size: int, total: int) -> None:
    _memory_event(b, line, 2, t, addr, size, total)


def _memory_event(
    b: SpaceBuilder,
    line: xplane_pb2.XLine,
    metadata_id: int,  # 1: MemoryAllocation, 2: MemoryDeallocation
    t: int,
    addr: int,
    size: int,
    total: int,
    **extra: object,
) -> None:
    b.event(
        line,
        metadata_id,
        t,
        allocator_name="GPU_0_bfc",
        addr=addr,
        requested_bytes=size,
        allocation_bytes=size,
        bytes_allocated=total,
        bytes_reserved=0,
        bytes_available=10**9,
        **extra,
    )
