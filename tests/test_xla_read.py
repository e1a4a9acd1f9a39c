"""How XLA programs are read: the skim read that linking uses equals the full
parse (and TensorFlow's reading), and linking never parses a module whole."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import FIXTURES, xplane_files
from helpers.xla import xla_programs

import traceparse
from traceparse._proto import hlo_pb2, hlo_skim_pb2, xplane_pb2
from traceparse.decode import xla as decode_xla
from traceparse.decode.xla import Skim, XlaProgram
from traceparse.tables.xla_link import link_allocations

XLA_FIXTURES = ["xla_function", "xla_keras"]
ALL_XLA = [*XLA_FIXTURES, "xla_tensorboard", "layers_cnn_xla"]
_ALLOCATION_FIELDS = [f.name for f in hlo_skim_pb2.SkimBufferAllocation.DESCRIPTOR.fields]
_READ = [name for name in _ALLOCATION_FIELDS if name != "assigned"]


def _allocations(allocations: Any) -> list[tuple[Any, ...]]:
    return [tuple(getattr(a, name) for name in _READ) for a in allocations]


def _full_skim(program: XlaProgram) -> XlaProgram:
    """The same program, its skim taken from the full parse."""
    hlo = program.hlo
    allocations = hlo.buffer_assignment.buffer_allocations
    skim = Skim(
        hlo.hlo_module.name, allocations, program.skim.module_at, program.skim.assignment_at
    )
    return XlaProgram(program.name, skim, program.data, program.path, [], {}, hlo)


def _repeated(field: Any) -> bool:
    """Whether a field is repeated, on protobuf 7 (is_repeated) and before it (label)."""
    if hasattr(field, "is_repeated"):
        return bool(field.is_repeated)
    return bool(field.label == field.LABEL_REPEATED)


def test_skim_descriptors_match_tensorflow() -> None:
    tf_hlo = pytest.importorskip("tensorflow.compiler.xla.service.hlo_pb2")
    pairs = {
        "SkimBufferAssignment": "BufferAssignmentProto",
        "SkimBufferAllocation": "BufferAllocationProto",
        "SkimModule": "HloModuleProto",
        "SkimComputation": "HloComputationProto",
    }
    assert set(hlo_skim_pb2.DESCRIPTOR.message_types_by_name) == set(pairs)
    for ours, theirs in pairs.items():
        upstream = tf_hlo.DESCRIPTOR.message_types_by_name[theirs]
        for f in hlo_skim_pb2.DESCRIPTOR.message_types_by_name[ours].fields:
            up = upstream.fields_by_name[f.name]
            assert f.number == up.number, f"{ours}.{f.name}"
            # A field left unread is bytes: the same wire type as its message.
            if f.type == f.TYPE_BYTES:
                assert up.type in (up.TYPE_MESSAGE, up.TYPE_BYTES), f"{ours}.{f.name}"
            else:
                assert f.type == up.type, f"{ours}.{f.name}"
            assert _repeated(f) == _repeated(up), f"{ours}.{f.name}"


@pytest.mark.parametrize("name", ALL_XLA)
def test_skim_read_equals_full_parse(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    programs = xla_programs(prof)
    assert programs
    for _, program in programs:
        hlo = hlo_pb2.HloProto.FromString(bytes(program.data))
        assert program.skim.module == hlo.hlo_module.name
        assert _allocations(program.skim.allocations) == _allocations(
            hlo.buffer_assignment.buffer_allocations
        )


@pytest.mark.parametrize("name", ALL_XLA)
def test_skim_read_equals_tensorflow_reading(name: str) -> None:
    tf_hlo = pytest.importorskip("tensorflow.compiler.xla.service.hlo_pb2")
    tf_xplane = pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")
    path = xplane_files(FIXTURES / name)[0]
    space = tf_xplane.XSpace.FromString(Path(path).read_bytes())
    theirs: dict[str, Any] = {}
    for plane in space.planes:
        ids = {k for k, m in plane.stat_metadata.items() if m.name == "Hlo Proto"}
        for meta in plane.event_metadata.values():
            for stat in meta.stats:
                if stat.metadata_id in ids and stat.WhichOneof("value") == "bytes_value":
                    theirs[meta.name] = tf_hlo.HloProto.FromString(stat.bytes_value)
    ours = xla_programs(traceparse.load(FIXTURES / name))
    assert sorted(p.name for _, p in ours) == sorted(theirs)
    for _, program in ours:
        hlo = theirs[program.name]
        assert program.skim.module == hlo.hlo_module.name
        assert _allocations(program.skim.allocations) == _allocations(
            hlo.buffer_assignment.buffer_allocations
        )


@pytest.mark.parametrize("name", ALL_XLA)
def test_links_from_skim_equal_links_from_full_parse(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    allocations = prof.allocations
    runs = {t.host: t.function_runs for t in prof.traces}
    records = {t.host: t.runs for t in prof.traces}
    skimmed = link_allocations(allocations, xla_programs(prof), runs, records)
    full = [(host, _full_skim(program)) for host, program in xla_programs(prof)]
    parsed = link_allocations(allocations, full, runs, records)
    assert skimmed.program == parsed.program
    assert skimmed.index == parsed.index
    assert skimmed.runs == parsed.runs
    assert skimmed.shared == parsed.shared
    assert skimmed.held() == parsed.held()
    assert skimmed.notes == parsed.notes
    # Each run's temp slab: three runs, two in xla_tensorboard (two profiled batches).
    assert sum(p is not None for p in skimmed.index) >= (2 if name == "xla_tensorboard" else 3)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Messages of hlo.proto parsed while the test runs, by message name."""
    counts: Counter[str] = Counter()

    def counting(cls: Any) -> Any:
        class Counting:
            def __new__(cls_: type, *args: Any, **kwargs: Any) -> Any:
                counts[cls.__name__] += 1
                return cls(*args, **kwargs)

            @staticmethod
            def FromString(data: Any) -> Any:
                counts[cls.__name__] += 1
                return cls.FromString(data)

        return Counting

    names = ("HloProto", "HloInstructionProto", "HloScheduleProto", "BufferAssignmentProto")
    fake = SimpleNamespace(**{name: counting(getattr(hlo_pb2, name)) for name in names})
    monkeypatch.setattr(decode_xla, "hlo_pb2", fake)
    return counts


