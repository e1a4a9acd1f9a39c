"""Hostile inputs made from the real fixtures: the mutators shared by the in-suite
hypothesis tests (tests/test_hostile_fuzz.py) and the long run (run_fuzz.py).

Every mutator takes a ``random.Random`` and returns the bytes of one file. The
in-suite tests pass hypothesis' ``st.randoms()`` (so failures shrink); the long
run passes a seeded ``random.Random`` (so a case can be replayed from its seed).

Kinds of mutation:

- ``bitflip``, ``overwrite``, ``insert``, ``delete``, ``truncate``: byte-level
  damage anywhere in the file;
- ``splice``: the head of one fixture joined to the tail of another;
- ``varint``: a varint or a length prefix inside an event (or its stats)
  rewritten in place, so the framing around it stays intact;
- ``absurd``: the capture parsed, edited into a well-formed one with absurd
  content (negative and huge byte counts, stats of the wrong type, events out of
  order, addresses reused without a free, hostile names, absurd timestamps),
  and serialised again;
- ``random``: bytes from nowhere.

Pre-converted ``memory_profile`` JSON is mutated as text (byte-level or
value-level) and gzipped again; ``gzip`` flips bits of the compressed stream.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from traceparse._proto import memory_profile_pb2, xplane_pb2
from traceparse.decode import wire
from traceparse.decode.limits import BYTE_STATS

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

XPLANE, JSON_GZ, BINARY = ".xplane.pb", ".memory_profile.json.gz", ".memory_profile.pb"
SUFFIXES = (XPLANE, JSON_GZ, BINARY)

INTERESTING_INTS = [
    0,
    1,
    -1,
    255,
    256,
    2**31 - 1,
    2**31,
    2**32,
    2**48,
    2**53 + 1,
    2**62,
    2**63 - 1,
    -(2**63),
    -(2**62),
    2**63,
    2**64 - 1,
]
INTERESTING_DOUBLES = [
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    -1.0,
    0.5,
    1e300,
    -1e300,
    5e-324,
    9.3e18,
    -9.3e18,
]
HOSTILE_TEXT = [
    "",
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "a|b`c``d|`",
    '=HYPERLINK("https://evil.example")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1)",
    "\x1b[31mred\x1b]0;title\x07",
    "line\nbreak\r\n# heading",
    "\u202eevil\u2028x",
    "[",
    "[]",
    "[-1,2]",
    "[?,3]",
    "[²]",
    "[٣,4]",
    "[99999999999999999999,99999999999999999999]",
    "[4294967296,4294967296,4294967296]",
    "[" + ",".join(["2"] * 400) + "]",
    "x" * 5000,
    "model/<b>dense</b>/MatMul",
    "model/dense/MatMul:MatMul",
]
HOSTILE_SHAPES = [
    "[4294967296,4294967296,4294967296]",
    "[99999999999999999999,99999999999999999999]",
    "[" + "9" * 5000 + "]",
    "[" + ",".join(["2"] * 400) + "]",
    "[²]",
    "[٣,4]",
    "[-1,2]",
    "[?,3]",
    "[",
    "[]",
    "[0]",
]
# Stat names TensorFlow writes on memory events and step markers.
STAT_NAMES = [
    "allocator_name",
    "addr",
    *BYTE_STATS,
    "fragmentation",
    "tf_op",
    "region_type",
    "data_type",
    "shape",
    "id",
    "step_num",
    "_r",
    "index_on_host",
    "device_ordinal",
]


@dataclass(frozen=True)
class Target:
    """A fixture file to mutate. For ``.gz`` files ``data`` is the decompressed text."""

    name: str
    suffix: str
    data: bytes

    def encode(self, data: bytes) -> bytes:
        """The bytes of a file with this target's format holding ``data``."""
        return gzip.compress(data, mtime=0) if self.suffix.endswith(".gz") else data


@cache
def targets() -> tuple[Target, ...]:
    """Every readable fixture, smallest first."""
    found: dict[bytes, Target] = {}  # one of each content
    skip = ("corrupt", "not_a_capture", "both")  # "both" repeats eager_ops and legacy
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or path.parts[len(FIXTURES.parts)] in skip:
            continue
        for suffix in SUFFIXES:
            if path.name.endswith(suffix):
                raw = path.read_bytes()
                data = gzip.decompress(raw) if suffix.endswith(".gz") else raw
                found.setdefault(data, Target(str(path.relative_to(FIXTURES)), suffix, data))
    return tuple(sorted(found.values(), key=lambda t: (len(t.data), t.name)))


# -- byte-level damage ----------------------------------------------------------------


