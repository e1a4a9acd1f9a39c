"""The fields and stats of the selected events, decoded column-wise.

Every field position is read for all the events at once: the usual layouts in
lockstep, anything else with protobuf's rules (``wire.scan_fields``). The
stats the decoder reads become one table per kind of value, a row per stat
and a column per event. A stat of the wrong type is NA, never a guess.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from traceparse.decode import native, wire
from traceparse.decode.limits import within_time
from traceparse.decode.lines import index_in
from traceparse.decode.planes import Selected
from traceparse.decode.stat_tables import StatTables

INT_STATS = {
    "addr": "address",
    "requested_bytes": "requested_bytes",
    "allocation_bytes": "allocation_bytes",
    "bytes_allocated": "bytes_allocated",
    "bytes_reserved": "bytes_reserved",
    "bytes_available": "bytes_available",
    "peak_bytes_in_use": "peak_bytes_in_use",
    "data_type": "data_type",
    "id": "step_id",
}
STR_STATS = {
    "allocator_name": "allocator",
    "tf_op": "tf_op",
    "region_type": "region_type",
    "shape": "shape",
}
# What each stat should hold, for the diagnostics about those that do not.
EXPECTED = {
    **dict.fromkeys(INT_STATS, "a whole number"),
    **dict.fromkeys(STR_STATS, "text"),
    "fragmentation": "a number",
}
# Stat value kinds: the XStat oneof field numbers.
_DOUBLE, _UINT64, _INT64, _STR, _BYTES, _REF = 2, 3, 4, 5, 6, 7
_VALUE_WIRE = {_DOUBLE: 1, _UINT64: 0, _INT64: 0, _STR: 2, _BYTES: 2, _REF: 0}
# The wire type each field number of an XStat must have (-1: not a value field).
_WIRE_OF_FIELD = np.full(9, -1, dtype=np.int8)
for _number, _wire_type in _VALUE_WIRE.items():
    _WIRE_OF_FIELD[_number] = _wire_type
_NUMBERS = (_DOUBLE, _UINT64, _INT64)


# The stat of traceparse's clock mark: the wall clock (ns since the epoch) when a
# capture way wrote the event (capture/sources.py ``mark_clock``).
CLOCK_STAT = "traceparse_wall_ns"
# Every stat the decoder reads, by how its value is read.
NUMBER_STATS = (*INT_STATS, "index_on_host", "device_ordinal", "step_num", "_r", CLOCK_STAT)
FLOAT_STATS = ("fragmentation",)
TEXT_STATS = tuple(STR_STATS)


class StatLayout:
    """The stats the decoder reads in one plane: each one's row in the decoded
    tables, looked up by metadata id."""

    names: ClassVar = (*NUMBER_STATS, *FLOAT_STATS, *TEXT_STATS)
    row: ClassVar = {name: i for i, name in enumerate(names)}
    first_float: ClassVar = len(NUMBER_STATS)
    first_text: ClassVar = len(NUMBER_STATS) + len(FLOAT_STATS)

    def __init__(self, stat_names: dict[int, str]) -> None:
        # Interned strings live in stat_metadata too, so it is long.
        self.stat_names = stat_names
        found = [(key, self.row[name]) for key, name in stat_names.items() if name in self.row]
        ids = wire.metadata_ids(key for key, _ in found)
        order = np.argsort(ids)
        self.ids = ids[order]
        self.rows = np.array([row for _, row in found], dtype=np.int64)[order]
        # Every stat name, in one order for the whole plane: a ref's text code is
        # its name's position here, so its label is looked up once per plane,
        # not once per batch (collect.Labels keeps what each position became).
        keys = wire.metadata_ids(stat_names)
        order = np.argsort(keys)
        self.ref_keys = keys[order]
        names = list(stat_names.values())
        self.ref_names: list[str] = [names[i] for i in order.tolist()]
        top = int(self.ref_keys[-1]) if keys.size else 0
        # Small keys (the usual case): a lookup table made once, not per batch.
        self._ref_table: np.ndarray | None = None
        if keys.size and top < 4 * keys.size + (1 << 16):
            self._ref_table = np.full(top + 2, -1, dtype=np.int64)
            self._ref_table[self.ref_keys.astype(np.int64)] = np.arange(keys.size)

    def ref_positions(self, values: np.ndarray) -> np.ndarray:
        """Each ref value's position in ``ref_names``, -1 where no stat has that id."""
        table = self._ref_table
        if table is None:
            return index_in(values, self.ref_keys)
        return table[np.minimum(values, len(table) - 1).astype(np.int64)]


