"""Which layer holds the memory: bytes live at the peak per model layer, split by kind.

One row per (host, allocator, layer). A layer's bytes at its allocator's peak
split into ``activation_bytes`` (forward ops under the layer's scope),
``gradient_bytes`` (its backward ops, ``gradient_tape/<model>/<layer>/...``),
``weight_bytes`` (its variables), ``optimizer_state_bytes`` (the optimizer's
variables kept for its weights: slots from a variable inventory, XLA
parameters only the optimizer reads and updates, buffers an optimizer's
initializer or slot assign made), ``optimizer_update_bytes`` (the optimizer's
temporaries of the step for its weights: ops under the optimizer's scope that
name a slot of its weights or have a weight shape no other layer has),
``other_bytes`` (variables of role ``other``, what no rule places) and
``unknown_bytes`` (what the capture does not say the role of); they sum to
``live_at_peak_bytes``. ``optimizer_bytes``, the two optimizer columns in one,
is read with a ``DeprecationWarning`` for a release (``LayerTable``). Each tensor counts with
the chunk it holds, so allocator padding goes with its tensor.

What cannot be placed under a layer has its own row, so the rows of an
allocator sum exactly to its in-use bytes at the peak:

- ``(optimizer, unassigned)``: optimizer ops and slots not tied to a layer;
- ``(no layer)``: ops outside any model layer (input batches, losses, plain
  ``tf.name_scope`` code, variables of no layer);
- ``(XLA slab slack and padding)``: the part of a compiled program's slab that
  no HLO buffer live at its peak covers, and the allocator's padding on it;
- ``(before the capture, not named)``: bytes allocated before the capture that
  no inventoried variable (or, without an inventory, no XLA parameter placed
  by ``analysis.layer_owners``) accounts for;
- ``(allocator reserved)``: the allocator's reservation counter.

The table groups ``Profile.breakdown`` on ``layer`` and ``role``, so it agrees
with ``attribution`` and the summary by construction. At ``depth`` 2 or more a
``path`` column opens nested models (``block/block_dense``: the layers inside
a layer, ``depth`` levels at most, ``layer_names.layer_path``); what a layer
holds outside its nested layers (its own ops, its variables) keeps the
layer's own path, so the rows still sum to the peak. The naming rules are in
:mod:`traceparse.analysis.naming.layers` and :mod:`traceparse.analysis.naming.owners`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import first_rows, group_codes, group_sums
from traceparse.analysis.naming import (
    EXPLICIT_ROWS,
    ROLES,
    KnownNames,
    layer_path,
    place,
)
from traceparse.errors import UsageError
from traceparse.tables import contracts
from traceparse.tables.columns import ROLE_BYTE_COLUMNS

# Each role's column (``<role>_bytes``), in the tables' order.
KIND_COLUMNS = {column.removesuffix("_bytes"): column for column in ROLE_BYTE_COLUMNS}
assert set(KIND_COLUMNS) == set(ROLES), "a role without its column, or a column without a role"

LAYER_COLUMNS: dict[str, str] = {
    "host": "category",
    "allocator": "category",
    "layer": "category",
    **dict.fromkeys(KIND_COLUMNS.values(), "int64"),
    "live_at_peak_bytes": "int64",
    "allocated_bytes": "int64",
    "live_tensors": "int64",
    "largest_tensor": "string",
    "largest_shape": "string",
    "largest_bytes": "Int64",
}
# Columns renamed, read by their old name for a release (CHANGELOG.md): old -> the
# columns whose sum it was.
RENAMED = {"optimizer_bytes": ("optimizer_state_bytes", "optimizer_update_bytes")}


class LayerTable(pd.DataFrame):
    """The layer table, whose renamed columns (``RENAMED``) can still be read by their
    old name for a release: ``table["optimizer_bytes"]`` warns and answers with the
    sum of the columns that replaced it."""

    @property
    def _constructor(self) -> type[LayerTable]:
        return LayerTable

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and key in RENAMED and key not in self.columns:
            new = RENAMED[key]
            warnings.warn(
                f"the layer column {key} is deprecated: use {' + '.join(new)} "
                "(the old spelling goes in a later release)",
                DeprecationWarning,
                stacklevel=2,
            )
            total = super().__getitem__(new[0])
            for column in new[1:]:
                total = total + super().__getitem__(column)
            return total.rename(key)
        return super().__getitem__(key)


# Holders that are not one tensor, variable or parameter (not counted as live tensors).
_NOT_TENSORS = ("before_capture", "reserved")


def layers_table(
    breakdown: pd.DataFrame,
    allocations: pd.DataFrame,
    known: KnownNames,
    shapes: dict[str, str],
    *,
    by_replica: bool = False,
    depth: int = 1,
) -> LayerTable:
    """The per-layer table; ``by_replica`` adds a ``replica`` column and keeps replicas
    apart; ``depth`` > 1 adds ``path`` and opens nested models that many levels.

    The bytes at the peak group ``breakdown`` (``Profile.breakdown``) on
    ``layer`` and ``role``; ``allocated_bytes`` places every allocation of the
    capture (``allocations``) by the same rules, with ``known`` and ``shapes``.
    """
    columns = _columns(by_replica, depth > 1)
    if breakdown.empty:
        return LayerTable({c: pd.Series(dtype=d) for c, d in columns.items()})
    pieces = [_peak_pieces(breakdown), _allocated_pieces(allocations, known, shapes)]
    table = pd.concat([p for p in pieces if len(p)], ignore_index=True)
    if depth > 1:
        table["path"] = _paths(table, known, depth)
    table = _aggregate(table.drop(columns="op"), by_replica, depth > 1)
    return LayerTable(_order(table)[list(columns)].astype(columns).reset_index(drop=True))


def checked_depth(depth: object) -> int:
    """``depth`` as a number of nested-model levels (1 or more); a usage error else."""
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
        raise UsageError(f"layer depth must be a whole number of levels, 1 or more, not {depth!r}")
    return int(depth)


def layers_contract(by_replica: bool, depth: int) -> contracts.Table:
    """The declared table of ``layers_table(by_replica=, depth=)``."""
    return {
        (False, False): contracts.LAYERS,
        (True, False): contracts.LAYERS_BY_REPLICA,
        (False, True): contracts.LAYER_PATHS,
        (True, True): contracts.LAYER_PATHS_BY_REPLICA,
    }[(by_replica, depth > 1)]


def _columns(by_replica: bool, paths: bool = False) -> dict[str, str]:
    items = list(LAYER_COLUMNS.items())
    extra = [("path", "category")] if paths else []
    extra += [("replica", "Int64")] if by_replica else []
    return dict([*items[:3], *extra, *items[3:]])


def _paths(pieces: pd.DataFrame, known: KnownNames, depth: int) -> np.ndarray:
    """Each piece's path: its op's ``layer_path`` when that starts at the piece's layer,
    else the layer's own name (variables, explicit rows, optimizer temporaries)."""
    ops = pd.Categorical(pieces["op"].astype(object))
    found = [layer_path(str(op), known, depth) for op in ops.categories] + [None]
    path = np.asarray(found, dtype=object)[ops.codes]
    layer = pieces["layer"].astype(object).to_numpy()
    head = np.asarray([p.split("/", 1)[0] if isinstance(p, str) else None for p in path])
    return np.where(head == layer, path, layer)


