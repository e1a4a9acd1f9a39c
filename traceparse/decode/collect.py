"""Build the memory-event, step-marker and op-time tables from decoded batches.

Each batch of decoded events leaves its rows here as numpy arrays; every table
is made once, at the end, in its final order and dtypes. Nothing pandas is made
per batch: a frame or a categorical costs pandas about a millisecond however
few its rows, and batches are many.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from traceparse.decode.fields import INT_STATS, STR_STATS, BatchLabels, DecodedEvents, StatLayout
from traceparse.decode.limits import within_time
from traceparse.decode.trace import (
    EVENT_COLUMNS,
    OP_TIME_COLUMNS,
    STEP_MARKER_COLUMNS,
    categorical_take,
    codes_used,
    empty_frame,
    masked,
)


class Labels:
    """Distinct text values, each with a code that holds across batches."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._codes: dict[str, int] = {}
        # Per plane's stat layout: the code of each shared label looked up so far
        # (-2 where not yet), so a plane's stat names are looked up once each.
        self._shared: dict[StatLayout, np.ndarray] = {}

    def encode(self, codes: np.ndarray, labels: Sequence[str | None] | BatchLabels) -> np.ndarray:
        """Batch codes into ``labels`` (-1 for none) as codes into these values;
        a None label is none too. Only the labels used are looked up."""
        if isinstance(labels, BatchLabels):
            return self._encode_batch(codes, labels)
        used, inverse = codes_used(codes, len(labels))
        mapping = np.full(used.size, -1, dtype=np.int64)
        rest = np.flatnonzero(used >= 0)
        mapping[rest] = [self.code(labels[i]) for i in used[rest].tolist()]
        return mapping[inverse]

    def _encode_batch(self, codes: np.ndarray, labels: BatchLabels) -> np.ndarray:
        """``encode`` for a decoded batch: a code below ``labels.shared`` is a stat
        name of the plane, whose code here is kept per plane (``_shared``), so
        after the first batches it is one lookup per row."""
        known = self._shared.get(labels.layout)
        if known is None:
            known = self._shared[labels.layout] = np.full(labels.shared + 1, -2, np.int64)
            known[-1] = -1  # code -1 (none) looks up the last entry
        shared = np.where(codes < labels.shared, codes, -1)
        out = known[shared]
        new = out == -2
        if new.any():
            for i in np.unique(shared[new]).tolist():
                known[i] = self.code(labels[i])
            out = known[shared]
        inline = np.flatnonzero(codes >= labels.shared)
        if inline.size:
            used, inverse = np.unique(codes[inline], return_inverse=True)
            out[inline] = np.array([self.code(labels[i]) for i in used.tolist()])[inverse]
        return out

    def code(self, label: str | None) -> int:
        """``label``'s code, given on first sight; -1 for None."""
        if label is None:
            return -1
        code = self._codes.get(label)
        if code is None:
            code = self._codes[label] = len(self.values)
            self.values.append(label)
        return code

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        return categorical_take(np.array(self.values, dtype=object), codes)


class _Columns:
    """Named numpy columns, gathered in parts."""

    def __init__(self) -> None:
        self.parts: defaultdict[str, list[np.ndarray]] = defaultdict(list)
        self.rows = 0

    def add(self, columns: dict[str, np.ndarray]) -> None:
        for name, values in columns.items():
            self.parts[name].append(values)
        self.rows += len(next(iter(columns.values())))

    def joined(self) -> dict[str, np.ndarray]:
        return {name: np.concatenate(parts) for name, parts in self.parts.items()}


class _Store:
    """Named numpy columns of a known capacity, filled batch by batch in place:
    no part per batch to keep, join or free (freed parts leave the C heap
    fragmented, so the process keeps their memory)."""

    def __init__(self, capacity: int, dtypes: dict[str, type]) -> None:
        # np.empty: pages never written are never resident.
        self.columns: dict[str, np.ndarray] = {
            name: np.empty(capacity, dtype) for name, dtype in dtypes.items()
        }
        self.rows = 0

    def add(self, columns: dict[str, np.ndarray | int]) -> int:
        """Write a batch's rows (arrays of one length, or scalars for all of them)."""
        size = next(len(v) for v in columns.values() if isinstance(v, np.ndarray))
        lo, self.rows = self.rows, self.rows + size
        for name, values in columns.items():
            self.columns[name][lo : self.rows] = values
        return size

    def take(self, name: str, order: np.ndarray | None = None) -> np.ndarray:
        """Column ``name``'s rows (in ``order`` if given), the column let go: the
        table's columns are made one at a time so that peak memory stays near
        one copy."""
        values = self.columns.pop(name)
        if order is not None:
            return values[order]
        # Full columns are handed over as they are; others are cut to their rows
        # (a copy, so the unused capacity goes).
        return values if len(values) == self.rows else values[: self.rows].copy()


