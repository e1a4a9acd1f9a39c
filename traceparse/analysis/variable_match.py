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

CREATED = "inventory: created during capture"
ASSIGNED = "inventory: assigned during capture"

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
_BEFORE = object()  # a current buffer allocated before the capture


@dataclass(frozen=True)
class VariableMatch:
    """``named``: per allocation row (index = ``Profile.allocations``' label) holding a
    variable's bytes, the columns of ``NAMED_COLUMNS``; ``covered``: per variable row
    (index = ``Profile.variables``' label) held by an allocation of the capture, when
    from (``COVERED_COLUMNS``)."""

    named: pd.DataFrame
    covered: pd.DataFrame


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
    if not allocations.empty and not variables.empty:
        usable = variables[_matchable(variables)]
        keys = ["host", "allocator", "dtype", "shape", "estimated_bytes"]
        groups = usable.assign(**{k: usable[k].astype(object) for k in keys}).groupby(
            keys, sort=False
        )
        # Only requests of a variable's size can hold one: cut the table once.
        sizes = usable["estimated_bytes"].astype("int64").unique()
        sized = allocations[allocations["requested_bytes"].isin(sizes).to_numpy(dtype=bool)]
        sized = sized.assign(**{k: sized[k].astype(object) for k in _TEXT})
        for (host, allocator, dtype, shape, size), group in groups:
            candidates = _candidates(sized, host, allocator, dtype, shape, int(size))
            if candidates.empty:
                continue
            spare = _spare_frees(frees, host, allocator, int(size))
            _walk(group, candidates, spare, named, covered)
    return VariableMatch(_frame(named, NAMED_COLUMNS), _frame(covered, COVERED_COLUMNS))


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


def _candidates(
    allocations: pd.DataFrame,
    host: object,
    allocator: object,
    dtype: object,
    shape: object,
    size: int,
) -> pd.DataFrame:
    """The group's allocations: its exact request, and its shape and dtype (or none
    recorded: an initializer's buffer often has neither)."""
    a = allocations
    same = (
        (a["host"].astype(object) == host)
        & (a["allocator"].astype(object) == allocator)
        & (a["requested_bytes"] == size).fillna(False)
    )
    mine = a[same.to_numpy(dtype=bool)]
    if mine.empty:
        return mine
    shaped = (mine["shape"].astype(object) == shape) & (mine["dtype"].astype(object) == dtype)
    unshaped = mine["shape"].isna() & mine["dtype"].isna()
    return mine[(shaped.fillna(False) | unshaped).to_numpy(dtype=bool)].sort_values(
        "alloc_ps", kind="stable"
    )


def _spare_frees(
    frees: pd.DataFrame | None, host: object, allocator: object, size: int
) -> list[int] | None:
    """Free times of buffers from before the capture that may have held a variable of
    ``size`` bytes on this allocator; None when unknown."""
    if frees is None:
        return None
    mine = frees[
        (frees["host"].astype(object) == host)
        & (frees["allocator"].astype(object) == allocator)
        & (frees["allocated_bytes"] >= size).fillna(False)
    ]
    return sorted(int(t) for t in mine["free_ps"].dropna())


@dataclass
class _Slot:
    """One variable of a group and its current buffer during the walk."""

    row: object  # the variable's row label
    facts: dict[str, object]
    at_start: bool
    initializer: re.Pattern[str]
    buffer: object = None  # an allocation's label, _BEFORE, or None (none yet)
    buffer_free: int | None = None  # when the current buffer is freed (None: never)


