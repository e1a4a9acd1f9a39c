"""Every byte at each allocator's peak, one row per holder: the table the views group.

``breakdown_table`` lists, for every allocator of every host, what holds the
bytes in use at its peak (``Profile.peak``). The ``holder`` of a row is one of

- ``allocation``: an allocation made during the capture and live at the peak;
- ``xla_buffer``: an HLO buffer live inside a linked XLA temp slab at its
  program's own peak (``analysis/xla.py``);
- ``xla_value``: the value a program left in a linked output or parameter
  allocation (``tables/xla_link.py``);
- ``xla_slack``: the rest of a linked slab;
- ``padding``: what the allocator added to an allocation's request;
- ``variable``: an inventoried variable standing for bytes from before the
  capture (``Profile.variables``);
- ``xla_parameter``: an XLA entry parameter standing for such bytes (no
  inventory; ``analysis/xla_params.py``);
- ``before_capture``: the bytes from before the capture nothing names
  (negative when the capture lost frees);
- ``reserved``: the allocator's reservation counter.

Each row's ``part`` is the ``attribution`` column its bytes belong to, so per
allocator the rows sum exactly to ``in_use_bytes`` and every view is a
group-by: ``attribution`` pivots ``bytes`` by ``part``, the live-at-peak
columns of ``ops`` and ``scopes`` group on ``op`` and the ``scope`` prefix,
``layers`` groups on ``layer`` and ``role``. Rows of one live thing (an
allocation's tensor and its padding, a slab's slack and padding) share an
``item``; ``allocation`` is the row in ``Profile.allocations``.

Bytes from before the capture are named largest first while they fit in
what the allocator's counter says was held from before: inventoried
variables (``attribution.counted_variables``), else the XLA parameters that
stand for distinct buffers; the rest is ``before_capture``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.attribution import counted_variables, split_bytes
from traceparse.analysis.naming import (
    BEFORE_CAPTURE,
    NO_TF_OP,
    OTHER,
    RESERVED,
    XLA_SLAB,
    KnownNames,
    VariableMatch,
    covered_at,
    named_at,
    parameter_owners,
    place,
    shape_key,
    variable_owner,
)
from traceparse.tables.contracts import declare

# Holders made during the capture (they have an op and a step), then the rest.
INSIDE = ("allocation", "xla_buffer", "xla_value", "xla_slack", "padding")
HOLDERS = (*INSIDE, "variable", "xla_parameter", "before_capture", "reserved")
# How a row's name was found.
BY_EVENT = "allocator event"
BY_HLO = "hlo metadata"
BY_VALUE = "program value"
BY_INVENTORY = "inventory"
BY_READERS = "parameter readers"

_COLUMNS = [
    "host",
    "allocator",
    "holder",
    "part",
    "bytes",
    "item",
    "allocation",
    "op",
    "op_type",
    "scope",
    "layer",
    "role",
    "replica",
    "dtype",
    "shape",
    "estimated_bytes",
    "requested_bytes",
    "allocated_bytes",
    "xla_program",
    "xla_buffer",
    "variable",
    "step",
    "named_by",
    # The user's line and recorded stack (docs/sources.md); filled by tables/sources.py.
    "source",
    "stack",
]
# Every row says what holds how many bytes, in which part, where it goes.
_ALWAYS = {"host", "holder", "part", "bytes", "item", "layer", "role"}
BREAKDOWN = declare("breakdown", _COLUMNS, [c for c in _COLUMNS if c not in _ALWAYS])

_ALLOCATION_PARTS = ("shape_explained_bytes", "shape_unknown_bytes", "unexplained_request_bytes")


def breakdown_table(
    peak: pd.DataFrame,
    live: pd.DataFrame,
    slabs: pd.DataFrame,
    known: KnownNames,
    shapes: dict[str, str],
    variables: pd.DataFrame | None = None,
    parameters: pd.DataFrame | None = None,
    matched: VariableMatch | None = None,
) -> pd.DataFrame:
    """One row per holder of bytes at each peak row's instant.

    ``live`` is ``live_at_peak`` (index: rows of ``allocations``), ``slabs`` the
    linked slabs' buffer, value and slack rows (``analysis/xla_live.py``),
    ``known`` and ``shapes`` the names ``analysis/layer_owners.py`` learnt,
    ``variables`` the inventory (None without one), ``parameters`` the XLA
    parameters standing for distinct buffers (None when not measured),
    ``matched`` the allocations of the capture that hold inventoried variables
    (``analysis/variable_match.py``).
    """
    if peak.empty:
        return BREAKDOWN.empty()
    inside = _inside_rows(live, slabs)
    place(inside, known, shapes)
    for column in ("variable", "xla_buffer"):
        if column not in inside:
            inside[column] = pd.Series(None, index=inside.index, dtype=object)
    if len(inside):
        # A slab's slack and its padding are the program's bytes, no layer's or op's.
        holder = inside["holder"].to_numpy(dtype=object)
        slabs_live = inside.loc[holder == "xla_slack", "allocation"]
        slab = (holder == "xla_slack") | (
            (holder == "padding") & inside["allocation"].isin(slabs_live).to_numpy(dtype=bool)
        )
        inside.loc[slab, "layer"], inside.loc[slab, "role"] = XLA_SLAB, OTHER
    held = _held_by_allocator(inside)
    rows: list[dict[str, Any]] = []
    for p in peak.itertuples(index=False):
        host, allocator = p.host, p.allocator
        heap = 0 if pd.isna(p.heap_bytes) else int(p.heap_bytes)
        budget = heap - held.get((_key(host), _key(allocator)), 0)
        named: list[dict[str, Any]] = []
        if variables is not None:
            counted = counted_variables(variables)
            if matched is not None and len(inside):
                _name_variables(inside, variables, matched, p, known)
                counted &= ~covered_at(variables, matched.covered, int(p.time_ps))
            named = _variable_rows(variables[counted], host, allocator, budget, known)
        elif parameters is not None:
            named = parameter_rows(parameters, host, allocator, budget, known)
        rest = budget - sum(int(r["bytes"]) for r in named)
        reserved = 0 if pd.isna(p.reserved_bytes) else int(p.reserved_bytes)
        base = {"host": host, "allocator": allocator, "role": OTHER, "replica": None}
        rows += [{**base, **r} for r in named]
        rows.append(
            {**base, "holder": "before_capture", "part": "before_capture_bytes", "bytes": rest}
        )
        rows[-1]["layer"] = BEFORE_CAPTURE
        rows.append(
            {
                **base,
                "holder": "reserved",
                "part": "reserved_bytes",
                "bytes": reserved,
                "layer": RESERVED,
            }
        )
    before = pd.DataFrame(rows)
    before["replica"] = pd.array([pd.NA] * len(before), dtype="Int64")
    if len(inside):
        inside["replica"] = inside["replica"].astype("Int64")
    first = int(inside["item"].max()) + 1 if len(inside) else 0
    before["item"] = np.arange(first, first + len(before), dtype=np.int64)
    table = pd.concat([inside, before], ignore_index=True) if len(inside) else before
    for column in BREAKDOWN.columns:
        if column not in table:
            table[column] = None
    table = table.astype({c: object for c in ("host", "allocator")})
    return table[list(BREAKDOWN.columns)]


def _key(value: object) -> object:
    return None if value is None or value is pd.NA or value != value else value


def _held_by_allocator(inside: pd.DataFrame) -> dict[tuple[object, object], int]:
    if inside.empty:
        return {}
    keys = zip(inside["host"].tolist(), inside["allocator"].tolist(), strict=True)
    totals: dict[tuple[object, object], int] = {}
    for (host, allocator), size in zip(keys, inside["bytes"].tolist(), strict=True):
        key = (_key(host), _key(allocator))
        totals[key] = totals.get(key, 0) + int(size)
    return totals


def _inside_rows(live: pd.DataFrame, slabs: pd.DataFrame) -> pd.DataFrame:
    """The rows of the allocations live at the peak: per allocation its parts,
    a linked slab's values and slack, and its padding."""
    if live.empty:
        return pd.DataFrame(columns=list(BREAKDOWN.columns))
    covered = None
    if not slabs.empty:
        values = slabs["buffer"].to_numpy(dtype=bool)
        sizes = np.where(values, slabs["held_bytes"].to_numpy(dtype=np.int64), 0)
        covered = pd.Series(sizes, index=slabs["row"].to_numpy()).groupby(level=0).sum()
    parts = split_bytes(live, covered)
    n = len(live)
    item = np.arange(n, dtype=np.int64)
    common = {
        "host": live["host"].astype(object).to_numpy(),
        "allocator": live["allocator"].astype(object).to_numpy(),
        "item": item,
        "allocation": live.index.to_numpy(dtype=np.int64),
        "op": live["op"].astype(object).to_numpy(),
        "op_type": live["op_type"].astype(object).to_numpy(),
        "dtype": live["dtype"].astype(object).to_numpy(),
        "shape": live["shape"].astype(object).to_numpy(),
        "estimated_bytes": live["estimated_bytes"].to_numpy(dtype=object, na_value=None),
        "requested_bytes": live["requested_bytes"].to_numpy(dtype=object, na_value=None),
        "allocated_bytes": live["allocated_bytes"].to_numpy(dtype=object, na_value=None),
        "xla_program": (
            live["xla_program"].astype(object).to_numpy()
            if "xla_program" in live
            else np.full(n, None, dtype=object)
        ),
        "step": live["step"].to_numpy(dtype=object, na_value=None),
    }
    has_op = pd.notna(common["op"])
    frames = []
    sizes = np.stack([parts[p].to_numpy(dtype=np.int64) for p in _ALLOCATION_PARTS])
    keep = sizes != 0
    keep[0] |= ~keep.any(axis=0)  # every allocation has at least one row
    slab_rows = np.isin(live.index.to_numpy(), slabs["row"].to_numpy()) if len(slabs) else None
    if slab_rows is not None:  # a slab's own row is its slack (below), unless it has parts
        keep[0] &= ~slab_rows | (sizes[0] != 0)
    pieces = [("allocation", part, sizes[i], keep[i]) for i, part in enumerate(_ALLOCATION_PARTS)]
    padding = parts["padding_bytes"].to_numpy(dtype=np.int64)
    pieces.append(("padding", "padding_bytes", padding, padding != 0))
    for holder, part, size, mask in pieces:
        frame = {k: v[mask] for k, v in common.items()}
        frame |= {"holder": holder, "part": part, "bytes": size[mask]}
        frame["named_by"] = _named(has_op[mask])
        frames.append(pd.DataFrame(frame))
    if slab_rows is not None:
        slab = _slab_rows(live, slabs, parts, common, n)
        # Object columns as the other frames have them, so concat infers nothing.
        text = [c for c in slab.columns if c not in ("item", "allocation", "bytes")]
        frames.append(slab.astype({c: object for c in text}))
    return pd.concat([f for f in frames if len(f)], ignore_index=True)


