"""Which allocations made during the capture hold an inventoried variable's bytes.

A variable alive before the capture never shows in it; one created during it
does, but under the op that made its buffer (``.../Initializer/zeros``, or the
eager ``StatelessRandomUniformV2`` -> ``Mul`` -> ``AddV2`` of a Keras
initializer), and one whose buffer an assign op replaced (an
``AssignAddVariableOp`` that copies because the old buffer is shared) under
that op. The inventory (``Profile.variables``) says which variables existed at
the profiler's start and stop; this module pairs them with allocations.

Variables and allocations meet in groups of one host, allocator, dtype, shape
and size (a variable's ``estimated_bytes`` is the request). In each group the
allocations are walked in time order, each variable keeping its *current
buffer* (the one before the capture, none yet, or an allocation):

- an allocation whose op is the variable's initializer (its op name holds the
  variable's path, or ``<path with _>/Initializer``) creates that variable,
  when the variable was made during the capture;
- an assign op's allocation (``Assign*VariableOp``, ``ResourceApply*``) is the
  new buffer of one variable of the group whose current buffer is freed at or
  after it (or which has none yet, or whose buffer from before the capture is
  among the capture's frees without allocation of that size): the one whose
  buffer is freed soonest;
- any other op's allocation of the exact shape and dtype creates a variable made
  during the capture that has none yet, weights first, when it is still alive
  at the end of the capture, or, for a weight, when it is an eager op's (no
  name scope: a Keras initializer runs eagerly) and an assign op's allocation
  of the group comes while it is alive (the assign that replaced it).

So each matched allocation holds its variable from its allocation
(``holds_from_ps``) until the variable's next buffer (``holds_until_ps``, NA
while it is the current one). A buffer replaced during the capture but held on
by something else is the variable's only until then: its bytes afterwards are
not the variable's, and a variable is never counted twice. A variable whose
bytes an allocation holds from ``covered_from_ps`` on is not in the memory
allocated before the capture from then on (:func:`covered_at`).

On CPU a variable smaller than 256 KiB never reaches the traced allocator
(``Profile.variables.traced``): it matches nothing and counts nowhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceparse.analysis.naming.variable_slots import (
    ASSIGNED,
    BEFORE,
    CREATED,
    Slot,
    SlotIndex,
)

NAMED_COLUMNS: dict[str, str] = {
    "variable": "object",
    "role": "category",
    "layer": "object",
    "belongs_to": "object",
    "model": "object",
    "named_by": "category",
    "holds_from_ps": "Int64",
    "holds_until_ps": "Int64",
}
COVERED_COLUMNS: dict[str, str] = {"variable": "object", "covered_from_ps": "Int64"}

# Ops that write a new buffer into an existing resource variable.
_ASSIGN = re.compile(r"^(Assign\w*VariableOp|ResourceApply\w+|ResourceScatter\w+)$")
_ROLE_ORDER = {"weight": 0, "optimizer": 1, "other": 2}
_TEXT = ["host", "allocator", "op", "op_type", "dtype", "shape"]


@dataclass(frozen=True)
class VariableMatch:
    """``named``: per allocation row (index = ``Profile.allocations``' label) holding a
    variable's bytes, the columns of ``NAMED_COLUMNS``; ``covered``: per variable row
    (index = ``Profile.variables``' label) held by an allocation of the capture, when
    from (``COVERED_COLUMNS``)."""

    named: pd.DataFrame
    covered: pd.DataFrame


def held_at_end(match: VariableMatch | None) -> pd.Index | None:
    """The allocations (``Profile.allocations``' labels) still holding a variable
    when the capture ends; None without an inventory (``match`` None)."""
    if match is None:
        return None
    return match.named.index[match.named["holds_until_ps"].isna()]


def match_variables(
    allocations: pd.DataFrame,
    variables: pd.DataFrame,
    frees: pd.DataFrame | None = None,
) -> VariableMatch:
    """Pair ``Profile.variables`` with ``Profile.allocations`` (rules in the module docstring).

    ``frees`` is ``Profile.frees_without_allocation``: a variable alive before the
    capture is replaced only where one of those frees (of at least its size, at
    or after the assign) can be its old buffer. None: not checked.
    """
    named: dict[object, dict[str, object]] = {}
    covered: dict[object, dict[str, object]] = {}
    if allocations.empty or variables.empty:
        return VariableMatch(_frame(named, NAMED_COLUMNS), _frame(covered, COVERED_COLUMNS))
    usable = variables[_matchable(variables)]
    groups = _variable_groups(usable)
    # Only requests of a variable's size can hold one: cut the table once.
    sizes = usable["estimated_bytes"].astype("int64").unique()
    sized = allocations[allocations["requested_bytes"].isin(sizes).to_numpy(dtype=bool)]
    kinds = _kinds(sized)
    assign = np.array([bool(_ASSIGN.match(k)) for k in kinds], dtype=bool)
    if usable["at_start"].all():
        # Variables from before the capture change buffers only through assigns.
        sized, kinds, assign = sized[assign], kinds[assign], assign[assign]
    order = np.argsort(sized["alloc_ps"].to_numpy(dtype=np.int64), kind="stable")
    sized, kinds, assign = sized.iloc[order], kinds[order], assign[order]
    rows = list(
        zip(
            sized.index.tolist(),
            _names(sized["op"]),
            kinds.tolist(),
            assign.tolist(),
            sized["alloc_ps"].astype("int64").tolist(),
            [None if pd.isna(t) else int(t) for t in sized["free_ps"].tolist()],
            _names(sized["shape"]),
            _names(sized["dtype"]),
            strict=True,
        )
    )
    # One pass groups the candidates by where and how much they asked for, and what
    # (shape and dtype, or neither), in time order: each group then reads only its own.
    by_kind: dict[tuple[str | None, str | None, int, str | None, str | None], list[int]] = {}
    where = zip(
        _names(sized["host"]), _names(sized["allocator"]), sized["requested_bytes"], strict=True
    )
    for position, (host, allocator, requested) in enumerate(where):
        shape, dtype = rows[position][6], rows[position][7]
        key = (host, allocator, int(requested), shape, dtype)
        by_kind.setdefault(key, []).append(position)
    spares = _free_times(frees)
    for (host, allocator, dtype, shape, size), slots in groups.items():
        exact = by_kind.get((host, allocator, size, shape, dtype), [])
        bare = by_kind.get((host, allocator, size, None, None), [])
        positions = sorted(exact + bare) if exact and bare else exact or bare
        before = all(slot.at_start for slot in slots)
        candidates = [rows[i] for i in positions]
        if before:  # only an assign can give a variable from before a new buffer
            candidates = [row for row in candidates if row[3]]
        if candidates:
            spare = _spare_frees(spares, host, allocator, size)
            _walk(slots, candidates, spare, named, covered)
    return VariableMatch(_frame(named, NAMED_COLUMNS), _frame(covered, COVERED_COLUMNS))


def _names(column: pd.Series) -> list[str | None]:
    """A column's values as strings, None where missing."""
    return [None if pd.isna(v) else str(v) for v in column.astype(object).tolist()]


GroupKey = tuple[str | None, str | None, str | None, str | None, int]


def _variable_groups(usable: pd.DataFrame) -> dict[GroupKey, list[Slot]]:
    """Variables by (host, allocator, dtype, shape, bytes), each group weights first,
    then optimizer slots, then the rest, by path."""
    groups: dict[GroupKey, list[Slot]] = {}
    ordered = usable.assign(
        _order=usable["role"].astype(object).map(_ROLE_ORDER).fillna(9)
    ).sort_values(["_order", "path"], kind="stable")
    keys = zip(
        *(_names(ordered[c]) for c in ("host", "allocator", "dtype", "shape")),
        ordered["estimated_bytes"].astype("int64").tolist(),
        strict=True,
    )
    # Only the columns a slot reads: to_dict costs per cell.
    records = ordered[["path", "role", "layer", "belongs_to", "model", "at_start"]].to_dict(
        "records"
    )
    for label, key, row in zip(ordered.index, keys, records, strict=True):
        if all(part is not None for part in key):
            groups.setdefault(key, []).append(_slot(label, row))
    return groups


def named_at(named: pd.DataFrame, time_ps: int) -> pd.DataFrame:
    """The rows of ``VariableMatch.named`` whose allocation is its variable's buffer at
    ``time_ps`` (the allocation must also be live then: ``Profile.live_at_peak``)."""
    start = named["holds_from_ps"].to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).max)
    end = named["holds_until_ps"].to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).max)
    return named[(start <= time_ps) & (time_ps < end)]