def _walk(
    group: pd.DataFrame,
    candidates: pd.DataFrame,
    spare: list[int] | None,
    named: dict[object, dict[str, object]],
    covered: dict[object, dict[str, object]],
) -> None:
    ordered = group.assign(
        _order=group["role"].astype(object).map(_ROLE_ORDER).fillna(9)
    ).sort_values(["_order", "path"], kind="stable")
    slots = [_slot(label, row) for label, row in ordered.iterrows()]
    kinds = (
        candidates["op_type"]
        .astype(object)
        .fillna(candidates["op"].astype(object).fillna("").str.rsplit("/", n=1).str[-1])
    )
    assigns = np.sort(
        candidates.loc[
            (kinds.str.match(_ASSIGN) & candidates["shape"].notna()).to_numpy(dtype=bool),
            "alloc_ps",
        ].to_numpy(dtype=np.int64, na_value=0)
    )
    for label, alloc in candidates.iterrows():
        op = "" if pd.isna(alloc["op"]) else str(alloc["op"])
        op_type = "" if pd.isna(alloc["op_type"]) else str(alloc["op_type"])
        kind = op_type or op.rsplit("/", 1)[-1]
        when = int(alloc["alloc_ps"])
        free = None if pd.isna(alloc["free_ps"]) else int(alloc["free_ps"])
        own = [s for s in slots if s.buffer is None and not s.at_start and s.initializer.search(op)]
        if own:
            _claim(own[0], label, when, free, CREATED, named, covered)
        elif _ASSIGN.match(kind) and pd.notna(alloc["shape"]):
            slot = _replaced(slots, when, spare)
            if slot is not None:
                _claim(slot, label, when, free, ASSIGNED, named, covered)
        elif pd.notna(alloc["shape"]) and (
            free is None or _replaced_later(op, when, free, assigns)
        ):
            fresh = [s for s in slots if s.buffer is None and not s.at_start]
            if free is not None:  # only a weight's initializer runs eagerly
                fresh = [s for s in fresh if s.facts["role"] == "weight"]
            if fresh:
                _claim(fresh[0], label, when, free, CREATED, named, covered)


def _replaced_later(op: str, when: int, free: int, assigns: np.ndarray) -> bool:
    """An eager op's buffer (no name scope) alive when an assign of its group came."""
    if "/" in op:
        return False
    first = int(np.searchsorted(assigns, when, side="right"))
    return first < len(assigns) and int(assigns[first]) <= free


def _slot(label: object, row: pd.Series) -> _Slot:
    path = str(row["path"])
    # Keras names a slot's initializer after the slot's path; an older optimizer
    # after the variable with "/" as "_".
    names = {re.escape(path), re.escape(path.replace("/", "_"))}
    pattern = re.compile(r"(^|/)(" + "|".join(sorted(names)) + r")(/|$)")
    facts: dict[str, object] = {
        "variable": path,
        "role": _text(row["role"]),
        "layer": _text(row["layer"]),
        "belongs_to": _text(row["belongs_to"]),
        "model": _text(row["model"]),
    }
    at_start = bool(row["at_start"])
    return _Slot(label, facts, at_start, pattern, _BEFORE if at_start else None)


def _replaced(slots: list[_Slot], when: int, spare: list[int] | None) -> _Slot | None:
    """The variable an assign at ``when`` gave a new buffer: one whose current buffer is
    freed at or after it (soonest first), then one from before the capture with a
    matching free, then one with no buffer yet."""
    freed = [
        s
        for s in slots
        if s.buffer is not None
        and s.buffer is not _BEFORE
        and s.buffer_free is not None
        and s.buffer_free >= when
    ]
    if freed:
        return min(freed, key=lambda s: s.buffer_free or 0)
    before = [s for s in slots if s.buffer is _BEFORE]
    if before:
        if spare is None:
            return before[0]
        later = [t for t in spare if t >= when]
        if later:
            spare.remove(later[0])
            return before[0]
    fresh = [s for s in slots if s.buffer is None and not s.at_start]
    return fresh[0] if fresh else None


def _claim(
    slot: _Slot,
    label: object,
    when: int,
    free: int | None,
    how: str,
    named: dict[object, dict[str, object]],
    covered: dict[object, dict[str, object]],
) -> None:
    if slot.buffer is not None and slot.buffer is not _BEFORE:
        named[slot.buffer]["holds_until_ps"] = when
    named[label] = {**slot.facts, "named_by": how, "holds_from_ps": when, "holds_until_ps": None}
    covered.setdefault(slot.row, {"variable": slot.facts["variable"], "covered_from_ps": when})
    slot.buffer = label
    slot.buffer_free = free


def _text(value: object) -> str | None:
    return None if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def _frame(rows: dict[object, dict[str, object]], columns: dict[str, str]) -> pd.DataFrame:
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(columns))
    return frame.astype(columns)
