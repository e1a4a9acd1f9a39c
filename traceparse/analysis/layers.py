"""Which layer holds the memory: bytes live at the peak per model layer, split by kind.

One row per (host, allocator, layer). A layer's bytes at its allocator's peak
split into ``activation_bytes`` (forward ops under the layer's scope),
``gradient_bytes`` (its backward ops, ``gradient_tape/<model>/<layer>/...``),
``weight_bytes`` and ``optimizer_bytes`` (its variables and their optimizer
slots, from a variable inventory, and optimizer ops that name a slot of its
weights) and ``other_bytes`` (the optimizer's update temporaries tied to the
layer by a weight shape no other layer has, variables of role ``other``);
they sum to ``live_at_peak_bytes``. Each tensor counts with
the chunk it holds, so allocator padding goes with its tensor.

What cannot be placed under a layer has its own row, so the rows of an
allocator sum exactly to its in-use bytes at the peak:

- ``(optimizer, unassigned)``: optimizer ops and slots not tied to a layer;
- ``(no layer)``: ops outside any model layer (input batches, losses, plain
  ``tf.name_scope`` code, variables of no layer);
- ``(before the capture, not named)``: bytes allocated before the capture that
  no inventoried variable (or, without an inventory, no XLA parameter placed
  by ``analysis.layer_params``) accounts for;
- ``(allocator reserved)``: the allocator's reservation counter.

The naming rules are in :mod:`traceparse.analysis.layer_names`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from traceparse.analysis.layer_names import (
    ACTIVATION,
    BEFORE_CAPTURE,
    EXPLICIT_ROWS,
    GRADIENT,
    NO_LAYER,
    OPTIMIZER,
    OPTIMIZER_UNASSIGNED,
    OTHER,
    RESERVED,
    WEIGHT,
    KnownNames,
    is_optimizer_scope,
    learn_from_ops,
    names_in_ops,
    place_op,
)
from traceparse.analysis.layer_params import PIECE_COLUMNS, parameter_pieces, reader_ops
from traceparse.analysis.liveness import held_bytes
from traceparse.tables.xla import XLA_ARGS

KIND_COLUMNS = {
    ACTIVATION: "activation_bytes",
    GRADIENT: "gradient_bytes",
    WEIGHT: "weight_bytes",
    OPTIMIZER: "optimizer_bytes",
    OTHER: "other_bytes",
}

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

_ROLE_KIND = {"weight": WEIGHT, "optimizer": OPTIMIZER}


def layers_table(
    live: pd.DataFrame,
    allocations: pd.DataFrame,
    attribution: pd.DataFrame,
    variables: pd.DataFrame | None = None,
    *,
    by_replica: bool = False,
    parameters: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The per-layer table; ``by_replica`` adds a ``replica`` column and keeps replicas apart.

    ``live`` is ``live_at_peak`` of every allocator (one row per allocation, or
    per XLA buffer when expanded), ``allocations`` the whole capture's,
    ``attribution`` one row per allocator, ``variables`` the inventory or None,
    ``parameters`` the XLA parameters standing for distinct buffers when
    ``xla_parameter_bytes`` was measured (``analysis.layer_params``), else None.
    """
    columns = _columns(by_replica)
    if attribution.empty:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in columns.items()})
    if variables is None or variables.empty:
        variables = None
    # Expanded XLA rows carry TF op names that no allocation has: learn from both.
    ops = sorted({str(o) for frame in (allocations, live) for o in frame["op"].dropna().unique()})
    ops = sorted({*ops, *reader_ops(parameters)})
    known = _known_names(variables, names_in_ops(ops, KnownNames())[0])
    known = learn_from_ops(ops, known)
    shapes = _unique_weight_shapes(variables, known)
    pieces = [
        _tensor_pieces(live, known, shapes, at_peak=True),
        _tensor_pieces(allocations, known, shapes, at_peak=False),
    ]
    named = _variable_pieces(variables, attribution, known)
    read = parameter_pieces(parameters, attribution, known)
    if len(read):
        named = pd.concat([p for p in (named, read) if len(p)], ignore_index=True)
    pieces += [named, _remainder_pieces(attribution, named)]
    table = _aggregate(pd.concat([p for p in pieces if len(p)], ignore_index=True), by_replica)
    return _order(table)[list(columns)].astype(columns).reset_index(drop=True)


def _columns(by_replica: bool) -> dict[str, str]:
    if not by_replica:
        return LAYER_COLUMNS
    items = list(LAYER_COLUMNS.items())
    return dict([*items[:3], ("replica", "Int64"), *items[3:]])


def _path_parts(path: object, models: set[str]) -> list[str]:
    """A variable or layer path without its leading model name."""
    parts = str(path).split("/")
    if len(parts) > 1 and parts[0] in models:
        parts = parts[1:]
    return parts