def _named(has_op: np.ndarray) -> np.ndarray:
    """``named_by`` of allocation rows: the allocator event's op, where it has one."""
    named = np.full(len(has_op), None, dtype=object)
    named[has_op] = BY_EVENT
    return named


def _slab_rows(
    live: pd.DataFrame,
    slabs: pd.DataFrame,
    parts: pd.DataFrame,
    common: dict[str, np.ndarray],
    first_item: int,
) -> pd.DataFrame:
    """A linked slab's values (each its own item) and its slack (the slab's item).

    Values are capped so that they never exceed the slab's ``xla_buffer_bytes``."""
    position = {label: i for i, label in enumerate(live.index.tolist())}
    room = dict(zip(live.index.tolist(), parts["xla_buffer_bytes"].tolist(), strict=True))
    slack = dict(zip(live.index.tolist(), parts["xla_slack_bytes"].tolist(), strict=True))
    rows: list[dict[str, Any]] = []
    item = first_item
    for slab in slabs.itertuples(index=False):
        at = position[slab.row]
        row = {k: v[at] for k, v in common.items()}
        if slab.buffer:
            size = min(int(slab.held_bytes), room[slab.row])
            room[slab.row] -= size
            value = slab.allocation_index is pd.NA or slab.allocation_index is None
            row |= {
                "holder": "xla_value" if value else "xla_buffer",
                "part": "xla_buffer_bytes",
                "bytes": size,
                "item": item,
                "op": slab.tf_op,
                "op_type": slab.tf_op_type,
                "dtype": slab.dtype,
                "shape": slab.shape,
                "estimated_bytes": slab.estimated_bytes,
                "requested_bytes": size,
                "allocated_bytes": size,
                "xla_buffer": slab.instruction,
                "named_by": BY_VALUE if value else _hlo_naming(slab.named_by, slab.tf_op),
            }
            item += 1
        else:
            row |= {"holder": "xla_slack", "part": "xla_slack_bytes", "bytes": slack[slab.row]}
            row["named_by"] = BY_EVENT if isinstance(row["op"], str) else None
        rows.append(row)
    return pd.DataFrame(rows)


