"""The two decoders give one answer, protobuf's (issue 37, item 1): every fixture
and a seeded corpus of structure-aware mutants (tests/fuzz/wire_mutants.py)
decode to the same tables and run records on the compiled loops and on the
numpy path, or fail the same way; and the inputs that once split them, crafted
here, give upb's numbers on both paths, also through the command under the
bounds of tests/bounded.py."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from bounded import check_bounds, run_bounded
from conftest import FIXTURES
from fuzz import wire_mutants
from fuzz.wire_mutants import LEN, VARINT, Field, encode, parse
from google.protobuf.message import DecodeError
from helpers.differential import decode, differences

from traceparse._proto import xplane_pb2
from traceparse.decode import native
from traceparse.decode.trace import MemoryTrace

built = pytest.mark.skipif(native._native is None, reason="the compiled loops were not built")
CAPTURES = sorted(p for p in FIXTURES.rglob("*.xplane.pb") if "corrupt" not in p.parts)
# The corpus the suite runs: CHUNKS x PER_CHUNK mutants of seed SEED (about 15 ms
# a mutant, both paths); the long run is `python tests/fuzz/wire_mutants.py`.
SEED, CHUNKS, PER_CHUNK = "ci", 6, 250


@built
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_gives_the_same_tables_and_runs_both_ways(path: Path) -> None:
    found, _ = differences(path.read_bytes())
    assert found == []


@cache
def _chunk(
    chunk: int,
) -> tuple[dict[str, int], list[tuple[str, list[str]]], list[tuple[str, list[str]]]]:
    """(outcomes, mutants whose tables differ, mutants whose run records alone differ)."""
    outcomes: dict[str, int] = {}
    differ, runs_only = [], []
    for m in wire_mutants.corpus(SEED, PER_CHUNK, first=chunk * PER_CHUNK):
        found, outcome = differences(m.data)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if found and all(n.startswith("runs") for n in found):
            runs_only.append((m.name, found))
        elif found:
            differ.append((m.name, found))
    return outcomes, differ, runs_only


@built
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_mutants_give_the_same_tables_both_ways(chunk: int) -> None:
    outcomes, differ, _ = _chunk(chunk)
    assert differ == []
    # Both kinds of answer are exercised: captures that load, and that are refused.
    assert outcomes.get("loaded", 0) > PER_CHUNK // 2
    assert outcomes.get("CorruptCaptureError", 0) > PER_CHUNK // 50


@built
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_mutants_give_the_same_run_records_both_ways(chunk: int) -> None:
    """Where only the run records differ (``differences`` names them "runs: ..."):
    a stat that does not parse in a run record's event refuses the capture on
    both paths, and one in any other event is read on neither
    (tests/test_run_records.py crafts both)."""
    _, _, runs_only = _chunk(chunk)
    assert runs_only == []


def test_the_corpus_is_seeded_and_varied() -> None:
    first = wire_mutants.corpus(SEED, 40)
    assert [m.data for m in first] == [m.data for m in wire_mutants.corpus(SEED, 40)]
    edits = {e for m in wire_mutants.corpus(SEED, 300) for e in m.name.split(":")[1].split("+")}
    assert set(wire_mutants.EDITS) <= edits
    assert len({m.data for m in first}) == len(first)


# -- the inputs that split the decoders, crafted -------------------------------------


def _capture(name: str) -> bytes:
    return next((FIXTURES / name).rglob("*.xplane.pb")).read_bytes()


def _edit_events(data: bytes, edit: Callable[[list[Field], xplane_pb2.XPlane], bool]) -> bytes:
    """``data`` with ``edit`` applied to every event's fields (it returns whether it
    changed them), lengths redone."""
    space = xplane_pb2.XSpace.FromString(data)
    top = parse(data)
    planes = iter(space.planes)
    for f in top:
        if f.number != 1 or f.wire != LEN:
            continue
        plane = next(planes)
        assert isinstance(f.value, bytes)
        plane_fields = parse(f.value)
        for line in plane_fields:
            if line.number != 3 or line.wire != LEN:
                continue
            assert isinstance(line.value, bytes)
            line_fields = parse(line.value)
            for event in line_fields:
                if event.number == 4 and event.wire == LEN:
                    assert isinstance(event.value, bytes)
                    fields = parse(event.value)
                    if edit(fields, plane):
                        event.value = encode(fields)
            line.value = encode(line_fields)
        f.value = encode(plane_fields)
    return encode(top)


def _memory_ids(plane: xplane_pb2.XPlane, name: str = "MemoryAllocation") -> set[int]:
    return {k for k, m in plane.event_metadata.items() if m.name == name}


def _upb_allocations(data: bytes) -> int:
    space = xplane_pb2.XSpace.FromString(data)
    return sum(
        e.metadata_id in _memory_ids(p)
        for p in space.planes
        for line in p.lines
        for e in line.events
    )


def _upb_op_total(data: bytes, op_event: str) -> int:
    space = xplane_pb2.XSpace.FromString(data)
    return sum(
        e.duration_ps
        for p in space.planes
        for line in p.lines
        for e in line.events
        if p.event_metadata[e.metadata_id].name == op_event
    )


def two_metadata_ids(data: bytes) -> bytes:
    """Every other allocation event gets a second metadata_id, an op's, after its
    stats: protobuf (last one wins) reads it as that op's event."""
    seen = [0]

    def edit(fields: list[Field], plane: xplane_pb2.XPlane) -> bool:
        allocation = _memory_ids(plane)
        others = sorted(k for k in plane.event_metadata if k not in allocation)
        if not fields or fields[0].value not in allocation or not others:
            return False
        seen[0] += 1
        if seen[0] % 2:
            fields.append(Field(1, VARINT, others[0]))
        return True

    return _edit_events(data, edit)


