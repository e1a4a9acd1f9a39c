"""A seeded corpus of structure-aware mutants of the real captures, for the
differential test of the two decoders (tests/test_decode_differential.py) and
its longer run (``python tests/fuzz/wire_mutants.py --mutants 20000``).

Each fixture's XSpace is first cut down to a base of a few KB (a window of
events around the memory events of each line, a few lines a plane), so that one
decode costs milliseconds. A mutant is then one base with one to three edits
made where the decoders read: inside an event, a stat, a line or a plane, with
the framing around the edit rebuilt (lengths recomputed) unless breaking it is
the edit. The edits are protobuf's corner cases:

- ``repeat``: a scalar field again, later, with another value (metadata_id set
  to a memory event's id or an op's, duration_ps, offset_ps after or before
  num_occurrences: last value wins, oneof members clear each other);
- ``reorder``: an event's or a stat's fields shuffled (duration after the stats,
  the id after the value);
- ``wrong_wire``: a known field written with another wire type (protobuf keeps
  it as an unknown field);
- ``bad_wire``: a wire type that does not exist (3, 4, 6, 7), or field number 0;
- ``past_end``: a length that runs past the end of its message;
- ``overlong``: a varint (tag, value or length) padded with continuation bytes,
  to 10 bytes (valid) or 11 (not);
- ``unknown``: a field no schema names, anywhere; ``deep``: one holding
  length-delimited fields nested hundreds deep;
- ``junk``: a byte overwritten inside an event the decoder does not decode;
- ``stat``: a stat repeated with another value, a second value of another kind,
  non-UTF-8 text, a step marker's stat inside an op event (written id-first or
  value-first, its id overlong);
- ``drop``: a field removed.

Mutant ``i`` of seed ``s`` comes from ``random.Random(f"{s}:{i}")``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from traceparse._proto import xplane_pb2
from traceparse.decode import wire

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
# XSpace.planes, XPlane.lines, XLine.events, XEvent.stats
_PLANES, _LINES, _EVENTS, _STATS = 1, 3, 4, 4
_EVENTS_PER_LINE = 48
_LINES_PER_PLANE = 6


@dataclass
class Field:
    """One field: ``value`` an int (varint, fixed) or bytes (length-delimited);
    ``raw`` replaces the whole encoding when set (edits that break the framing)."""

    number: int
    wire: int
    value: int | bytes
    raw: bytes | None = None
    tag_pad: int = 0  # extra bytes of an overlong tag
    value_pad: int = 0  # extra bytes of an overlong varint value or length


def varint(value: int, pad: int = 0) -> bytes:
    """``value`` (64 bits) as a varint, with ``pad`` redundant bytes (11 bytes in
    all is past protobuf's limit: not well-formed)."""
    out = bytearray(wire.encode_varint(value))
    if pad:
        out[-1] |= 0x80
        out.extend([0x80] * (pad - 1))
        out.append(0)
    return bytes(out)


def encode(fields: list[Field]) -> bytes:
    out = bytearray()
    for f in fields:
        if f.raw is not None:
            out += f.raw
            continue
        out += varint(f.number << 3 | f.wire, f.tag_pad)
        if f.wire == VARINT:
            assert isinstance(f.value, int)
            out += varint(f.value, f.value_pad)
        elif f.wire == LEN:
            assert isinstance(f.value, bytes)
            out += varint(len(f.value), f.value_pad) + f.value
        else:
            assert isinstance(f.value, int)
            out += f.value.to_bytes(8 if f.wire == FIXED64 else 4, "little")
    return bytes(out)


def parse(data: bytes) -> list[Field]:
    fields = []
    for number, kind, _, end, value in wire.iter_fields(data, 0, len(data)):
        fields.append(Field(number, kind, data[value:end] if kind == LEN else value))
    return fields


@dataclass(frozen=True)
class Ids:
    """What a plane's metadata says: the ids of memory events, of other events,
    of the stats, of step_num."""

    memory: tuple[int, ...]
    others: tuple[int, ...]
    stats: tuple[int, ...]
    step: tuple[int, ...]
    text_stats: tuple[int, ...]


def _ids(plane: xplane_pb2.XPlane) -> Ids:
    memory = tuple(
        k
        for k, m in plane.event_metadata.items()
        if m.name in ("MemoryAllocation", "MemoryDeallocation")
    )
    others = tuple(k for k in plane.event_metadata if k not in memory)
    names = {k: m.name for k, m in plane.stat_metadata.items()}
    step = tuple(k for k, n in names.items() if n == "step_num")
    text = ("allocator_name", "tf_op", "region_type", "shape")
    return Ids(memory, others, tuple(names), step, tuple(k for k, n in names.items() if n in text))


def _trim_line(line: bytes, memory: set[int]) -> bytes:
    """A line with a window of its events: from a little before its first memory
    event (or its start), at most ``_EVENTS_PER_LINE``."""
    fields = parse(line)
    events = [i for i, f in enumerate(fields) if f.number == _EVENTS and f.wire == LEN]
    first = 0
    for k, i in enumerate(events):
        value = fields[i].value
        assert isinstance(value, bytes)
        if parse(value)[:1] and parse(value)[0].value in memory:
            first = max(0, k - 6)
            break
    keep = set(events[first : first + _EVENTS_PER_LINE])
    return encode([f for i, f in enumerate(fields) if i not in events or i in keep])


@dataclass(frozen=True)
class Base:
    name: str
    data: bytes
    ids: tuple[Ids, ...]  # per plane, in order


@cache
def bases() -> tuple[Base, ...]:
    """Every readable xplane fixture, cut down (one of each content)."""
    found: dict[bytes, Base] = {}
    skip = ("corrupt", "not_a_capture", "both")
    for path in sorted(FIXTURES.rglob("*.xplane.pb")):
        if path.relative_to(FIXTURES).parts[0] in skip:
            continue
        data = path.read_bytes()
        space = xplane_pb2.XSpace.FromString(data)
        ids = tuple(_ids(p) for p in space.planes)
        top = parse(data)
        planes = iter(ids)
        for f in top:
            if f.number != _PLANES or f.wire != LEN:
                continue
            plane_ids = next(planes)
            assert isinstance(f.value, bytes)
            plane = parse(f.value)
            lines = [i for i, g in enumerate(plane) if g.number == _LINES and g.wire == LEN]
            kept = lines[:_LINES_PER_PLANE]
            for i in kept:
                value = plane[i].value
                assert isinstance(value, bytes)
                plane[i].value = _trim_line(value, set(plane_ids.memory))
            f.value = encode([g for i, g in enumerate(plane) if i not in lines or i in kept])
        trimmed = encode(top)
        name = str(path.relative_to(FIXTURES)).split("/")[0]
        found.setdefault(trimmed, Base(name, trimmed, ids))
    return tuple(found.values())


# -- where an edit goes ----------------------------------------------------------------


@dataclass
class Path_:
    """A message inside the capture: the chain of (fields, index) from the top."""

    chain: list[tuple[list[Field], int]]
    fields: list[Field]  # the message itself, parsed
    plane: int

    def rebuild(self) -> bytes:
        """The capture's bytes with the edited message put back (lengths redone)."""
        inner = encode(self.fields)
        for fields, index in reversed(self.chain):
            fields[index].value = inner
            inner = encode(fields)
        return inner


def _children(fields: list[Field], number: int) -> list[int]:
    return [i for i, f in enumerate(fields) if f.number == number and f.wire == LEN]


def _descend(rng: random.Random, data: bytes, depth: int) -> Path_ | None:
    """A random message at ``depth`` (0 space, 1 plane, 2 line, 3 event, 4 stat)."""
    fields = parse(data)
    chain: list[tuple[list[Field], int]] = []
    plane = 0
    for level, number in enumerate((_PLANES, _LINES, _EVENTS, _STATS)[:depth]):
        found = _children(fields, number)
        if not found:
            return None
        index = rng.choice(found)
        if level == 0:
            plane = _children(fields, _PLANES).index(index)
        chain.append((fields, index))
        value = fields[index].value
        assert isinstance(value, bytes)
        try:
            fields = parse(value)
        except wire.WireError:
            return None
    return Path_(chain, fields, plane)


# -- the edits -------------------------------------------------------------------------


def _some_id(rng: random.Random, ids: Ids) -> int:
    pool = rng.choice([ids.memory, ids.others, ids.memory]) or ids.others or (1,)
    return rng.choice([*pool, 0, rng.randrange(1, 1 << 20)])


def _value_of(rng: random.Random, kind: int) -> int | bytes:
    if kind == LEN:
        return rng.choice([b"", b"GPU_0_bfc", b"\xff\xfe", b"[2,3]", bytes(5)])
    if kind == VARINT:
        return rng.choice([0, 1, 7, 300, 2**63, 2**64 - 1, rng.randrange(1 << 40)])
    return rng.randrange(1 << (64 if kind == FIXED64 else 32))


def repeat(rng: random.Random, path: Path_, ids: Ids) -> None:
    number = rng.choice([1, 1, 2, 3, 3, 5])
    value = _some_id(rng, ids) if number == 1 else _value_of(rng, VARINT)
    at = rng.choice([len(path.fields), rng.randint(0, len(path.fields))])
    path.fields.insert(at, Field(number, VARINT, value))


def reorder(rng: random.Random, path: Path_, ids: Ids) -> None:
    if rng.random() < 0.5:
        rng.shuffle(path.fields)
    elif path.fields:  # one field to the end (duration after the stats)
        path.fields.append(path.fields.pop(rng.randrange(len(path.fields))))


def wrong_wire(rng: random.Random, path: Path_, ids: Ids) -> None:
    if not path.fields:
        return
    f = path.fields[rng.randrange(len(path.fields))]
    kind = rng.choice([k for k in (VARINT, FIXED64, LEN, FIXED32) if k != f.wire])
    f.wire, f.value = kind, _value_of(rng, kind)


def bad_wire(rng: random.Random, path: Path_, ids: Ids) -> None:
    number = rng.choice([0, 1, 2, 4, rng.randrange(6, 1000)])
    kind = rng.choice([3, 4, 6, 7, VARINT])
    raw = varint(number << 3 | kind) + b"\x01"
    path.fields.insert(rng.randint(0, len(path.fields)), Field(0, 0, 0, raw=raw))


def past_end(rng: random.Random, path: Path_, ids: Ids) -> None:
    rows = [f for f in path.fields if f.wire == LEN]
    if not rows:
        return
    f = rng.choice(rows)
    assert isinstance(f.value, bytes)
    extra = rng.choice([1, 2, 100, 2**31, 2**63])
    f.raw = varint(f.number << 3 | LEN) + varint(len(f.value) + extra) + f.value


def overlong(rng: random.Random, path: Path_, ids: Ids) -> None:
    if not path.fields:
        return
    f = path.fields[rng.randrange(len(path.fields))]
    pad = rng.choice([1, 3, 8, 9, 10])  # 10 or more past a short varint: too long
    if rng.random() < 0.5:
        f.tag_pad = pad
    elif f.wire in (VARINT, LEN):
        f.value_pad = pad


def unknown(rng: random.Random, path: Path_, ids: Ids) -> None:
    number = rng.choice([6, 7, 15, 16, 99, 2**29 - 1])
    kind = rng.choice([VARINT, FIXED64, LEN, FIXED32])
    at = rng.randint(0, len(path.fields))
    path.fields.insert(at, Field(number, kind, _value_of(rng, kind)))


def deep(rng: random.Random, path: Path_, ids: Ids) -> None:
    inner = b""
    for _ in range(rng.choice([50, 200, 1000])):
        inner = encode([Field(rng.choice([1, 4, 99]), LEN, inner)])
    path.fields.insert(rng.randint(0, len(path.fields)), Field(99, LEN, inner))


def junk(rng: random.Random, path: Path_, ids: Ids) -> None:
    """A byte overwritten inside one field (the framing around the field kept)."""
    rows = [f for f in path.fields if f.wire == LEN and f.value]
    if not rows:
        return
    f = rng.choice(rows)
    assert isinstance(f.value, bytes)
    body = bytearray(f.value)
    body[rng.randrange(len(body))] = rng.choice([0x07, 0x0B, 0xFF, 0x80, 0x00])
    f.value = bytes(body)


def stat(rng: random.Random, path: Path_, ids: Ids) -> None:
    """A stat added to an event: a repeat of one it has with another value, one with
    two values, non-UTF-8 text, or a step marker's written in odd ways."""
    stats = [f for f in path.fields if f.number == _STATS and f.wire == LEN]
    choice = rng.randrange(4)
    stat_id = rng.choice([*ids.stats, 1]) if ids.stats else 1
    if choice == 0 and stats:
        value = stats[-1].value
        assert isinstance(value, bytes)
        try:
            fields = parse(value)
        except wire.WireError:
            return
        fields.append(Field(rng.choice([3, 4, 5, 7]), VARINT, _value_of(rng, VARINT)))
        fields[-1].wire = LEN if fields[-1].number == 5 else VARINT
        if fields[-1].wire == LEN:
            fields[-1].value = _value_of(rng, LEN)
        body = encode(fields)
    elif choice == 1:
        text_id = rng.choice(ids.text_stats) if ids.text_stats else stat_id
        body = encode([Field(1, VARINT, text_id), Field(5, LEN, b"\xc3(\xff" + bytes([0x80]))])
    elif choice == 2 and ids.step:
        fields = [
            Field(1, VARINT, rng.choice(ids.step), value_pad=rng.choice([0, 0, 2])),
            Field(rng.choice([3, 4]), VARINT, rng.randrange(100)),
        ]
        if rng.random() < 0.5:
            fields.reverse()
        if rng.random() < 0.3:
            fields.append(Field(5, LEN, b"not a number"))
        body = encode(fields)
    else:
        body = encode([Field(1, VARINT, stat_id), Field(2, FIXED64, rng.randrange(1 << 64))])
    path.fields.insert(rng.randint(0, len(path.fields)), Field(_STATS, LEN, body))


def drop(rng: random.Random, path: Path_, ids: Ids) -> None:
    if path.fields:
        path.fields.pop(rng.randrange(len(path.fields)))


Edit = Callable[[random.Random, Path_, Ids], None]
# Edits by where they go: most in events, where the decoders differ most.
EDITS: dict[str, tuple[tuple[int, ...], Edit]] = {
    "repeat": ((3, 3, 3, 4), repeat),
    "reorder": ((3, 3, 4, 2), reorder),
    "wrong_wire": ((3, 4, 2), wrong_wire),
    "bad_wire": ((3, 4, 2), bad_wire),
    "past_end": ((3, 4, 2), past_end),
    "overlong": ((3, 4, 2, 1), overlong),
    "unknown": ((3, 4, 2, 1), unknown),
    "deep": ((3, 4), deep),
    "junk": ((3, 3, 4), junk),
    "stat": ((3,), stat),
    "drop": ((3, 4), drop),
}


@dataclass(frozen=True)
class Mutant:
    name: str  # base, then the edits
    data: bytes


def mutant(seed: str, i: int) -> Mutant:
    """Mutant ``i`` of ``seed``: a base and one to three edits."""
    rng = random.Random(f"{seed}:{i}")
    base = rng.choice(bases())
    data = base.data
    done = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        name = rng.choice(sorted(EDITS))
        depths, edit = EDITS[name]
        path = None
        for _ in range(8):  # a plane without lines, an event without stats: again
            path = path or _descend(rng, data, rng.choice(depths))
        if path is None:
            continue
        ids = base.ids[path.plane] if path.plane < len(base.ids) else base.ids[0]
        edit(rng, path, ids)
        data = path.rebuild()
        done.append(name)
    return Mutant(f"{base.name}:{'+'.join(done) or 'none'}", data)


def corpus(seed: str, count: int, first: int = 0) -> list[Mutant]:
    return [mutant(seed, i) for i in range(first, first + count)]


def main(argv: list[str] | None = None) -> int:
    """The long run: many mutants through both decoders; prints every difference."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--mutants", type=int, default=20_000)
    parser.add_argument("--seed", default="long")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from helpers.differential import differences

    start = time.process_time()
    outcomes: dict[str, int] = {}
    failed = runs_only = 0
    for i in range(args.mutants):
        m = mutant(args.seed, i)
        found, outcome = differences(m.data)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if found and all(n.startswith("runs") for n in found):
            runs_only += 1  # the run records alone, not the tables
        elif found:
            failed += 1
        if found:
            print(f"mutant {i} ({m.name}): {', '.join(found)}", flush=True)
    seconds = time.process_time() - start
    print(
        f"{args.mutants} mutants, seed {args.seed!r}: {outcomes}; tables or errors differ "
        f"on {failed}, run records alone on {runs_only}; {seconds:.1f} s CPU"
    )
    return 1 if failed or runs_only else 0


if __name__ == "__main__":
    raise SystemExit(main())
