"""Placing XLA parameters read before the capture under layers (no inventory).

A parameter carries no variable name, but the ops that read it do
(``xla_parameters.read_by``). For the parameters that stand for distinct
buffers (``analysis.xla_params.representatives``), largest first and within
the allocator's ``xla_parameter_bytes``:

- updated by the program (a variable it assigns) and read by the forward or
  backward ops of exactly one layer: that layer's weight;
- updated and read only by optimizer ops (a slot): the layer an op's scope
  names as its slot, else the one layer whose weight parameters have that
  shape and dtype, else ``(optimizer, unassigned)``;
- anything else (an input batch, a variable only read, one read by several
  layers): ``(no layer)``, other.
"""

from __future__ import annotations

import pandas as pd

from traceparse.analysis.layer_names import (
    ACTIVATION,
    GRADIENT,
    NO_LAYER,
    OPTIMIZER,
    OPTIMIZER_UNASSIGNED,
    OTHER,
    WEIGHT,
    KnownNames,
    place_op,
)

PIECE_COLUMNS = [
    "host",
    "allocator",
    "layer",
    "kind",
    "replica",
    "bytes",
    "allocated_bytes",
    "tensor",
    "shape",
    "live",
]


def reader_ops(parameters: pd.DataFrame | None) -> list[str]:
    """Every TF op that reads a parameter (to learn model and layer names from)."""
    if parameters is None or parameters.empty:
        return []
    found = {op for text in parameters["read_by"].dropna() for op in str(text).split(", ")}
    return sorted(found)


def parameter_pieces(
    parameters: pd.DataFrame | None, attribution: pd.DataFrame, known: KnownNames
) -> pd.DataFrame:
    """One piece per placed parameter (the columns of ``layers``' pieces)."""
    rows: list[dict[str, object]] = []
    if parameters is None or parameters.empty or "xla_parameter_bytes" not in attribution:
        return pd.DataFrame(rows, columns=PIECE_COLUMNS)
    for _, peak in attribution.iterrows():
        mine = parameters[
            (parameters["host"].astype(object) == peak["host"])
            & (parameters["allocator"].astype(object) == peak["allocator"])
        ]
        mine = mine.sort_values(
            ["size_bytes", "program", "parameter_number"],
            ascending=[False, True, True],
            kind="stable",
        )
        placed = [_place(row, known) for _, row in mine.iterrows()]
        weights: dict[tuple[str, str], set[str]] = {}
        for (layer, kind), (_, row) in zip(placed, mine.iterrows(), strict=True):
            if kind == WEIGHT:
                weights.setdefault(_kind_of(row), set()).add(layer)
        budget = int(peak["xla_parameter_bytes"])
        for (layer, kind), (_, row) in zip(placed, mine.iterrows(), strict=True):
            size = int(row["size_bytes"])
            if size <= 0 or size > budget:
                continue
            budget -= size
            owners = weights.get(_kind_of(row), set())
            if kind == OPTIMIZER and layer == OPTIMIZER_UNASSIGNED and len(owners) == 1:
                layer = next(iter(owners))
            name = row["function"] if isinstance(row["function"], str) else row["program"]
            which = row["instruction"] or row["parameter_number"]
            rows.append(
                {
                    "host": peak["host"],
                    "allocator": peak["allocator"],
                    "layer": layer,
                    "kind": kind,
                    "replica": pd.NA,
                    "bytes": size,
                    "allocated_bytes": 0,
                    "tensor": f"parameter {which} of {name}",
                    "shape": row["shape"] if isinstance(row["shape"], str) else None,
                    "live": True,
                }
            )
    return pd.DataFrame(rows, columns=PIECE_COLUMNS)


def _kind_of(row: pd.Series) -> tuple[str, str]:
    return (str(row["dtype"]), str(row["shape"]))


def _place(row: pd.Series, known: KnownNames) -> tuple[str, str]:
    """(layer, kind) of one parameter from whether it is updated and who reads it."""
    text = row["read_by"]
    if not bool(row["updated"]) or not isinstance(text, str):
        return NO_LAYER, OTHER
    placements = [place_op(op, known) for op in text.split(", ")]
    forward = {
        p.layer for p in placements if p.kind in (ACTIVATION, GRADIENT) and p.layer != NO_LAYER
    }
    if len(forward) == 1 and all(p.kind != OTHER for p in placements):
        return next(iter(forward)), WEIGHT
    if placements and all(p.kind == OPTIMIZER for p in placements):
        slots = {p.layer for p in placements}
        return (slots.pop() if len(slots) == 1 else OPTIMIZER_UNASSIGNED), OPTIMIZER
    return NO_LAYER, OTHER