def bitflip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def overwrite(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            break
        at = rng.randrange(len(out))
        size = rng.choice([1, 1, 2, 4, 8, 16])
        if rng.random() < 0.5:
            fill = bytes(rng.randrange(256) for _ in range(size))
        else:
            fill = bytes([rng.choice([0x00, 0xFF, 0x7F, 0x80])]) * size
        out[at : at + size] = fill[: len(out) - at]
    return bytes(out)


def insert(rng: random.Random, data: bytes) -> bytes:
    at = rng.randint(0, len(data))
    chunk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return data[:at] + chunk + data[at:]


def delete(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    at = rng.randrange(len(data))
    return data[:at] + data[at + rng.randint(1, 64) :]


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randint(0, max(len(data) - 1, 0))]


def splice(rng: random.Random, data: bytes, other: bytes) -> bytes:
    return data[: rng.randint(0, len(data))] + other[rng.randint(0, len(other)) :]


def random_bytes(rng: random.Random) -> bytes:
    size = rng.choice([0, 1, 2, 10, 100, 1000, 4096])
    prefix = rng.choice([b"", b"\x0a", b"\x1f\x8b\x08\x00", b"{", b"\x0a\xff\xff\xff\xff\x0f"])
    return prefix + bytes(rng.randrange(256) for _ in range(size))


# -- varints and lengths inside events ------------------------------------------------


@dataclass(frozen=True)
class Spot:
    """A varint in the file: ``data[start:end]``; ``length`` when it is a length prefix."""

    start: int
    end: int
    length: bool


def _varint_end(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def _spots(data: bytes, start: int, end: int, depth: int) -> Iterator[Spot]:
    """The varints of one message (and, below ``depth``, of its nested messages)."""
    for number, kind, field_start, field_end, value in wire.iter_fields(data, start, end):
        tag_end = _varint_end(data, field_start)
        if kind == 0:
            yield Spot(tag_end, field_end, False)
        elif kind == 2:
            yield Spot(tag_end, value, True)
            if depth > 0 and number == 4:  # XEvent.stats
                yield from _spots(data, value, field_end, depth - 1)


@cache
def event_spots(data: bytes) -> tuple[Spot, ...]:
    """Every varint and length prefix inside the events of an XSpace."""
    found: list[Spot] = []
    try:
        for number, _, _, plane_end, plane_start in wire.iter_fields(data, 0, len(data)):
            if number != 1:
                continue
            for field, _, _, line_end, line_start in wire.iter_fields(data, plane_start, plane_end):
                if field != 3:
                    continue
                for event_field, _, _, event_end, event_start in wire.iter_fields(
                    data, line_start, line_end
                ):
                    if event_field == 4:
                        found.extend(_spots(data, event_start, event_end, 1))
    except wire.WireError:
        pass
    return tuple(found)


def _encode_varint(value: int, width: int | None = None) -> bytes:
    """``value`` (two's complement in 64 bits) as a varint, padded to ``width`` bytes
    when it fits (protobuf accepts redundant continuation bytes)."""
    value &= 2**64 - 1
    out = bytearray()
    while True:
        out.append(value & 0x7F)
        value >>= 7
        if not value:
            break
        out[-1] |= 0x80
    if width is not None and len(out) < width:
        out[-1] |= 0x80
        out.extend([0x80] * (width - len(out) - 1))
        out.append(0)
    return bytes(out)


def _decode_varint(raw: bytes) -> int:
    return sum((byte & 0x7F) << (7 * i) for i, byte in enumerate(raw))


def varint(rng: random.Random, data: bytes) -> bytes:
    spots = event_spots(data)
    if not spots:
        return bitflip(rng, data)
    spot = rng.choice(spots)
    width = spot.end - spot.start
    if spot.length:
        current = _decode_varint(data[spot.start : spot.end])
        value = rng.choice(
            [0, 1, current - 1, current + 1, current * 2, 2**31, 2**64 - 1, rng.randint(0, 300)]
        )
    else:
        value = rng.choice(INTERESTING_INTS)
    padded = rng.random() < 0.8  # keep the framing around it intact
    encoded = _encode_varint(value, width if padded else None)
    return data[: spot.start] + encoded + data[spot.end :]


# -- well-formed captures with absurd content -----------------------------------------


def _absurd_int(rng: random.Random) -> int:
    return rng.choice([*INTERESTING_INTS, rng.randint(-(2**63), 2**63 - 1)])


_TEXT_STATS = {"allocator_name", "tf_op", "region_type", "shape"}


def _hostile_ref(rng: random.Random, plane: Any) -> int:
    """The id of a new stat_metadata entry named with hostile text (what a
    ref_value stat points at)."""
    key = max([*plane.stat_metadata, 0]) + 1
    plane.stat_metadata[key].id = key
    plane.stat_metadata[key].name = rng.choice(HOSTILE_TEXT)
    return key


def _set_value(rng: random.Random, stat: Any, plane: Any) -> None:
    """An absurd value: half the time of the type the stat should have (a huge
    count, a hostile name), else of any type."""
    name = (
        plane.stat_metadata[stat.metadata_id].name
        if stat.metadata_id in plane.stat_metadata
        else ""
    )
    ref_ids = list(plane.stat_metadata)
    if rng.random() < 0.5 and name:
        kind = (
            rng.choice(["str", "ref"]) if name in _TEXT_STATS else rng.choice(["uint64", "int64"])
        )
    else:
        kind = rng.choice(["double", "uint64", "int64", "str", "bytes", "ref"])
    if kind == "double":
        stat.double_value = rng.choice(INTERESTING_DOUBLES)
    elif kind == "uint64":
        stat.uint64_value = rng.choice([v for v in INTERESTING_INTS if v >= 0])
    elif kind == "int64":
        stat.int64_value = rng.choice([v for v in INTERESTING_INTS if -(2**63) <= v < 2**63])
    elif kind == "str":
        stat.str_value = rng.choice(HOSTILE_TEXT)
    elif kind == "bytes":
        stat.bytes_value = bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))
    elif name in _TEXT_STATS and rng.random() < 0.8:
        stat.ref_value = _hostile_ref(rng, plane)
    else:
        stat.ref_value = rng.choice([*ref_ids, 0, 2**64 - 1, 123456789])