def duration_last(data: bytes) -> bytes:
    """Every event's duration_ps written after its stats (another field before it)."""

    def edit(fields: list[Field], plane: xplane_pb2.XPlane) -> bool:
        rows = [f for f in fields if f.number == 3 and f.wire == VARINT]
        for f in rows:
            fields.remove(f)
            fields.append(f)
        return bool(rows)

    return _edit_events(data, edit)


def junk_in_an_op_event(data: bytes) -> bytes:
    """One TF op event (not a memory event) given a field of wire type 7 at its
    end: not protobuf, so the capture is refused on both paths."""
    done = [False]

    def edit(fields: list[Field], plane: xplane_pb2.XPlane) -> bool:
        names = plane.event_metadata
        if done[0] or not fields or ":" not in names[int(fields[0].value)].name:
            return False
        fields.append(Field(0, 0, 0, raw=b"\x0f\x01"))
        done[0] = True
        return True

    return _edit_events(data, edit)


def _both(data: bytes) -> tuple[MemoryTrace, MemoryTrace]:
    compiled, numpy = decode(data, True), decode(data, False)
    assert not isinstance(compiled, str) and not isinstance(numpy, str), (compiled, numpy)
    return compiled, numpy


@built
def test_the_last_metadata_id_wins_on_both_paths() -> None:
    data = two_metadata_ids(_capture("keras_train"))
    expected = _upb_allocations(data)
    compiled, numpy = _both(data)
    assert expected < _upb_allocations(_capture("keras_train"))  # the edit took effect
    for trace in (compiled, numpy):
        assert int(trace.events["is_allocation"].sum()) == expected
    assert differences(data)[0] == []


@built
def test_a_duration_after_other_fields_counts_on_both_paths() -> None:
    data = duration_last(_capture("keras_train"))
    compiled, numpy = _both(data)
    for trace in (compiled, numpy):
        for op, total in zip(trace.op_time["op"], trace.op_time["total_ps"], strict=True):
            assert total == _upb_op_total(data, f"{op}:{trace.op_types[op]}"), op
    assert differences(data)[0] == []


@built
def test_an_unreadable_event_outside_the_memory_data_refuses_the_capture_on_both_paths() -> None:
    data = junk_in_an_op_event(_capture("keras_train"))
    with pytest.raises(DecodeError):  # protobuf refuses it too
        xplane_pb2.XSpace.FromString(data)
    assert decode(data, True) == decode(data, False) == "CorruptCaptureError"


def test_a_num_occurrences_after_offset_clears_it_on_both_paths() -> None:
    """offset_ps and num_occurrences are a oneof: the later one wins."""

    def edit(fields: list[Field], plane: xplane_pb2.XPlane) -> bool:
        if not fields or fields[0].value not in _memory_ids(plane):
            return False
        fields.append(Field(5, VARINT, 1))
        return True

    data = _edit_events(_capture("leak"), edit)
    paths = [True, False] if native._native is not None else [False]
    for on in paths:
        trace = decode(data, on)
        assert not isinstance(trace, str)
        allocations = trace.events[trace.events["is_allocation"]]
        # Every allocation now sits at its line's start: offset 0.
        assert allocations["time_ps"].nunique() < len(allocations)


CRAFTED = {
    "two_ids": two_metadata_ids,
    "duration_last": duration_last,
    "junk_op_event": junk_in_an_op_event,
}


@pytest.mark.parametrize("pure", ["0", "1"])
def test_crafted_captures_under_the_bounds(tmp_path: Path, pure: str) -> None:
    paths = []
    for name, craft in CRAFTED.items():
        path = tmp_path / name / "host.xplane.pb"
        path.parent.mkdir()
        path.write_bytes(craft(_capture("keras_train")))
        paths.append(path)
    os.environ["TRACEPARSE_PURE_PYTHON"] = pure
    try:
        results = run_bounded([["summary", str(p)] for p in paths], tmp_path)
    finally:
        del os.environ["TRACEPARSE_PURE_PYTHON"]
    check_bounds(results, problems=2)
    codes = [r.code for r in results]
    assert codes == [0, 0, 3], [r.stderr for r in results]
    assert "junk_op_event" in results[2].stderr and "not a readable XSpace" in results[2].stderr
    assert np.all([r.seconds < 10 for r in results])