def _event_dtypes() -> dict[str, type]:
    dtypes: dict[str, type] = {}
    for column in INT_STATS.values():
        dtypes[column], dtypes[f"{column}.valid"] = np.int64, np.bool_
    dtypes["fragmentation"], dtypes["fragmentation.valid"] = np.float64, np.bool_
    # Codes into Labels: a capture has far fewer than 2**31 distinct strings.
    dtypes.update(dict.fromkeys(STR_STATS.values(), np.int32))
    dtypes.update(is_allocation=np.bool_, time_ps=np.int64, _plane=np.int32, _order=np.int64)
    return dtypes


class MemoryEvents:
    """The memory events of a capture, gathered batch by batch into columns of
    ``capacity`` rows (at least the events that will be added); ``frame()`` is
    the events table (``trace.EVENT_COLUMNS``) in time order."""

    def __init__(self, problems: Counter[tuple[str, str]], capacity: int) -> None:
        # (stat, problem) -> memory events with it; said once per kind at the end.
        self.problems = problems
        self._columns = _Store(capacity, _event_dtypes())
        self._labels = {"plane": Labels(), **{column: Labels() for column in STR_STATS.values()}}
        self._plane_codes: dict[int, int] = {}  # plane index -> code in "plane" labels

    def add(
        self,
        decoded: DecodedEvents,
        is_memory: np.ndarray,
        is_allocation: np.ndarray,
        plane: str,
        plane_index: int,
    ) -> None:
        """The events of ``decoded`` where ``is_memory``. A stat of the wrong type is
        NA, and an event out of time range is left out; ``problems`` counts both."""
        self._count_out_of_range(is_memory & ~decoded.in_range)
        rows = np.flatnonzero(is_memory & decoded.in_range)
        # Each value is picked as soon as it is read: a batch's temporaries stay small.
        picked: dict[str, np.ndarray | int] = {}
        for stat, column in INT_STATS.items():
            values, valid = decoded.int_stat(stat)
            self._count(stat, is_memory & decoded.present(stat) & ~valid)
            picked[column], picked[f"{column}.valid"] = values[rows], valid[rows]
        values, valid = decoded.float_stat("fragmentation")
        wrong = decoded.present("fragmentation") & ~decoded.is_number("fragmentation")
        self._count("fragmentation", is_memory & wrong)
        picked["fragmentation"], picked["fragmentation.valid"] = values[rows], valid[rows]
        codes: dict[str, np.ndarray] = {}
        for stat, column in STR_STATS.items():
            batch_codes, labels = decoded.str_codes(stat)
            codes[column] = self._labels[column].encode(batch_codes, labels)
            self._count(stat, is_memory & decoded.present(stat) & (codes[column] < 0))
        self._name_devices(decoded, codes["allocator"], is_memory)
        for column, values in codes.items():
            picked[column] = values[rows]
        self._plane_codes.setdefault(plane_index, self._labels["plane"].code(plane))
        picked["_plane"] = plane_index
        picked["is_allocation"] = is_allocation[rows]
        picked["time_ps"] = decoded.time_ps[rows]
        picked["_order"] = decoded.order[rows]
        self._columns.add(picked)

    def _count(self, stat: str, wrong: np.ndarray) -> None:
        count = int(np.count_nonzero(wrong))
        if count:
            self.problems[stat, "type"] += count

    def _count_out_of_range(self, rows: np.ndarray) -> None:
        count = int(np.count_nonzero(rows))
        if count:
            self.problems["time", "range"] += count

    def _name_devices(
        self, decoded: DecodedEvents, allocator: np.ndarray, is_memory: np.ndarray
    ) -> None:
        """TPU memory events name no allocator: xprof uses the device index."""
        missing = is_memory & (allocator < 0)
        for stat in ("index_on_host", "device_ordinal"):
            if not missing.any():
                return
            values, valid = decoded.int_stat(stat)
            fill = missing & valid
            numbers, inverse = np.unique(values[fill], return_inverse=True)
            labels = [str(number) for number in numbers.tolist()]
            allocator[fill] = self._labels["allocator"].encode(inverse, labels)
            missing &= ~fill

    def frame(self) -> pd.DataFrame:
        if not self._columns.rows:
            return empty_frame(EVENT_COLUMNS)
        columns = self._columns
        # Time order; ties keep the file's order (plane, line, position in line).
        time_ps = columns.take("time_ps")
        planes = columns.take("_plane")
        order = _time_order(time_ps, planes, columns.take("_order"))
        table: dict[str, object] = {"time_ps": time_ps if order is None else time_ps[order]}
        del time_ps
        plane_codes = np.full(max(self._plane_codes) + 1, -1, dtype=np.int64)
        plane_codes[list(self._plane_codes)] = list(self._plane_codes.values())
        planes = planes if order is None else planes[order]
        table["plane"] = self._labels["plane"].categorical(plane_codes[planes])
        del planes
        for name, dtype in EVENT_COLUMNS.items():
            if name in table:
                continue
            if dtype == "category":
                table[name] = self._labels[name].categorical(columns.take(name, order))
            elif dtype in ("Int64", "Float64"):
                values, valid = columns.take(name, order), columns.take(f"{name}.valid", order)
                np.logical_not(valid, out=valid)  # the mask, in place
                table[name] = masked(values, valid)
            else:
                table[name] = columns.take(name, order)
        return pd.DataFrame({name: table[name] for name in EVENT_COLUMNS}, copy=False)