def covered_at(variables: pd.DataFrame, covered: pd.DataFrame, time_ps: int) -> np.ndarray:
    """Per row of ``variables``: True when an allocation of the capture holds its bytes at
    ``time_ps``, so they are not part of what was allocated before the capture."""
    since = covered["covered_from_ps"].reindex(variables.index)
    return since.notna().to_numpy(dtype=bool) & (
        since.to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).max) <= time_ps
    )


# -- the walk ---------------------------------------------------------------------------


def _matchable(variables: pd.DataFrame) -> np.ndarray:
    """Variables that can own a traced allocation: alive at the stop, traced, sized."""
    traced = variables["traced"] if "traced" in variables else variables["allocator"].notna()
    return (
        variables["at_stop"].to_numpy(dtype=bool)
        & traced.to_numpy(dtype=bool)
        & variables["allocator"].notna().to_numpy(dtype=bool)
        & variables["estimated_bytes"].notna().to_numpy(dtype=bool)
        & variables["shape"].notna().to_numpy(dtype=bool)
    )


def _kinds(allocations: pd.DataFrame) -> np.ndarray:
    """Per allocation its op's kind: its type, else the last part of its name (worked
    out once per distinct name, not per row)."""
    ops = allocations["op"].astype("category")
    types = allocations["op_type"].astype("category")
    last = [str(op).rsplit("/", 1)[-1] for op in ops.cat.categories]
    by_name = np.asarray([*last, ""], dtype=object)[ops.cat.codes.to_numpy()]
    typed = np.asarray([*map(str, types.cat.categories), ""], dtype=object)
    by_type = typed[types.cat.codes.to_numpy()]
    return np.where(by_type != "", by_type, by_name)