class BatchLabels:
    """The labels of a batch's text codes: the first ``shared`` are the plane's
    stat names (``StatLayout.ref_names``, the same in every batch), the rest the
    batch's inline strings."""

    def __init__(self, layout: StatLayout, inline: list[str]) -> None:
        self.layout = layout
        self.shared = len(layout.ref_names)
        self.inline = inline

    def __len__(self) -> int:
        return self.shared + len(self.inline)

    def __getitem__(self, i: int) -> str:
        return self.layout.ref_names[i] if i < self.shared else self.inline[i - self.shared]


class DecodedEvents:
    """The fields of the selected events and the stats ``StatLayout`` names, as
    one row of values per stat with a column per event."""

    def __init__(self, selected: Selected, layout: StatLayout) -> None:
        self.count = len(selected)
        self.layout = layout
        data, offset, self.duration_ps, tables = _read(selected, layout)
        line_ps = selected.line_ts_ns * 1000  # fits: line stamps are clamped
        # Both parts within 2**62, so their sum cannot overflow; then the sum too.
        self.in_range = within_time(line_ps) & within_time(offset)
        self.time_ps = line_ps + np.where(self.in_range, offset, 0)
        self.in_range &= within_time(self.time_ps)
        self.order = selected.order
        self._kind = _frozen(tables.kinds)

        # Whole rows at a time: the number rows, the float rows, the text rows.
        numeric = slice(0, layout.first_float)
        kinds, raw = tables.kinds[numeric], tables.values[numeric]
        numbers = raw.view(np.int64).copy()
        doubles = raw.view(np.float64)
        # A count written as a double is used when it is a whole number within int64.
        whole = (kinds == _DOUBLE) & np.isfinite(doubles) & (np.abs(doubles) < 2.0**63)
        whole[whole] = doubles[whole] == np.trunc(doubles[whole])
        numbers[whole] = doubles[whole].astype(np.int64)
        ok = (kinds == _UINT64) | (kinds == _INT64) | whole
        numbers[~ok] = 0
        self._int, self._int_valid = _frozen(numbers), _frozen(ok)

        floating = slice(layout.first_float, layout.first_text)
        kinds, raw = tables.kinds[floating], tables.values[floating]
        values = np.where(
            kinds == _DOUBLE,
            raw.view(np.float64),
            np.where(kinds == _INT64, raw.view(np.int64), raw).astype(np.float64),
        )
        # xprof writes NaN fragmentation when nothing is free: that is "unknown".
        ok = np.isin(kinds, _NUMBERS) & np.isfinite(values)
        values[~ok] = 0.0
        self._float, self._float_valid = _frozen(values), _frozen(ok)

        text = slice(layout.first_text, None)
        self._codes, self.labels = self._text_codes(
            data,
            tables.kinds[text].reshape(-1),
            tables.values[text].reshape(-1),
            tables.starts[text].reshape(-1),
            tables.lengths[text].reshape(-1),
        )

    def _text_codes(
        self,
        raw: wire.Buffer,
        kinds: np.ndarray,
        values: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
    ) -> tuple[np.ndarray, BatchLabels]:
        """Per cell of the text stats, an index into the labels (-1 where absent,
        not text, or a ref that points nowhere), and the labels, from the text
        rows' value kinds, values and spans. A ref's code is the position of the
        stat metadata it points to (``BatchLabels``); each distinct inline byte
        string is decoded once. A number where text belongs is the wrong type:
        it stays NA."""
        refs = np.flatnonzero(kinds == _REF)
        inline = np.flatnonzero((kinds == _STR) | (kinds == _BYTES))
        shared = len(self.layout.ref_names)
        inline_labels: list[str] = []
        seen: dict[bytes, int] = {}
        inline_codes = np.empty(inline.size, dtype=np.int64)
        spans = zip(starts[inline].tolist(), lengths[inline].tolist(), strict=True)
        for i, (at, size) in enumerate(spans):
            piece = raw[at : at + size]
            code = seen.get(piece)
            if code is None:
                code = seen[piece] = shared + len(inline_labels)
                inline_labels.append(text(piece))
            inline_codes[i] = code
        codes = np.full(kinds.size, -1, dtype=np.int64)
        codes[refs] = self.layout.ref_positions(values[refs])
        codes[inline] = inline_codes
        return _frozen(codes.reshape(-1, self.count)), BatchLabels(self.layout, inline_labels)

    def int_stat(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A stat per event as (int64 values, valid): not valid where absent or
        not a whole number. Read-only."""
        row = self.layout.row[name]
        return self._int[row], self._int_valid[row]

    def float_stat(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A stat per event as (float64 values, valid): not valid where absent, not
        a number, or not finite. Read-only."""
        row = self.layout.row[name] - self.layout.first_float
        return self._float[row], self._float_valid[row]

    def str_codes(self, name: str) -> tuple[np.ndarray, BatchLabels]:
        """A text stat per event as (index into ``labels``, -1 where absent or not
        text; the labels). Read-only."""
        return self._codes[self.layout.row[name] - self.layout.first_text], self.labels

    def present(self, name: str) -> np.ndarray:
        """Per event: whether it carries the stat at all (with any value)."""
        return self._kind[self.layout.row[name]] > 0

    def is_number(self, name: str) -> np.ndarray:
        """Per event: whether the stat's value (the last one) is a number of any kind."""
        return np.isin(self._kind[self.layout.row[name]], _NUMBERS)


def _frozen(table: np.ndarray) -> np.ndarray:
    """``table``, read-only: callers get views of its rows."""
    table.flags.writeable = False
    return table


def _read(
    selected: Selected, layout: StatLayout
) -> tuple[wire.Buffer, np.ndarray, np.ndarray, StatTables]:
    """The bytes the payload positions index, each event's offset_ps and
    duration_ps (int64), and the stats ``layout`` names, in their tables."""
    rows = len(layout.names)
    if native.available():
        args = (selected.starts, selected.ends, layout.ids, layout.rows, rows)
        offset, duration, tables = native.read_events(selected.data, *args)
        return selected.data, offset.view(np.int64), duration.view(np.int64), tables
    joined = selected.joined()
    offset, duration, stat_event, payload, stat_end = _read_events(joined)
    stat_id, kind, value, start, length = _read_stats(joined.buf, payload, stat_end)
    at = index_in(stat_id.view(np.uint64), layout.ids)
    wanted = np.flatnonzero((at >= 0) & (kind > 0))  # stats read, with a value
    cells = layout.rows[at[wanted]] * len(selected) + stat_event[wanted]
    tables = StatTables.zeros(rows, len(selected))
    tables.fill(cells, kind[wanted], value[wanted], start[wanted], length[wanted])
    return joined.raw, offset, duration, tables


def _read_events(
    events: wire.Chunks,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(offset_ps, duration_ps) of each event, and (event, payload start, payload
    end) of each of their stats: the stats of one event are in wire order (what
    "the last one wins" needs), those of different events interleave.

    Serializers write ``0x08 <metadata id>``, ``0x10 <offset>`` (or ``0x28
    <num_occurrences>``), ``0x18 <duration>`` when not zero, then the stats as
    ``0x22 <length> <XStat>``: such events are read in lockstep, one stat of
    every event per step. Any other layout is decoded field by field with
    protobuf's rules (``wire.scan_fields``).
    """
    buf, starts, ends = events.buf, events.starts, events.ends
    n = len(starts)
    _, mid_length, ok = wire.small_varints(buf, starts + 1)
    ok &= (starts < ends) & (buf[starts] == 0x08)
    tag_at = starts + 1 + mid_length
    tag = buf[tag_at]
    ok &= (tag == 0x10) | (tag == 0x28)
    offset, value_length, value_ok = wire.wide_varints(buf, tag_at + 1)
    ok &= value_ok
    offset[tag != 0x10] = 0
    pos = tag_at + 1 + value_length
    duration = np.zeros(n, dtype=np.uint64)
    rows = np.flatnonzero(ok & (pos < ends) & (buf[pos] == 0x18))
    duration[rows], length, value_ok = wire.wide_varints(buf, pos[rows] + 1)
    ok[rows] &= value_ok
    pos[rows] += 1 + length.astype(np.int64)
    ok &= pos <= ends

    # One stat of every event per step; the checks come after the walk, on all
    # the stats at once. Stat lengths are one byte but for stats of 128 bytes
    # or more (long strings), read in full in the steps that have any.
    owners, tags, stat_starts, stat_ends, fits = [], [], [], [], []
    rows = np.flatnonzero(ok & (pos < ends))
    while rows.size:
        at = pos[rows]
        limit = ends[rows]
        first = buf[at + 1]
        if (first < 0x80).all():
            payload = at + 2
            end = payload + first
            fit = end <= limit
        else:
            size, length, length_ok = wire.small_varints(buf, at + 1)
            payload = at + 1 + length
            room = np.maximum(limit - payload, 0).astype(np.uint64)
            fit = length_ok & (size <= room)
            end = payload + np.minimum(size, room).astype(np.int64)
        owners.append(rows)
        tags.append(at)
        stat_starts.append(payload)
        stat_ends.append(end)
        fits.append(fit)
        pos[rows] = end
        rows = rows[end < limit]

    none = np.zeros(0, dtype=np.int64)
    stat_event = np.concatenate([none, *owners])
    stat_start = np.concatenate([none, *stat_starts])
    stat_end = np.concatenate([none, *stat_ends])
    # An event with a stat that is not a field 4 inside it has an odd layout.
    good = np.concatenate([np.zeros(0, dtype=bool), *fits])
    good &= buf[np.concatenate([none, *tags])] == 0x22
    ok[stat_event[~good]] = False
    keep = ok[stat_event]  # stats read before their event turned out odd go
    if not keep.all():
        stat_event, stat_start, stat_end = stat_event[keep], stat_start[keep], stat_end[keep]

    slow = np.flatnonzero(~ok)
    if slow.size:
        fields = wire.scan_fields(buf, starts[slow], ends[slow])
        offset[slow] = _offsets(fields, slow.size)
        duration[slow] = fields.last_value(3, wire.VARINT, slow.size)
        found = fields.select(4, wire.LEN)
        stat_event = np.concatenate([stat_event, slow[fields.message[found]]])
        stat_start = np.concatenate([stat_start, fields.start[found]])
        stat_end = np.concatenate([stat_end, fields.start[found] + fields.length[found]])
    return offset.view(np.int64), duration.view(np.int64), stat_event, stat_start, stat_end


def _offsets(fields: wire.Fields, count: int) -> np.ndarray:
    """Per message, offset_ps as protobuf reads it: offset_ps and num_occurrences
    are a oneof, so a num_occurrences after the last offset_ps clears it."""
    offset = fields.last_value(2, wire.VARINT, count)
    last = []
    for number in (2, 5):
        rows = fields.select(number, wire.VARINT)
        at = np.full(count, -1, dtype=np.int64)
        at[fields.message[rows]] = rows  # rows of one message are in wire order
        last.append(at)
    offset[last[1] > last[0]] = 0
    return offset


def _read_stats(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each XStat ``buf[starts[i]:ends[i]]`` as (metadata id, value kind, value
    bits, payload start, payload length); kind 0 when it has no value.

    Serializers write ``0x08 <id>`` and then the one value field, so most stats
    are read straight off those bytes, all at once. A stat laid out any other
    way is decoded field by field with protobuf's rules (``wire.scan_fields``).
    ``buf`` is padded (``wire.join``): the direct reads stay inside it.
    """
    n = len(starts)
    stat_id, id_length, ok = wire.small_varints(buf, starts + 1)
    ok &= (starts < ends) & (buf[starts] == 0x08)
    tag = buf[starts + 1 + id_length]
    kind = (tag >> 3).astype(np.int8)
    wire_type = (tag & 7).astype(np.int8)
    ok &= _WIRE_OF_FIELD[np.minimum(kind, 8)] == wire_type
    at = starts + 2 + id_length
    # Read as a varint whatever the wire type; a fixed64 value is read again below.
    value, value_length, value_ok = wire.wide_varints(buf, at)
    start = np.zeros(n, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    field_end = at + value_length
    rows = np.flatnonzero(wire_type == 1)
    value[rows] = wire.read_fixed(buf, at[rows], 8)
    field_end[rows] = at[rows] + 8
    value_ok[rows] = True
    rows = np.flatnonzero(wire_type == 2)
    size = value[rows]
    value[rows] = 0
    start[rows] = field_end[rows]
    room = np.maximum(ends[rows] - start[rows], 0).astype(np.uint64)
    value_ok[rows] &= size <= room
    length[rows] = np.minimum(size, room).astype(np.int64)
    field_end[rows] += length[rows]
    ok &= value_ok & (field_end == ends)
    kind[~ok] = 0

    slow = np.flatnonzero(~ok)
    if slow.size:
        fields = wire.scan_fields(buf, starts[slow], ends[slow])
        stat_id[slow] = fields.last_value(1, wire.VARINT, slow.size)
        is_value = np.zeros(len(fields.number), dtype=bool)
        for number, expected in _VALUE_WIRE.items():
            is_value |= (fields.number == number) & (fields.wire == expected)
        rows = np.flatnonzero(is_value)
        # Rows are in wire order, so a later oneof member overwrites an earlier one.
        owner = slow[fields.message[rows]]
        kind[owner] = fields.number[rows]
        value[owner] = fields.value[rows]
        start[owner] = fields.start[rows]
        length[owner] = fields.length[rows]
    return stat_id.view(np.int64), kind, value, start, length


def text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")