def _variable_layer(row: pd.Series, models: set[str]) -> str | None:
    """The layer a variable belongs to: its path's first part after the model's name."""
    model = row.get("model")
    models = models | {model} if isinstance(model, str) else models
    layer = row.get("layer")
    if isinstance(layer, str) and layer:
        return _path_parts(layer, models)[0]
    parts = _path_parts(row["path"], models)
    return parts[0] if len(parts) > 1 else None


def _known_names(variables: pd.DataFrame | None, op_models: set[str]) -> KnownNames:
    """Layer, model and optimizer names from the inventory; ``op_models`` from the ops."""
    known = KnownNames(models=set(op_models))
    if variables is None:
        return known
    for _, row in variables.iterrows():
        model = row.get("model")
        if isinstance(model, str) and model:
            known.models.add(model)
    for _, row in variables.iterrows():
        if row.get("role") == "optimizer":
            known.optimizers.add(str(row["path"]).split("/")[0])
            continue
        layer = _variable_layer(row, known.models)
        if layer is not None and row.get("role") == "weight":
            known.layers.add(layer)
            known.slot_prefixes[str(row["path"]).replace("/", "_")] = layer
    return known


def _shape_key(shape: object) -> str | None:
    """A shape as ``[a,b]``, from a list or a string; None when unknown."""
    if shape is None or shape is pd.NA or (isinstance(shape, float) and np.isnan(shape)):
        return None
    if isinstance(shape, str):
        return shape.replace(" ", "").replace("(", "[").replace(")", "]").replace(",]", "]")
    if isinstance(shape, Iterable):
        return "[" + ",".join(str(int(d)) for d in shape) + "]"
    return None


def _unique_weight_shapes(variables: pd.DataFrame | None, known: KnownNames) -> dict[str, str]:
    """Shape -> layer, for shapes that only one layer's weights have (ties optimizer ops)."""
    if variables is None:
        return {}
    owners: dict[str, set[str]] = {}
    for _, row in variables[variables["role"] == "weight"].iterrows():
        layer, shape = _variable_layer(row, known.models), _shape_key(row["shape"])
        if layer is not None and shape is not None:
            owners.setdefault(shape, set()).add(layer)
    return {shape: next(iter(layers)) for shape, layers in owners.items() if len(layers) == 1}


def _tensor_pieces(
    frame: pd.DataFrame, known: KnownNames, shapes: dict[str, str], *, at_peak: bool
) -> pd.DataFrame:
    """One piece per allocation: its layer, kind and bytes (at the peak, or allocated)."""
    ops = frame["op"].astype("category")
    codes = ops.cat.codes.to_numpy()  # -1 (no op) picks the trailing entry
    placed = [place_op(str(op), known) for op in ops.cat.categories] + [place_op(None, known)]
    layer = np.asarray([p.layer for p in placed], dtype=object)[codes]
    kind = np.asarray([p.kind for p in placed], dtype=object)[codes]
    replica = np.asarray([p.replica for p in placed], dtype=np.int64)[codes]
    shapes_in = frame["shape"].astype("category")
    keys = [_shape_key(s) for s in shapes_in.cat.categories] + [None]
    shape = np.asarray(keys, dtype=object)[shapes_in.cat.codes.to_numpy()]
    if "op_type" in frame:
        # An XLA argument's copy (typed XLA_Args, named after the op reading it) is
        # the layer's but not that op's output: a weight's or an input's copy.
        copies = frame["op_type"].astype(object).to_numpy() == XLA_ARGS
        kind[copies] = OTHER
    if shapes:
        # An update temporary the shape of one layer's weight: the layer's, but not
        # its optimizer state (that is the slots), so it counts as other.
        tied = np.asarray([shapes.get(k, "") if k else "" for k in shape], dtype=object)
        mask = (kind == OPTIMIZER) & (layer == OPTIMIZER_UNASSIGNED) & (tied != "")
        layer[mask], kind[mask] = tied[mask], OTHER
    held = held_bytes(frame)
    allocated = frame["allocated_bytes"].fillna(0).to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {
            "host": frame["host"].astype(object).to_numpy(),
            "allocator": frame["allocator"].astype(object).to_numpy(),
            "layer": layer,
            "kind": kind,
            "replica": replica,
            "bytes": held if at_peak else 0,
            "allocated_bytes": 0 if at_peak else allocated,
            "tensor": ops.astype(object).to_numpy() if at_peak else None,
            "shape": shape if at_peak else None,
            "live": at_peak,
        }
    )


