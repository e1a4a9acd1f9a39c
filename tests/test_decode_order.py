"""A plane whose lines come after its other fields reads the same as one in the usual order.

Serializers write a plane's fields in number order (id, name, lines, then the
metadata maps), and planes.split_planes reads the lines off the wire up to
the first field past them; protobuf allows any order, and a plane merged from
two messages has lines after its metadata. Those lines are found in the rest
of the plane (the branch after ``_merge(meta, view[rest:end])``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from conftest import xplane_files

import traceparse
from traceparse._proto import xplane_pb2


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _lines_last(space: xplane_pb2.XSpace) -> bytes:
    """The XSpace's bytes with each plane's lines written after its metadata maps."""
    out = bytearray()
    for plane in space.planes:
        head = xplane_pb2.XPlane()
        head.CopyFrom(plane)
        head.ClearField("lines")
        body = head.SerializeToString() + xplane_pb2.XPlane(lines=plane.lines).SerializeToString()
        out += b"\x0a" + _varint(len(body)) + body  # XSpace.planes is field 1
    rest = xplane_pb2.XSpace()
    rest.CopyFrom(space)
    rest.ClearField("planes")
    return bytes(out) + rest.SerializeToString()


def test_lines_after_the_metadata_read_the_same(tmp_path: Path) -> None:
    source = xplane_files("keras_train")[0]
    space = xplane_pb2.XSpace.FromString(source.read_bytes())
    odd = _lines_last(space)
    # The bytes differ but protobuf reads the same message from them.
    assert odd != source.read_bytes() and xplane_pb2.XSpace.FromString(odd) == space
    run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "localhost.xplane.pb").write_bytes(odd)
    usual, moved = traceparse.load(source), traceparse.load(run)
    assert len(usual.allocations) > 0
    for name in ("allocations", "timeline", "step_markers"):
        pd.testing.assert_frame_equal(getattr(moved, name), getattr(usual, name), obj=name)