def _stat_id(plane: Any, name: str) -> int:
    """The stat_metadata id of ``name`` in ``plane``, added when missing."""
    for key, meta in plane.stat_metadata.items():
        if meta.name == name:
            return int(key)
    key = max([*plane.stat_metadata, 0]) + 1
    plane.stat_metadata[key].id = key
    plane.stat_metadata[key].name = name
    return key


def _host_planes(space: Any) -> list[Any]:
    planes = [p for p in space.planes if p.lines]
    return planes or list(space.planes)


def _edit(rng: random.Random, space: Any) -> None:
    """One absurd edit of a parsed XSpace."""
    planes = _host_planes(space)
    if not planes:
        return
    plane = rng.choice(planes)
    ref_ids = list(plane.stat_metadata)
    memory_ids = [
        k
        for k, m in plane.event_metadata.items()
        if m.name in ("MemoryAllocation", "MemoryDeallocation")
    ]
    lines = [line for line in plane.lines if len(line.events)]
    edit = rng.choice(
        [
            "stat",
            "stat",
            "stat",
            "shape",
            "bytes",
            "allocators",
            "add_stat",
            "clear_stats",
            "event_field",
            "timestamp",
            "shuffle",
            "duplicate",
            "drop",
            "rename_stat",
            "rename_event",
            "window",
        ]
    )
    if edit == "window":
        env = [p for p in space.planes if p.name == "Task Environment"]
        for stat in env[0].stats if env else []:
            if rng.random() < 0.5:
                stat.uint64_value = rng.choice([v for v in INTERESTING_INTS if v >= 0])
        return
    if edit == "rename_stat" and plane.stat_metadata:
        key = rng.choice(list(plane.stat_metadata))
        plane.stat_metadata[key].name = rng.choice([*STAT_NAMES, *HOSTILE_TEXT])
        return
    if edit == "rename_event" and plane.event_metadata:
        key = rng.choice(list(plane.event_metadata))
        name = rng.choice(HOSTILE_TEXT)
        plane.event_metadata[key].name = rng.choice(
            [name, f"{name}:MatMul", "MemoryAllocation", "MemoryDeallocation"]
        )
        return
    if not lines:
        return
    line = rng.choice(lines)
    if edit == "timestamp":
        line.timestamp_ns = rng.choice([v for v in INTERESTING_INTS if -(2**63) <= v < 2**63])
        return
    if edit == "shuffle":
        events = list(line.events)
        rng.shuffle(events)
        del line.events[:]
        line.events.extend(events)
        return
    mine = [e for e in line.events if e.metadata_id in memory_ids] if rng.random() < 0.8 else []
    event = rng.choice(mine or list(line.events))
    if edit == "duplicate":  # an address reused without a free, or a double free
        line.events.add().CopyFrom(event)
    elif edit == "drop":
        line.events.remove(event)
    elif edit == "clear_stats":
        del event.stats[:]
    elif edit == "shape":  # a known dtype with a shape no tensor has
        for name, value in (("shape", rng.choice(HOSTILE_SHAPES)), ("data_type", 1)):
            stat = event.stats.add(metadata_id=_stat_id(plane, name))
            if isinstance(value, str):
                stat.str_value = value
            else:
                stat.int64_value = value
    elif edit == "allocators":  # every memory event of the line its own allocator
        key = _stat_id(plane, "allocator_name")
        for index, each in enumerate(mine):
            each.stats.add(metadata_id=key, str_value=f"{rng.choice(HOSTILE_TEXT)[:20]}{index}")
    elif edit == "bytes":  # a byte count of the right type, and absurd
        stat = event.stats.add(metadata_id=_stat_id(plane, rng.choice(BYTE_STATS)))
        stat.int64_value = rng.choice([v for v in INTERESTING_INTS if -(2**63) <= v < 2**63])
    elif edit == "event_field":
        field = rng.choice(["metadata_id", "offset_ps", "duration_ps", "num_occurrences"])
        setattr(event, field, rng.choice([v for v in INTERESTING_INTS if -(2**63) <= v < 2**63]))
    elif edit == "add_stat" or not event.stats:
        stat = event.stats.add(metadata_id=rng.choice([*ref_ids, 0, 99999, -1]))
        _set_value(rng, stat, plane)
    else:
        _set_value(rng, rng.choice(list(event.stats)), plane)


