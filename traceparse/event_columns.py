"""The fields and stats of the selected events, decoded column-wise.

All selected events are joined into one buffer and every field position is
read for all of them at once (``wire.scan_fields``); stats become typed columns
by name. A stat of the wrong type is NA, never a guess.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from traceparse import wire
from traceparse.event_scan import Selected
from traceparse.sanity import within_time

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
_NUMBERS = (_DOUBLE, _UINT64, _INT64)


class DecodedEvents:
    """The fields and stats of the selected events, as columns."""

    def __init__(self, selected: Selected, stat_names: dict[int, str]) -> None:
        joined = wire.join(selected.chunks)
        self.raw = joined.raw
        self.count = len(joined)
        self.stat_names = stat_names
        fields = wire.scan_fields(joined.buf, joined.starts, joined.ends)
        offset = fields.last_value(2, 0, self.count).view(np.int64)
        self.duration_ps = fields.last_value(3, 0, self.count).view(np.int64)
        line_ps = selected.line_ts_ns * 1000  # fits: line stamps are clamped
        # Both parts within 2**62, so their sum cannot overflow; then the sum too.
        self.in_range = within_time(line_ps) & within_time(offset)
        self.time_ps = line_ps + np.where(self.in_range, offset, 0)
        self.in_range &= within_time(self.time_ps)
        self.order = selected.order
        stat_rows = fields.select(4, 2)
        self.stat_event = fields.message[stat_rows]
        payload = fields.start[stat_rows]
        stats = wire.scan_fields(joined.buf, payload, payload + fields.length[stat_rows])
        n = len(stat_rows)
        self.stat_id = stats.last_value(1, 0, n).view(np.int64)
        self.kind = np.zeros(n, dtype=np.int8)
        self.value = np.zeros(n, dtype=np.uint64)
        self.start = np.zeros(n, dtype=np.int64)
        self.length = np.zeros(n, dtype=np.int64)
        is_value = np.zeros(len(stats.number), dtype=bool)
        for kind, wire_type in _VALUE_WIRE.items():
            is_value |= (stats.number == kind) & (stats.wire == wire_type)
        rows = np.flatnonzero(is_value)
        # Rows are in wire order, so a later oneof member overwrites an earlier one.
        owner = stats.message[rows]
        self.kind[owner] = stats.number[rows]
        self.value[owner] = stats.value[rows]
        self.start[owner] = stats.start[rows]
        self.length[owner] = stats.length[rows]
        self._rows: dict[str, np.ndarray] = {}

    def _stat_rows(self, name: str) -> np.ndarray:
        # Each stat is asked for more than once (its value, then whether it had one).
        if name not in self._rows:
            ids = [k for k, n in self.stat_names.items() if n == name]
            self._rows[name] = np.flatnonzero(np.isin(self.stat_id, ids) & (self.kind > 0))
        return self._rows[name]

    def int_stat(self, name: str) -> pd.arrays.IntegerArray:
        """A stat as Int64 per event (NA where absent or not numeric)."""
        values = np.zeros(self.count, dtype=np.int64)
        present = np.zeros(self.count, dtype=bool)
        rows = self._stat_rows(name)
        kind = self.kind[rows]
        raw = self.value[rows]
        numbers = raw.view(np.int64).copy()
        doubles = raw.view(np.float64)
        # A count written as a double is used when it is a whole number within int64.
        finite = (kind == _DOUBLE) & np.isfinite(doubles) & (np.abs(doubles) < 2.0**63)
        finite[finite] = doubles[finite] == np.trunc(doubles[finite])
        numbers[finite] = doubles[finite].astype(np.int64)
        ok = np.isin(kind, (_UINT64, _INT64)) | finite
        values[self.stat_event[rows[ok]]] = numbers[ok]
        present[self.stat_event[rows[ok]]] = True
        return pd.arrays.IntegerArray(values, ~present)

    def float_stat(self, name: str) -> pd.arrays.FloatingArray:
        values = np.full(self.count, np.nan)
        rows = self._stat_rows(name)
        kind = self.kind[rows]
        raw = self.value[rows]
        numbers = np.where(
            kind == _DOUBLE,
            raw.view(np.float64),
            np.where(kind == _INT64, raw.view(np.int64), raw).astype(np.float64),
        )
        # xprof writes NaN fragmentation when nothing is free: that is "unknown".
        ok = np.isin(kind, (_DOUBLE, _UINT64, _INT64)) & np.isfinite(numbers)
        values[self.stat_event[rows[ok]]] = numbers[ok]
        present = np.zeros(self.count, dtype=bool)
        present[self.stat_event[rows[ok]]] = True
        return pd.arrays.FloatingArray(np.nan_to_num(values), ~present)

    def str_stat(self, name: str) -> pd.Categorical:
        """A stat as text per event (NA where absent or not text); refs resolve to names."""
        out = np.full(self.count, None, dtype=object)
        rows = self._stat_rows(name)
        # Refs (how TensorFlow writes repeated strings) resolve once per distinct id.
        refs = rows[self.kind[rows] == _REF]
        if refs.size:
            ids, inverse = np.unique(self.value[refs], return_inverse=True)
            names = np.array([self.stat_names.get(int(i)) for i in ids], dtype=object)
            out[self.stat_event[refs]] = names[inverse]
        # A number where text belongs is the wrong type: it stays NA.
        for row in rows[np.isin(self.kind[rows], (_STR, _BYTES))]:
            start = self.start[row]
            out[self.stat_event[row]] = text(self.raw[start : start + self.length[row]])
        return pd.Categorical(out)

    def present(self, name: str) -> np.ndarray:
        """Per event: whether it carries the stat at all (with any value)."""
        out = np.zeros(self.count, dtype=bool)
        out[self.stat_event[self._stat_rows(name)]] = True
        return out

    def memory_frame(
        self,
        rows: np.ndarray,
        is_alloc: np.ndarray,
        plane: str,
        problems: Counter[tuple[str, str]],
    ) -> pd.DataFrame:
        """The memory events among ``rows`` (a mask). A stat of the wrong type is NA,
        and an event out of time range is dropped; ``problems`` counts both."""
        columns: dict[str, object] = {
            "plane": pd.Categorical.from_codes(np.zeros(self.count, dtype=np.int8), [plane]),
            "is_allocation": is_alloc,
            "time_ps": self.time_ps,
        }
        for stat, column in INT_STATS.items():
            columns[column] = self.int_stat(stat)
        columns["fragmentation"] = self.float_stat("fragmentation")
        for stat, column in STR_STATS.items():
            columns[column] = self.str_stat(stat)
        for stat, column in [*INT_STATS.items(), *STR_STATS.items()]:
            values = columns[column]
            assert isinstance(values, pd.arrays.IntegerArray | pd.Categorical)
            wrong = rows & self.present(stat) & np.asarray(values.isna())
            if wrong.any():
                problems[stat, "type"] += int(wrong.sum())
        wrong = (
            rows & self.present("fragmentation") & ~np.isin(self._kind("fragmentation"), _NUMBERS)
        )
        if wrong.any():
            problems["fragmentation", "type"] += int(wrong.sum())
        if not self.in_range[rows].all():
            problems["time", "range"] += int((rows & ~self.in_range).sum())
            rows = rows & self.in_range
        allocator = columns["allocator"]
        assert isinstance(allocator, pd.Categorical)
        missing = np.asarray(allocator.isna())
        if missing.any():
            # TPU memory events name no allocator; xprof uses the device index.
            names = np.asarray(allocator, dtype=object)
            for stat in ("index_on_host", "device_ordinal"):
                index = self.int_stat(stat)
                fill = missing & ~np.asarray(index.isna())
                names[fill] = [str(v) for v in np.asarray(index[fill], dtype=np.int64)]
                missing &= ~fill
            columns["allocator"] = pd.Categorical(names)
        frame = pd.DataFrame(columns)
        frame["_order"] = self.order
        return frame.loc[rows].reset_index(drop=True)

    def _kind(self, name: str) -> np.ndarray:
        """Per event: the value kind of the stat (0 where absent; the last one wins)."""
        out = np.zeros(self.count, dtype=np.int8)
        rows = self._stat_rows(name)
        out[self.stat_event[rows]] = self.kind[rows]
        return out

    def marker_frame(self, names: dict[int, str], mids: np.ndarray) -> pd.DataFrame:
        # Trace(name, step_num=n, _r=1) marks a root event; Keras' callback writes
        # "Profiled batch" events with step_num only. Prefer roots when there are any.
        # A marker out of time range, or lasting less than nothing, is left out.
        has_step = ~np.asarray(self.int_stat("step_num").isna())
        has_step &= self.in_range & (self.duration_ps >= 0) & within_time(self.duration_ps)
        has_step &= within_time(self.time_ps + np.where(has_step, self.duration_ps, 0))
        is_root = has_step & ~np.asarray(self.int_stat("_r").isna())
        rows = np.flatnonzero(is_root if is_root.any() else has_step)
        step = self.int_stat("step_num")
        return pd.DataFrame(
            {
                "name": [names.get(int(m), "") for m in mids[rows]],
                "step": np.asarray(step[rows], dtype=np.int64),
                "start_ps": self.time_ps[rows],
                "end_ps": self.time_ps[rows] + self.duration_ps[rows],
            }
        )


def text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")