def _hlo_naming(named_by: object, tf_op: object) -> str | None:
    """``named_by`` of an HLO buffer: how tables/xla.py found its TF op."""
    if tf_op == NO_TF_OP:
        return None
    return f"hlo {named_by}" if isinstance(named_by, str) and named_by != BY_HLO else BY_HLO


def _name_variables(
    rows: pd.DataFrame,
    variables: pd.DataFrame,
    matched: VariableMatch,
    peak: Any,
    known: KnownNames,
) -> None:
    """Rows of one allocator whose allocation holds a variable at its peak become
    that variable (its role, layer and path; the allocator's padding stays its own)."""
    holding = named_at(matched.named, int(peak.time_ps))
    if holding.empty:
        return
    mine = (
        (rows["host"].to_numpy(dtype=object) == peak.host)
        & (rows["allocator"].to_numpy(dtype=object) == peak.allocator)
        & rows["allocation"].isin(holding.index).to_numpy(dtype=bool)
        & (rows["holder"].to_numpy(dtype=object) == "allocation")
    )
    # Plain dicts, and each column written once: a cell at a time through pandas
    # cost a millisecond per row (10,000 variables held at a peak took a minute).
    # Only the columns variable_owner reads: to_dict costs per cell.
    owner = ["role", "layer", "belongs_to", "model"]
    held = holding[["variable", "named_by", *owner]].to_dict("index")
    places = np.flatnonzero(mine)
    values: dict[str, list[object]] = {"layer": [], "role": [], "variable": [], "named_by": []}
    for allocation in rows["allocation"].to_numpy(dtype=object)[places].tolist():
        found = held[allocation]
        path = str(found["variable"])
        # The match carries the facts of the very variable it paired (role, layer,
        # model, belongs_to): a path can name several (two models' ``loss/total``,
        # a layer name reused with another shape), so it is no key to look up by.
        var = {("path" if k == "variable" else k): v for k, v in found.items()}
        layer, kind = variable_owner(var, known)
        for column, value in zip(values, (layer, kind, path, str(found["named_by"])), strict=True):
            values[column].append(value)
    for column, found_values in values.items():
        rows.iloc[places, rows.columns.get_loc(column)] = found_values