def _peak_pieces(breakdown: pd.DataFrame) -> pd.DataFrame:
    """One piece per live thing of the breakdown (an allocation with its padding,
    an HLO buffer, a variable...), with the name that stands for it."""
    rows = breakdown.astype({c: object for c in ("host", "allocator", "layer", "role")})
    keys = ["item", "host", "allocator", "layer", "role", "replica"]
    rows = rows.assign(replica=rows["replica"].astype("Int64"))
    grouped = rows.groupby(keys, dropna=False, sort=False)
    pieces = grouped.agg(
        bytes=("bytes", "sum"),
        holder=("holder", "first"),
        op=("op", "first"),
        variable=("variable", "first"),
        xla_program=("xla_program", "first"),
        xla_buffer=("xla_buffer", "first"),
        shape=("shape", "first"),
    ).reset_index()
    holder = pieces["holder"].astype(object).to_numpy()
    parameters = [
        f"parameter {b} of {p}"
        for b, p in zip(pieces["xla_buffer"], pieces["xla_program"], strict=True)
    ]
    names = pieces["op"].astype(object).to_numpy()
    # A variable (from before the capture, or an allocation holding one) goes by its path.
    variable = pieces["variable"].astype(object).to_numpy()
    names = np.where(pd.notna(variable), variable, names)
    tensor = np.where(holder == "xla_parameter", np.asarray(parameters, dtype=object), names)
    live = ~np.isin(holder, _NOT_TENSORS)
    tensor[~live] = None
    shape = pieces["shape"].astype(object).to_numpy().copy()
    shape[~live] = None
    return pd.DataFrame(
        {
            "host": pieces["host"],
            "allocator": pieces["allocator"],
            "layer": pieces["layer"],
            "kind": pieces["role"],
            "replica": pieces["replica"],
            "bytes": pieces["bytes"].astype("int64"),
            "allocated_bytes": 0,
            "tensor": tensor,
            "shape": shape,
            "live": live,
            "op": pieces["op"].astype(object).to_numpy(),
        }
    )