def _variable_pieces(
    variables: pd.DataFrame | None, attribution: pd.DataFrame, known: KnownNames
) -> pd.DataFrame:
    """Inventoried variables held by each allocator, within its before-capture bytes.

    Largest first, a variable counts while the bytes it adds stay within what
    the allocator held from before the capture: the rest are too small for the
    allocator to record, were made inside the capture, or live elsewhere.
    """
    if variables is None:
        return _empty_pieces()
    rows = []
    for _, peak in attribution.iterrows():
        budget = _before_capture(peak)
        mine = variables[
            (variables["allocator"].astype(object) == peak["allocator"])
            & (variables["host"].isna() | (variables["host"].astype(object) == peak["host"]))
        ]
        mine = mine.sort_values("estimated_bytes", ascending=False, kind="stable")
        for _, var in mine.iterrows():
            size = int(var["estimated_bytes"]) if pd.notna(var["estimated_bytes"]) else 0
            if size <= 0 or size > budget:
                continue
            budget -= size
            kind = _ROLE_KIND.get(str(var.get("role")), OTHER)
            layer = _owner_layer(var, known, kind)
            rows.append(
                {
                    "host": peak["host"],
                    "allocator": peak["allocator"],
                    "layer": layer,
                    "kind": kind,
                    "replica": pd.NA,
                    "bytes": size,
                    "allocated_bytes": 0,
                    "tensor": str(var["path"]),
                    "shape": _shape_key(var["shape"]),
                    "live": True,
                }
            )
    return pd.DataFrame(rows) if rows else _empty_pieces()


def _owner_layer(var: pd.Series, known: KnownNames, kind: str) -> str:
    if kind == WEIGHT:
        return _variable_layer(var, known.models) or NO_LAYER
    if kind == OTHER:  # a layer's own bookkeeping, an optimizer's counters, or no layer's
        layer = _variable_layer(var, known.models)
        if layer in known.layers:
            return layer
        head = str(var["path"]).split("/")[0]
        return OPTIMIZER_UNASSIGNED if is_optimizer_scope(head, known) else NO_LAYER
    owner = var.get("belongs_to")
    if isinstance(owner, str) and owner:
        return known.slot_prefixes.get(owner.replace("/", "_"), OPTIMIZER_UNASSIGNED)
    slot = str(var["path"]).split("/")[-1]
    for prefix in sorted(known.slot_prefixes, key=len, reverse=True):
        if slot.startswith(prefix + "_"):
            return known.slot_prefixes[prefix]
    return OPTIMIZER_UNASSIGNED


def _before_capture(peak: pd.Series) -> int:
    """Bytes held from before the capture (issue 14's ``variable_bytes`` and
    ``xla_parameter_bytes`` are parts of them)."""
    named = sum(
        int(peak[part]) for part in ("variable_bytes", "xla_parameter_bytes") if part in peak.index
    )
    return int(peak["before_capture_bytes"]) + named


def _remainder_pieces(attribution: pd.DataFrame, named: pd.DataFrame) -> pd.DataFrame:
    """Before-capture bytes no variable names, and the allocator's reserved bytes."""
    rows = []
    for _, peak in attribution.iterrows():
        mine = named[(named["host"] == peak["host"]) & (named["allocator"] == peak["allocator"])]
        rest = _before_capture(peak) - int(mine["bytes"].sum())
        for layer, size in ((BEFORE_CAPTURE, rest), (RESERVED, int(peak["reserved_bytes"]))):
            rows.append(
                {
                    "host": peak["host"],
                    "allocator": peak["allocator"],
                    "layer": layer,
                    "kind": OTHER,
                    "replica": pd.NA,
                    "bytes": size,
                    "allocated_bytes": 0,
                    "tensor": None,
                    "shape": None,
                    "live": False,
                }
            )
    return pd.DataFrame(rows) if rows else _empty_pieces()


def _empty_pieces() -> pd.DataFrame:
    return pd.DataFrame(columns=PIECE_COLUMNS)


def _aggregate(pieces: pd.DataFrame, by_replica: bool) -> pd.DataFrame:
    keys = ["host", "allocator", "layer", *(["replica"] if by_replica else [])]
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
    """Layers by bytes at the peak, then the explicit rows in a fixed order.

    An explicit row that holds nothing and allocated nothing is left out.
    """
    explicit = table["layer"].isin(EXPLICIT_ROWS)
    empty = (table["live_at_peak_bytes"] == 0) & (table["allocated_bytes"] == 0)
    table = table[~(explicit & empty)].copy()
    rank = {name: i + 1 for i, name in enumerate(EXPLICIT_ROWS)}
    table["_rank"] = table["layer"].map(rank).fillna(0)
    return table.sort_values(
        ["host", "allocator", "_rank", "live_at_peak_bytes", "allocated_bytes", "layer"],
        ascending=[True, True, True, False, False, True],
        kind="stable",
    )