def _mine(frame: pd.DataFrame, host: object, allocator: object) -> pd.DataFrame:
    same_host = frame["host"].isna() | (frame["host"].astype(object) == host)
    return frame[same_host & (frame["allocator"].astype(object) == allocator)]


def _variable_rows(
    variables: pd.DataFrame, host: object, allocator: object, budget: int, known: KnownNames
) -> list[dict[str, Any]]:
    """The counted ``variables`` of one allocator, largest first, while they fit."""
    mine = _mine(variables, host, allocator)
    mine = mine.sort_values("estimated_bytes", ascending=False, kind="stable")
    rows = []
    for var in mine.to_dict("records"):
        size = int(var["estimated_bytes"])
        if size <= 0 or size > budget:
            continue
        budget -= size
        layer, kind = variable_owner(var, known)
        rows.append(
            {
                "holder": "variable",
                "part": "variable_bytes",
                "bytes": size,
                "layer": layer,
                "role": kind,
                "dtype": var["dtype"],
                "shape": shape_key(var["shape"]),
                "estimated_bytes": size,
                "variable": str(var["path"]),
                "named_by": BY_INVENTORY,
            }
        )
    return rows


def parameter_rows(
    parameters: pd.DataFrame, host: object, allocator: object, budget: int, known: KnownNames
) -> list[dict[str, Any]]:
    """The parameters standing for distinct buffers, largest first, while they fit."""
    mine = _mine(parameters, host, allocator).sort_values(
        ["size_bytes", "program", "parameter_number"],
        ascending=[False, True, True],
        kind="stable",
    )
    rows = []
    owners = parameter_owners(mine, known)
    for (layer, kind), (_, row) in zip(owners, mine.iterrows(), strict=True):
        size = int(row["size_bytes"])
        if size <= 0 or size > budget:
            continue
        budget -= size
        which = row["instruction"] or row["parameter_number"]
        rows.append(
            {
                "holder": "xla_parameter",
                "part": "xla_parameter_bytes",
                "bytes": size,
                "layer": layer,
                "role": kind,
                "dtype": row["dtype"],
                "shape": row["shape"] if isinstance(row["shape"], str) else None,
                "estimated_bytes": size,
                "xla_program": row["program"],
                "xla_buffer": which if isinstance(which, str) else f"parameter {which}",
                "named_by": BY_READERS,
            }
        )
    return rows