def _allocated_pieces(
    allocations: pd.DataFrame, known: KnownNames, shapes: dict[str, str]
) -> pd.DataFrame:
    """Every allocation of the capture, placed as the breakdown places it, with its bytes.

    The placing reads only the op, its type and (with ``shapes``) the shape, so
    allocations alike in those and in host and allocator are summed first, in
    order of first appearance, and each kind is placed once: allocations can be
    millions, their kinds are few.
    """
    alike = ["host", "allocator", "op", "op_type", *(["shape"] if shapes else [])]
    group = group_codes(allocations, alike)
    first = first_rows(group)
    allocated = allocations["allocated_bytes"].to_numpy(dtype=np.int64, na_value=0)
    summed = group_sums(group, allocated, first.size)
    kinds = allocations.iloc[first]
    frame = pd.DataFrame(
        {
            "op": kinds["op"].astype(object).to_numpy(),
            "op_type": kinds["op_type"].astype(object).to_numpy(),
            "shape": kinds["shape"].astype(object).to_numpy(),
        }
    )
    place(frame, known, shapes)
    return pd.DataFrame(
        {
            "host": kinds["host"].astype(object).to_numpy(),
            "allocator": kinds["allocator"].astype(object).to_numpy(),
            "layer": frame["layer"].to_numpy(),
            "kind": frame["role"].to_numpy(),
            "replica": frame["replica"].to_numpy(),
            "bytes": 0,
            "allocated_bytes": summed,
            "tensor": None,
            "shape": None,
            "live": False,
            "op": frame["op"].to_numpy(),
        }
    )


def _aggregate(pieces: pd.DataFrame, by_replica: bool, paths: bool = False) -> pd.DataFrame:
    keys = ["host", "allocator", "layer", *(["path"] if paths else [])]
    keys += ["replica"] if by_replica else []
    pieces = pieces.astype({"bytes": "int64", "allocated_bytes": "int64", "live": bool})
    pieces["replica"] = pieces["replica"].astype("Int64")
    for kind, column in KIND_COLUMNS.items():
        pieces[column] = np.where(pieces["kind"] == kind, pieces["bytes"], 0)
    pieces["tensor_bytes"] = np.where(pieces["live"], pieces["bytes"], -1)
    grouped = pieces.groupby(keys, dropna=False, sort=False)
    table = grouped.agg(
        **{column: (column, "sum") for column in KIND_COLUMNS.values()},
        allocated_bytes=("allocated_bytes", "sum"),
        live_tensors=("live", "sum"),
    )
    table = table.reset_index()
    # The largest tensor of each row: the first piece of its keys, largest first.
    ranked = pieces.sort_values("tensor_bytes", ascending=False, kind="stable")
    top = ranked.drop_duplicates(keys)[[*keys, "tensor", "shape", "tensor_bytes"]]
    table = table.merge(top, on=keys, how="left")
    has = table["tensor_bytes"].to_numpy() >= 0
    table["largest_tensor"] = np.where(has, table["tensor"], None)
    table["largest_shape"] = np.where(has, table["shape"], None)
    table["largest_bytes"] = pd.array(np.where(has, table["tensor_bytes"], 0), dtype="Int64")
    table.loc[~has, "largest_bytes"] = pd.NA
    table["live_at_peak_bytes"] = table[list(KIND_COLUMNS.values())].sum(axis=1)
    return table


def _order(table: pd.DataFrame) -> pd.DataFrame:
    """Layers by bytes at the peak, then the explicit rows in a fixed order; the paths
    of one layer together, under the layer's own order, by bytes.

    An explicit row that holds nothing and allocated nothing is left out.
    """
    explicit = table["layer"].isin(EXPLICIT_ROWS)
    empty = (table["live_at_peak_bytes"] == 0) & (table["allocated_bytes"] == 0)
    table = table[~(explicit & empty)].copy()
    rank = {name: i + 1 for i, name in enumerate(EXPLICIT_ROWS)}
    table["_rank"] = table["layer"].map(rank).fillna(0)
    keys = ["host", "allocator", "_rank", "live_at_peak_bytes", "allocated_bytes", "layer"]
    if "path" in table:
        # A layer's rows by the layer's own totals, then its paths by theirs.
        layer = table.groupby(["host", "allocator", "layer"], dropna=False, sort=False)
        table["_live"] = layer["live_at_peak_bytes"].transform("sum")
        table["_allocated"] = layer["allocated_bytes"].transform("sum")
        keys = [*keys[:3], "_live", "_allocated", "layer", *keys[3:5], "path"]
    return table.sort_values(
        keys,
        ascending=[
            k not in ("_live", "_allocated", "live_at_peak_bytes", "allocated_bytes") for k in keys
        ],
        kind="stable",
    )