@pytest.mark.parametrize("name", XLA_FIXTURES)
def test_linking_parses_no_instruction(name: str, parses: Counter[str]) -> None:
    prof = traceparse.load(FIXTURES / name)
    allocations = prof.allocations
    _ = prof.timeline
    assert allocations["xla_allocation_index"].notna().sum() >= 3
    assert parses == Counter()
    programs = [program for _, program in xla_programs(prof)]
    assert all(p._module is None and p._assignment is None and not p.parsed for p in programs)
    # The summary reads the slab's program: some computations, never the whole proto.
    _ = prof.summary()
    total = sum(p.module.instruction_count for p in programs)
    assert 0 < parses["HloInstructionProto"] < total
    _ = prof.xla_buffers, prof.xla_programs, prof.diagnostics()
    assert parses["HloProto"] == 0


def test_unreadable_instructions_leave_linking_whole(tmp_path: Path) -> None:
    """A module whose computations are garbage still links (the skim read never
    reads them); the full parse then says so in diagnostics."""
    path = xplane_files(FIXTURES / "xla_keras")[0]
    space = xplane_pb2.XSpace.FromString(Path(path).read_bytes())
    broken = 0
    for plane in space.planes:
        ids = {k for k, m in plane.stat_metadata.items() if m.name == "Hlo Proto"}
        for meta in plane.event_metadata.values():
            for stat in meta.stats:
                if stat.metadata_id in ids and stat.WhichOneof("value") == "bytes_value":
                    hlo = hlo_pb2.HloProto.FromString(stat.bytes_value)
                    # A computation whose first tag is a truncated varint.
                    module = hlo.hlo_module.SerializeToString() + b"\x1a\x02\xff\xff"
                    assignment = hlo.buffer_assignment.SerializeToString()
                    stat.bytes_value = (
                        b"\x0a" + _varint(len(module)) + module
                        + b"\x1a" + _varint(len(assignment)) + assignment
                    )  # fmt: skip
                    broken += 1
    assert broken
    target = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00" / "localhost.xplane.pb"
    target.parent.mkdir(parents=True)
    target.write_bytes(space.SerializeToString())
    prof = traceparse.load(target)
    good = traceparse.load(FIXTURES / "xla_keras")
    columns = ["xla_program", "xla_allocation_index"]
    assert prof.allocations[columns].astype(object).equals(good.allocations[columns].astype(object))
    # The assignment is whole: every buffer is listed, with no instruction.
    buffers = prof.xla_buffers
    assert len(buffers) == len(good.xla_buffers)
    assert buffers["instruction"].isna().all() and buffers["dtype"].isna().all()
    assert sum("unreadable module" in note for note in prof.diagnostics()) == broken


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
