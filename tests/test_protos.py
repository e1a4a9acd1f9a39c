"""Our hand-written protos against the upstream (TensorFlow / xprof) schemas.

- xplane.proto and memory_profile.proto: every message and enum has the same
  descriptor as upstream (names, numbers, types, labels, oneofs, maps), modulo
  the package name.
- xplane_skim.proto: every field has the upstream number and a wire-compatible
  type.
- Real captures (fixtures/**/*.xplane.pb) decode to the same content with ours,
  with TensorFlow's, and with the skim view.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import FIXTURES, xplane_files
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FileDescriptor
from google.protobuf.descriptor import Error as DescriptorError
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError, Message

from traceparse._proto import memory_profile_pb2, xplane_pb2, xplane_skim_pb2

# The readable captures; the corrupt fixtures are for the error tests.
CAPTURES = xplane_files()

F = descriptor_pb2.FieldDescriptorProto

# Skim message -> the upstream message it is a view of.
SKIM_TO_UPSTREAM = {
    "SkimSpace": "XSpace",
    "SkimPlane": "XPlane",
    "SkimLine": "XLine",
    "SkimEventMetadata": "XEventMetadata",
    "SkimStatMetadata": "XStatMetadata",
    "SkimStat": "XStat",
}

# Field types grouped by how they are encoded; a value written as one type of a
# group reads back as any other (int64 -> uint64 reinterprets negatives).
_WIRE_GROUPS = [
    {F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_ENUM},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE},
    {F.TYPE_DOUBLE, F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_FLOAT, F.TYPE_FIXED32, F.TYPE_SFIXED32},
]


@pytest.fixture(scope="module")
def tf_xplane() -> ModuleType:
    return pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")


@pytest.fixture(scope="module")
def xprof_memory_profile() -> ModuleType:
    try:
        return pytest.importorskip("xprof.protobuf.memory_profile_pb2")
    except pytest.skip.Exception:
        return pytest.importorskip("tensorboard_plugin_profile.protobuf.memory_profile_pb2")


# --- descriptors -------------------------------------------------------------


def _short(type_name: str, package: str) -> str:
    """'.tensorflow.profiler.XPlane.EventMetadataEntry' -> 'XPlane.EventMetadataEntry'."""
    prefix = f".{package}."
    assert type_name.startswith(prefix), (type_name, package)
    return type_name[len(prefix) :]


def _message_proto(desc: Descriptor) -> descriptor_pb2.DescriptorProto:
    """``desc`` as a DescriptorProto, read from its file's serialization where
    pure-Python protobuf 3.20 cannot copy it (it can only for protoc's output)."""
    proto = descriptor_pb2.DescriptorProto()
    try:
        desc.CopyToProto(proto)
        return proto
    except DescriptorError:
        pass
    file = descriptor_pb2.FileDescriptorProto.FromString(desc.file.serialized_pb)
    names = desc.full_name[len(file.package) + 1 :].split(".")
    found = next(m for m in file.message_type if m.name == names[0])
    for name in names[1:]:
        found = next(m for m in found.nested_type if m.name == name)
    return found


def _describe_message(desc: Descriptor) -> dict[str, Any]:
    """A package-free, order-free summary of a message's schema."""
    proto = _message_proto(desc)
    package = desc.file.package
    oneofs = [o.name for o in proto.oneof_decl]
    fields = {}
    for f in proto.field:
        fields[f.name] = {
            "number": f.number,
            "type": F.Type.Name(f.type),
            "label": F.Label.Name(f.label),
            "type_name": _short(f.type_name, package) if f.type_name else "",
            "oneof": oneofs[f.oneof_index] if f.HasField("oneof_index") else None,
            "proto3_optional": f.proto3_optional,
            "packed": f.options.packed if f.options.HasField("packed") else None,
        }
    return {
        "fields": fields,
        "oneofs": sorted(oneofs),
        "map_entry": proto.options.map_entry,
        "nested": {n.name: _describe_message(n) for n in desc.nested_types},
        "enums": {e.name: _describe_enum(e) for e in desc.enum_types},
        "reserved_numbers": sorted(n for r in proto.reserved_range for n in range(r.start, r.end)),
        "reserved_names": sorted(proto.reserved_name),
    }


def _describe_enum(desc: EnumDescriptor) -> dict[str, int]:
    return {v.name: v.number for v in desc.values}


def _closure(desc: Descriptor) -> Iterator[Descriptor | EnumDescriptor]:
    """desc and every top-level message/enum it needs, transitively."""
    seen: set[str] = set()
    todo: list[Descriptor | EnumDescriptor] = [desc]
    while todo:
        d = todo.pop()
        while d.containing_type is not None:
            d = d.containing_type
        if d.full_name in seen:
            continue
        seen.add(d.full_name)
        yield d
        if isinstance(d, Descriptor):
            stack = [d]
            while stack:
                m = stack.pop()
                stack.extend(m.nested_types)
                for f in m.fields:
                    if f.message_type is not None:
                        todo.append(f.message_type)
                    if f.enum_type is not None:
                        todo.append(f.enum_type)


def _assert_same_file_contents(ours: FileDescriptor, theirs: FileDescriptor) -> None:
    assert ours.package == "traceparse.proto"
    assert theirs.package != ours.package
    for name, desc in ours.message_types_by_name.items():
        assert name in theirs.message_types_by_name, f"{name} is not upstream"
        assert _describe_message(desc) == _describe_message(theirs.message_types_by_name[name]), (
            name
        )
    for name, enum in ours.enum_types_by_name.items():
        assert name in theirs.enum_types_by_name, f"{name} is not upstream"
        assert _describe_enum(enum) == _describe_enum(theirs.enum_types_by_name[name]), name


def test_xplane_descriptors_match_tensorflow(tf_xplane: ModuleType) -> None:
    ours, theirs = xplane_pb2.DESCRIPTOR, tf_xplane.DESCRIPTOR
    assert set(ours.message_types_by_name) == {
        "XSpace",
        "XPlane",
        "XLine",
        "XEvent",
        "XEventMetadata",
        "XStatMetadata",
        "XStat",
    }
    _assert_same_file_contents(ours, theirs)


def test_memory_profile_descriptors_match_xprof(xprof_memory_profile: ModuleType) -> None:
    ours, theirs = memory_profile_pb2.DESCRIPTOR, xprof_memory_profile.DESCRIPTOR
    _assert_same_file_contents(ours, theirs)
    needed = {d.name for d in _closure(theirs.message_types_by_name["MemoryProfile"])}
    assert "MemoryActivity" in needed
    declared = set(ours.message_types_by_name) | set(ours.enum_types_by_name)
    assert needed <= declared, needed - declared


def test_skim_fields_are_wire_compatible(tf_xplane: ModuleType) -> None:
    skim = xplane_skim_pb2.DESCRIPTOR
    assert set(skim.message_types_by_name) == set(SKIM_TO_UPSTREAM)
    assert set(skim.enum_types_by_name) == set()
    for skim_name, upstream_name in SKIM_TO_UPSTREAM.items():
        ours = _describe_message(skim.message_types_by_name[skim_name])
        theirs = _describe_message(tf_xplane.DESCRIPTOR.message_types_by_name[upstream_name])
        for field_name, f in ours["fields"].items():
            where = f"{skim_name}.{field_name}"
            assert field_name in theirs["fields"], f"{where} is not upstream"
            up = theirs["fields"][field_name]
            assert f["number"] == up["number"], where
            assert f["label"] == up["label"], where
            assert f["oneof"] == up["oneof"], where
            assert any(
                F.Type.Value(f["type"]) in g and F.Type.Value(up["type"]) in g for g in _WIRE_GROUPS
            ), (where, f["type"], up["type"])
            if f["type"] == "TYPE_MESSAGE":
                entry = ours["nested"].get(f["type_name"].split(".")[-1])
                up_entry = theirs["nested"].get(up["type_name"].split(".")[-1])
                assert (entry is not None) == (up_entry is not None), where
                if entry is not None and up_entry is not None:  # a map: key, value must match
                    assert entry["map_entry"] and up_entry["map_entry"], where
                    assert entry["fields"]["key"]["type"] == up_entry["fields"]["key"]["type"]
                    value = entry["fields"]["value"]["type_name"]
                    up_value = up_entry["fields"]["value"]["type_name"]
                    assert SKIM_TO_UPSTREAM[value] == up_value, where
                else:
                    assert SKIM_TO_UPSTREAM[f["type_name"]] == up["type_name"], where
    line = skim.message_types_by_name["SkimLine"].fields_by_name["events"]
    assert line.type == line.TYPE_BYTES and line.number == 4


def test_skim_tolerates_invalid_utf8_names() -> None:
    # XSpace{planes: [XPlane{name: b"\xff"}]}, which is not valid UTF-8.
    data = b"\x0a\x03\x12\x01\xff"
    space = xplane_skim_pb2.SkimSpace.FromString(data)
    assert space.planes[0].name == b"\xff"
    # Pure-Python protobuf 3.20 raises UnicodeDecodeError, later runtimes DecodeError.
    with pytest.raises((DecodeError, UnicodeDecodeError)):
        xplane_pb2.XSpace.FromString(data)


# --- real captures -------------------------------------------------------------


def test_fixture_captures_exist() -> None:
    assert CAPTURES, f"no *.xplane.pb under {FIXTURES}"


def _capture_ids() -> list[str]:
    return [str(p.relative_to(FIXTURES)) for p in CAPTURES]


@pytest.mark.parametrize("capture", CAPTURES, ids=_capture_ids())
def test_capture_decodes_like_tensorflow(capture: Path, tf_xplane: ModuleType) -> None:
    data = capture.read_bytes()
    theirs = tf_xplane.XSpace.FromString(data)
    ours = xplane_pb2.XSpace.FromString(data)
    assert theirs.planes, "capture has no planes"

    def as_dict(m: Message) -> dict[str, Any]:
        return MessageToDict(m, preserving_proto_field_name=True)

    assert as_dict(ours) == as_dict(theirs)
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(
        deterministic=True
    )
    # Same bytes whichever side re-parses the other's output.
    assert xplane_pb2.XSpace.FromString(theirs.SerializeToString()) == ours


def _skim_value(stat: Any) -> Any:
    kind = stat.WhichOneof("value")
    value = getattr(stat, kind) if kind else None
    if kind == "str_value":
        value = value.decode("utf-8", errors="replace")
    return kind, value


def _tf_value(stat: Any) -> Any:
    kind = stat.WhichOneof("value")
    return getattr(stat, kind) if kind else None


@pytest.mark.parametrize("capture", CAPTURES, ids=_capture_ids())
def test_capture_skims_like_tensorflow(capture: Path, tf_xplane: ModuleType) -> None:
    data = capture.read_bytes()
    theirs = tf_xplane.XSpace.FromString(data)
    skim = xplane_skim_pb2.SkimSpace.FromString(data)

    def text(b: bytes) -> str:
        return b.decode("utf-8", errors="replace")

    assert [text(h) for h in skim.hostnames] == list(theirs.hostnames)
    assert len(skim.planes) == len(theirs.planes)
    n_events = 0
    for sp, tp in zip(skim.planes, theirs.planes, strict=True):
        assert (sp.id, text(sp.name)) == (tp.id, tp.name)
        assert sorted(sp.event_metadata) == sorted(tp.event_metadata)
        for key, em in tp.event_metadata.items():
            se = sp.event_metadata[key]
            assert (se.id, text(se.name), text(se.display_name)) == (
                em.id,
                em.name,
                em.display_name,
            )
        assert sorted(sp.stat_metadata) == sorted(tp.stat_metadata)
        for key, sm in tp.stat_metadata.items():
            ss = sp.stat_metadata[key]
            assert (ss.id, text(ss.name)) == (sm.id, sm.name)
        assert len(sp.stats) == len(tp.stats)
        for ss, ts in zip(sp.stats, tp.stats, strict=True):
            assert ss.metadata_id == ts.metadata_id % 2**64
            assert _skim_value(ss) == (ts.WhichOneof("value"), _tf_value(ts))
        assert len(sp.lines) == len(tp.lines)
        for sl, tl in zip(sp.lines, tp.lines, strict=True):
            assert (
                sl.id,
                sl.display_id,
                text(sl.name),
                text(sl.display_name),
                sl.timestamp_ns,
                sl.duration_ps,
            ) == (tl.id, tl.display_id, tl.name, tl.display_name, tl.timestamp_ns, tl.duration_ps)
            assert len(sl.events) == len(tl.events)
            for raw, event in zip(sl.events, tl.events, strict=True):
                assert raw == event.SerializeToString()
                assert tf_xplane.XEvent.FromString(raw) == event
            n_events += len(sl.events)
    assert n_events > 0, "capture has no events"