def _free_times(frees: pd.DataFrame | None) -> dict[object, tuple[np.ndarray, np.ndarray]] | None:
    """Per (host, allocator): the sizes and free times of buffers from before the capture."""
    if frees is None:
        return None
    keys = frees[["host", "allocator"]].astype(object)
    out = {}
    for key, rows in keys.groupby(["host", "allocator"], sort=False, dropna=False).indices.items():
        mine = frees.iloc[rows]
        out[key] = (
            mine["allocated_bytes"].to_numpy(dtype=np.int64, na_value=-1),
            mine["free_ps"].to_numpy(dtype=np.int64, na_value=-1),
        )
    return out


def _spare_frees(
    spares: dict[object, tuple[np.ndarray, np.ndarray]] | None,
    host: object,
    allocator: object,
    size: int,
) -> list[int] | None:
    """Free times of buffers from before the capture that may have held a variable of
    ``size`` bytes on this allocator; None when unknown."""
    if spares is None:
        return None
    sizes, times = spares.get((host, allocator), (np.zeros(0), np.zeros(0)))
    return sorted(int(t) for t in times[(sizes >= size) & (times >= 0)])


# A candidate allocation: label, op, kind, is an assign, alloc_ps, free_ps, shape, dtype.
Candidate = tuple[object, str | None, str, bool, int, int | None, str | None, str | None]


def _walk(
    slots: list[Slot],
    candidates: list[Candidate],
    spare: list[int] | None,
    named: dict[object, dict[str, object]],
    covered: dict[object, dict[str, object]],
) -> None:
    """The group's allocations in time order, each claimed by at most one variable."""
    assigns = np.array(
        sorted(row[4] for row in candidates if row[3] and row[6] is not None), dtype=np.int64
    )
    index = SlotIndex(slots)
    for label, op_name, _kind, is_assign, when, free, shape, _dtype in candidates:
        op = op_name or ""
        has_shape = shape is not None
        own = index.initialized_by(op)
        if own is not None:
            index.claim(own, label, when, free, CREATED, named, covered)
        elif is_assign and has_shape:
            slot = index.replaced(when, spare)
            if slot is not None:
                index.claim(slot, label, when, free, ASSIGNED, named, covered)
        elif has_shape and (free is None or _replaced_later(op, when, free, assigns)):
            # Only a weight's initializer runs eagerly (a buffer freed in the capture).
            fresh = index.fresh.first() if free is None else index.fresh_weights.first()
            if fresh is not None:
                index.claim(fresh, label, when, free, CREATED, named, covered)


def _replaced_later(op: str, when: int, free: int, assigns: np.ndarray) -> bool:
    """An eager op's buffer (no name scope) alive when an assign of its group came."""
    if "/" in op:
        return False
    first = int(np.searchsorted(assigns, when, side="right"))
    return first < len(assigns) and int(assigns[first]) <= free


def _slot(label: object, row: dict[str, object]) -> Slot:
    path = str(row["path"])
    # Keras names a slot's initializer after the slot's path; an older optimizer
    # after the variable with "/" as "_".
    names = tuple(sorted({path, path.replace("/", "_")}))
    facts: dict[str, object] = {
        "variable": path,
        "role": _text(row["role"]),
        "layer": _text(row["layer"]),
        "belongs_to": _text(row["belongs_to"]),
        "model": _text(row["model"]),
    }
    at_start = bool(row["at_start"])
    return Slot(label, facts, at_start, names, BEFORE if at_start else None)


def _text(value: object) -> str | None:
    return None if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def _frame(rows: dict[object, dict[str, object]], columns: dict[str, str]) -> pd.DataFrame:
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(columns))
    return frame.astype(columns)