def in_capture(breakdown: pd.DataFrame) -> pd.DataFrame:
    """The rows of what was allocated during the capture (they have an op or none, a step)."""
    return breakdown[breakdown["holder"].isin(INSIDE).to_numpy(dtype=bool)]


def expanded_live(breakdown: pd.DataFrame, live: pd.DataFrame) -> pd.DataFrame:
    """``live`` (``live_at_peak``) with each linked slab opened up, from the breakdown:
    one row per live thing (``item``): an allocation as it is; a slab as its slack
    (requested) and padding; an HLO buffer or program value with its own op,
    dtype and shape (its bytes requested and allocated, no padding). Columns
    ``allocation`` (the row in ``allocations``) and ``xla_buffer`` are added;
    the index is a plain range."""
    rows = in_capture(breakdown)
    out = live.copy()
    out.insert(0, "allocation", out.index.to_numpy(dtype=np.int64))
    out["xla_buffer"] = pd.Series(pd.NA, index=out.index, dtype=object)
    values = rows[rows["holder"].isin(("xla_buffer", "xla_value")).to_numpy(dtype=bool)]
    slack = rows[rows["holder"].to_numpy(dtype=object) == "xla_slack"]
    if values.empty and slack.empty:
        return out.reset_index(drop=True)
    padding = rows[rows["holder"].to_numpy(dtype=object) == "padding"]
    pad = padding.groupby("allocation")["bytes"].sum()
    slab = out.loc[slack["allocation"].to_numpy(dtype=np.int64)]
    slab_pad = pad.reindex(slab.index).fillna(0).to_numpy(dtype=np.int64)
    own = rows[rows["holder"].isin(("allocation", "xla_slack")).to_numpy(dtype=bool)]
    requested = own.groupby("allocation")["bytes"].sum().reindex(slab.index)
    slack_bytes = requested.to_numpy(dtype=np.int64)
    slab["requested_bytes"] = pd.array(slack_bytes, dtype="Int64")
    slab["allocated_bytes"] = pd.array(slack_bytes + slab_pad, dtype="Int64")
    slab["padding_bytes"] = pd.array(slab_pad, dtype="Int64")
    new = out.loc[values["allocation"].to_numpy(dtype=np.int64)].copy()
    sizes = pd.array(values["bytes"].to_numpy(dtype=np.int64), dtype="Int64")
    for column in ("op", "op_type", "dtype", "shape"):
        new[column] = values[column].astype(object).to_numpy()
    new["estimated_bytes"] = pd.array(values["estimated_bytes"].tolist(), dtype="Int64")
    new["requested_bytes"] = sizes
    new["allocated_bytes"] = sizes
    new["padding_bytes"] = pd.array(np.zeros(len(new), dtype=np.int64), dtype="Int64")
    new["xla_buffer"] = values["xla_buffer"].astype(object).to_numpy()
    if "source" in values and "source" in new:
        # An HLO value's own line where the source record names its TF op (docs/sources.md).
        found = values["source"].astype(object).to_numpy()
        new["source"] = np.where(pd.notna(found), found, new["source"].astype(object).to_numpy())
    changed = np.unique(np.concatenate([slab.index.to_numpy(), new.index.to_numpy()]))
    kept = out.drop(index=changed)
    as_object = {c: object for c in ("op", "op_type", "dtype", "shape", "xla_program", "source")}
    as_object = {c: t for c, t in as_object.items() if c in out}
    merged = pd.concat([kept.astype(as_object), slab.astype(as_object), new.astype(as_object)])
    merged = merged.astype({c: "category" for c in as_object})
    merged["xla_buffer"] = merged["xla_buffer"].astype(object)
    merged = merged.sort_values(
        ["host", "allocator", "allocated_bytes"], ascending=[True, True, False], kind="stable"
    )
    return merged.reset_index(drop=True)
