"""A large capture is read into a private mapping whose pages the decoder gives
back as it passes them (``files.discover.read_buffer``, ``xspace._give_back``):
what it gives back reads as zeros afterwards, so any read of it after that
would change the tables. Every fixture decodes from a mapping, in batches small
enough that pages go back between them, to the same trace as from bytes."""

from __future__ import annotations

import mmap
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.decode import native, xspace
from traceparse.decode.trace import MemoryTrace
from traceparse.files import discover

CAPTURES = sorted(
    p for p in FIXTURES.rglob("*.xplane.pb") if p.parts[-5] not in ("corrupt", "not_a_capture")
)


def mapped(data: bytes) -> mmap.mmap:
    buffer = mmap.mmap(-1, len(data), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buffer[:] = data
    return buffer


def same_trace(a: MemoryTrace, b: MemoryTrace) -> None:
    for name in ("events", "step_markers", "op_time", "function_runs"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)
    for name in ("op_types", "diagnostics", "stat_names", "start_ns", "duration_ps"):
        assert getattr(a, name) == getattr(b, name), name
    if a.runs is not None and b.runs is not None:
        pd.testing.assert_frame_equal(a.runs.allocation_runs, b.runs.allocation_runs)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.parts[-5])
def test_a_mapped_capture_decodes_as_bytes_do_with_pages_given_back(
    path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = path.read_bytes()
    # 16 events a batch: pages go back between batches, not only at the end.
    monkeypatch.setattr(xspace, "events_per_batch", lambda size: 16)
    with native.use_native(compiled):
        expected = xspace.decode_xspace(data, path=str(path), host="h")
        buffer = mapped(data)
        decoder = xspace._Decoder(buffer, xspace.split_planes(buffer), str(path), "h")
        found = decoder.run()
    same_trace(found, expected)
    if len(found.events) > 64:  # pages went back (the memory events span several)
        assert decoder.given_back > 0
        assert buffer[: decoder.given_back] == bytes(decoder.given_back)


def test_bytes_are_never_given_back() -> None:
    data = next(iter(CAPTURES)).read_bytes()
    decoder = xspace._Decoder(data, xspace.split_planes(data), "x", "h")
    decoder.run()
    assert decoder.given_back == 0


def test_only_large_local_captures_are_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = FIXTURES / "keras_train"
    capture = discover.find_captures(source)[0]
    size = Path(capture.path).stat().st_size
    assert isinstance(discover.read_buffer(capture), bytes)  # under RELEASABLE_BYTES
    monkeypatch.setattr(discover, "RELEASABLE_BYTES", size)
    buffer = discover.read_buffer(capture)
    assert isinstance(buffer, mmap.mmap)
    assert buffer[:] == Path(capture.path).read_bytes()
    assert isinstance(discover.read_bytes(capture), bytes)  # asked for bytes: bytes
    # The whole load through a mapping gives the tables a load through bytes gives.
    mapped_profile = traceparse.load(source)
    monkeypatch.setattr(discover, "RELEASABLE_BYTES", size + 1)
    plain = traceparse.load(source)
    pd.testing.assert_frame_equal(mapped_profile.allocations, plain.allocations)
    pd.testing.assert_frame_equal(mapped_profile.timeline, plain.timeline)


def test_a_file_that_changes_size_while_read_comes_back_as_a_plain_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "growing.xplane.pb"
    path.write_bytes(bytes(range(256)) * 64)
    with path.open("rb") as handle:  # as if it had 10 bytes fewer when looked at
        grown = discover._read_mapped(handle, len(path.read_bytes()) - 10)
    assert grown == path.read_bytes()[:-9]  # the size it had and one byte more
    with path.open("rb") as handle:
        whole = discover._read_mapped(handle, len(path.read_bytes()))
    assert isinstance(whole, mmap.mmap)