def _time_order(time_ps: np.ndarray, planes: np.ndarray, order: np.ndarray) -> np.ndarray | None:
    """The rows sorted by time, then plane, then file order; None when they are
    in that order already (one line of events in time order, as a long capture's
    allocator line often is): a check in linear time instead of a sort."""
    if time_ps.size < 2:
        return None
    # Times lie within +-2**62 (limits.within_time), so their differences fit.
    later = np.diff(time_ps)
    if not (later >= 0).all():
        return np.lexsort([order, planes, time_ps])
    tied = np.flatnonzero(later == 0)
    plane_step = planes[tied + 1].astype(np.int64) - planes[tied]
    in_order = (plane_step > 0) | ((plane_step == 0) & (order[tied + 1] >= order[tied]))
    return None if in_order.all() else np.lexsort([order, planes, time_ps])


class StepMarkers:
    """Events that carry a step number, gathered batch by batch; ``frame()`` is
    the step-marker table (``trace.STEP_MARKER_COLUMNS``)."""

    def __init__(self) -> None:
        self._columns = _Columns()
        self._names = Labels()

    def add(self, decoded: DecodedEvents, names: dict[int, str], metadata_ids: np.ndarray) -> None:
        # A marker out of time range, or lasting less than nothing, is left out.
        step, has_step = decoded.int_stat("step_num")
        duration = decoded.duration_ps
        has_step = has_step & decoded.in_range & (duration >= 0) & within_time(duration)
        has_step &= within_time(decoded.time_ps + np.where(has_step, duration, 0))
        rows = np.flatnonzero(has_step)
        if not rows.size:
            return
        ids, inverse = np.unique(metadata_ids[rows], return_inverse=True)
        labels = [names.get(i, "") for i in ids.view(np.int64).tolist()]  # keys are int64
        start = decoded.time_ps[rows]
        self._columns.add(
            {
                "name": self._names.encode(inverse, labels),
                "step": step[rows],
                "start_ps": start,
                "end_ps": start + duration[rows],
                "root": decoded.int_stat("_r")[1][rows],
            }
        )

    def frame(self) -> pd.DataFrame:
        if not self._columns.rows:
            return empty_frame(STEP_MARKER_COLUMNS)
        columns = self._columns.joined()
        # Trace(name, step_num=n, _r=1) marks a root event; Keras' callback writes
        # "Profiled batch" events with step_num only. Prefer roots when there are any.
        root = columns["root"]
        rows = np.flatnonzero(root) if root.any() else np.arange(root.size)
        rows = rows[np.lexsort([columns["step"][rows], columns["start_ps"][rows]])]
        return pd.DataFrame(
            {
                "name": self._names.categorical(columns["name"][rows]),
                "step": columns["step"][rows],
                "start_ps": columns["start_ps"][rows],
                "end_ps": columns["end_ps"][rows],
            }
        )


def op_time_table(parts: Iterable[tuple[list[str], np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """The op-time table (``trace.OP_TIME_COLUMNS``) from (op names, counts,
    total_ps) per plane: one row per op name, summed, sorted by name."""
    names: list[str] = []
    counts, totals = [], []
    for part_names, part_counts, part_totals in parts:
        names.extend(part_names)
        counts.append(part_counts)
        totals.append(part_totals)
    if not names:
        return empty_frame(OP_TIME_COLUMNS)
    distinct = sorted(set(names))
    position = {name: i for i, name in enumerate(distinct)}
    codes = np.fromiter(map(position.__getitem__, names), dtype=np.intp, count=len(names))
    count = np.zeros(len(distinct), dtype=np.int64)
    total = np.zeros(len(distinct), dtype=np.int64)
    np.add.at(count, codes, np.concatenate(counts))
    np.add.at(total, codes, np.concatenate(totals))
    op = pd.Series(distinct, dtype=object)  # as OP_TIME_COLUMNS says, not pandas' str
    return pd.DataFrame({"op": op, "count": count, "total_ps": total}, copy=False)