def absurd(rng: random.Random, data: bytes) -> bytes:
    space = xplane_pb2.XSpace.FromString(data)
    for _ in range(rng.randint(1, 6)):
        _edit(rng, space)
    return space.SerializeToString()


def absurd_json(rng: random.Random, data: bytes) -> bytes:
    """Replace random values of a memory_profile JSON with absurd ones."""
    document = json.loads(data)
    slots: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(value, dict | list):
                walk(value)
            else:
                slots.append((node, key))

    walk(document)
    for _ in range(rng.randint(1, 8)):
        if not slots:
            break
        node, key = rng.choice(slots)
        node[key] = rng.choice(
            [
                str(rng.choice(INTERESTING_INTS)),
                rng.choice(INTERESTING_INTS),
                rng.choice(["NaN", "Infinity", "-Infinity", 1e300]),
                rng.choice(HOSTILE_TEXT),
                None,
                [],
                {},
            ]
        )
    return json.dumps(document).encode()


def absurd_binary(rng: random.Random, data: bytes) -> bytes | None:
    """A binary MemoryProfile with absurd values, through its JSON form (None when
    the edits do not fit the schema's types)."""
    message = memory_profile_pb2.MemoryProfile.FromString(data)
    text = json_format.MessageToJson(message).encode()
    try:
        edited = json_format.Parse(absurd_json(rng, text), memory_profile_pb2.MemoryProfile())
    except json_format.ParseError:
        return None
    return edited.SerializeToString()


# -- one case -------------------------------------------------------------------------

KINDS = (
    "bitflip",
    "overwrite",
    "insert",
    "delete",
    "truncate",
    "splice",
    "varint",
    "absurd",
    "gzip",
    "random",
)
# How often make_case picks each kind: well-formed captures with absurd content
# get past the parser and reach the analyses, so they get the largest share.
WEIGHTS = (2, 2, 1, 1, 1, 1, 3, 6, 1, 1)

_BYTE_LEVEL: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "bitflip": bitflip,
    "overwrite": overwrite,
    "insert": insert,
    "delete": delete,
    "truncate": truncate,
}


@dataclass(frozen=True)
class Case:
    """One hostile input: its bytes, the file name suffix that picks its reader, and
    where it came from."""

    kind: str
    source: str
    suffix: str
    data: bytes


def make_case(
    rng: random.Random, kind: str | None = None, pool: tuple[Target, ...] | None = None
) -> Case:
    """A random mutation of a random fixture (``kind`` picks the mutation, ``pool``
    the fixtures; all of them by default)."""
    kind = kind or rng.choices(KINDS, WEIGHTS)[0]
    pool = pool or targets()
    target = rng.choice(pool)
    if kind == "random":
        return Case(kind, "-", rng.choice(SUFFIXES), random_bytes(rng))
    if kind == "splice":
        other = rng.choice(pool)
        joined = splice(rng, target.data, other.data)
        return Case(kind, f"{target.name}+{other.name}", target.suffix, target.encode(joined))
    if kind == "gzip":
        gz = [t for t in pool if t.suffix == JSON_GZ] or [target]
        target = rng.choice(gz)
        return Case(kind, target.name, target.suffix, bitflip(rng, target.encode(target.data)))
    if kind in ("varint", "absurd"):
        if target.suffix == XPLANE:
            mutate = varint if kind == "varint" else absurd
            return Case(kind, target.name, target.suffix, mutate(rng, target.data))
        if target.suffix == JSON_GZ and kind == "absurd":
            return Case(
                kind, target.name, target.suffix, target.encode(absurd_json(rng, target.data))
            )
        if target.suffix == BINARY and kind == "absurd":
            mutated = absurd_binary(rng, target.data)
            if mutated is not None:
                return Case(kind, target.name, target.suffix, mutated)
        kind = "overwrite"
    mutated = _BYTE_LEVEL[kind](rng, target.data)
    return Case(kind, target.name, target.suffix, target.encode(mutated))
