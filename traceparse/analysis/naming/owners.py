"""Which layer owns a variable, an XLA parameter or an optimizer temporary.

Op names are placed by :mod:`traceparse.analysis.naming.layers`; this module
places what has no op of its own: variables from the inventory (by path,
``layer`` and ``belongs_to``), XLA entry parameters read before the capture
(by the ops that read them, ``xla_parameters.read_by``), and optimizer
update temporaries tied to a layer by a weight shape no other layer has.

A parameter, without an inventory:

- updated by the program (a variable it assigns) and read by the forward or
  backward ops of exactly one layer: that layer's weight;
- updated and read only by optimizer ops (a slot, optimizer state): the layer
  an op's scope names as its slot, else the one layer whose weight parameters
  have that shape and dtype, else ``(optimizer, unassigned)``;
- anything else (an input batch, a variable only read, one read by several
  layers): ``(no layer)``, other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis.naming.generations import Generation, read_generation
from traceparse.analysis.naming.layers import (
    ACTIVATION,
    GRADIENT,
    NO_LAYER,
    OPTIMIZER_ROLES,
    OPTIMIZER_STATE,
    OPTIMIZER_UNASSIGNED,
    OTHER,
    WEIGHT,
    KnownNames,
    is_optimizer_scope,
    learn_from_ops,
    learn_scopes,
    place_op,
    slot_owner,
)

# An inventoried variable's recorded role -> its role at the peak: an optimizer's
# variables (its slots, ``Optimizer.variables``) are its state.
ROLE_KIND = {"weight": WEIGHT, "optimizer": OPTIMIZER_STATE}


def known_names(
    ops: Iterable[str],
    variables: pd.DataFrame | None,
    parameters: pd.DataFrame | None,
    generation: Generation | None = None,
) -> KnownNames:
    """Model, layer, optimizer names and slot prefixes: from the inventory when
    there is one, else learnt from the op names (those reading parameters too),
    by the rules of the generation that wrote them (read here unless given)."""
    names = sorted({*ops, *reader_ops(parameters)})
    if generation is None:
        generation = read_generation(names, inventory_names(variables))
    models, layers = learn_scopes(names, generation.name)
    known = KnownNames(models=models, layers=layers, generation=generation.name)
    if variables is not None:
        for model in variables["model"].dropna().astype(str):
            if model:
                known.models.add(model)
        for row in _records(variables):
            if row.get("role") == "optimizer":
                known.optimizers.add(str(row["path"]).split("/")[0])
                continue
            layer = variable_layer(row, known.models)
            if layer is not None and row.get("role") == "weight":
                known.layers.add(layer)
                known.slot_prefixes[str(row["path"]).replace("/", "_")] = layer
    return learn_from_ops(names, known)


def inventory_names(variables: pd.DataFrame | None) -> list[str]:
    """The variables' own names (``dense/kernel:0`` in TensorFlow 2, ``kernel`` in Keras 3)."""
    if variables is None or variables.empty or "name" not in variables:
        return []
    return [str(n) for n in variables["name"].dropna()]


def reader_ops(parameters: pd.DataFrame | None) -> list[str]:
    """Every TF op that reads a parameter (to learn model and layer names from)."""
    if parameters is None or parameters.empty:
        return []
    found = {op for text in parameters["read_by"].dropna() for op in str(text).split(", ")}
    return sorted(found)


def _path_parts(path: object, models: set[str]) -> list[str]:
    """A variable or layer path without its leading model name."""
    parts = str(path).split("/")
    if len(parts) > 1 and parts[0] in models:
        parts = parts[1:]
    return parts


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts: a Series per row (iterrows) costs a hundred times more."""
    columns = [c for c in ("path", "role", "layer", "model", "belongs_to", "shape") if c in frame]
    return [
        dict(zip(columns, values, strict=True))
        for values in frame[columns].astype(object).itertuples(index=False, name=None)
    ]


def variable_layer(row: Mapping[str, Any], models: set[str]) -> str | None:
    """The layer a variable belongs to: its path's first part after the model's name."""
    model = row.get("model")
    models = models | {model} if isinstance(model, str) else models
    layer = row.get("layer")
    if isinstance(layer, str) and layer:
        return _path_parts(layer, models)[0]
    parts = _path_parts(row["path"], models)
    return parts[0] if len(parts) > 1 else None


def shape_key(shape: object) -> str | None:
    """A shape as ``[a,b]``, from a list or a string; None when unknown."""
    if shape is None or shape is pd.NA or (isinstance(shape, float) and np.isnan(shape)):
        return None
    if isinstance(shape, str):
        return shape.replace(" ", "").replace("(", "[").replace(")", "]").replace(",]", "]")
    if isinstance(shape, Iterable):
        return "[" + ",".join(str(int(d)) for d in shape) + "]"
    return None


def unique_weight_shapes(variables: pd.DataFrame | None, known: KnownNames) -> dict[str, str]:
    """Shape -> layer, for shapes that only one layer's weights have (ties optimizer ops)."""
    if variables is None:
        return {}
    owners: dict[str, set[str]] = {}
    for row in _records(variables[variables["role"] == "weight"]):
        layer, shape = variable_layer(row, known.models), shape_key(row["shape"])
        if layer is not None and shape is not None:
            owners.setdefault(shape, set()).add(layer)
    return {shape: next(iter(layers)) for shape, layers in owners.items() if len(layers) == 1}


def variable_owner(var: Mapping[str, Any], known: KnownNames) -> tuple[str, str]:
    """(layer, kind) of one inventoried variable."""
    kind = ROLE_KIND.get(str(var.get("role")), OTHER)
    if kind == WEIGHT:
        return variable_layer(var, known.models) or NO_LAYER, kind
    if kind == OTHER:  # a layer's own bookkeeping, an optimizer's counters, or no layer's
        layer = variable_layer(var, known.models)
        if layer is not None and layer in known.layers:
            return layer, kind
        head = str(var["path"]).split("/")[0]
        if not is_optimizer_scope(head, known):
            return NO_LAYER, kind
        # Under an optimizer's scope and named as a weight's slot (Keras names a
        # slot ``<weight path with _>_<slot>``, add_variable_from_reference): its
        # state, though the inventory could not tie it to the optimizer (a custom
        # loop's optimizer no model holds); counters stay other. Not under the
        # scope of an optimizer a model holds (known.optimizers): the inventory
        # lists that optimizer's variables itself, so one it left out is not its
        # slot, whatever its name says.
        if head in known.optimizers:
            return OPTIMIZER_UNASSIGNED, kind
        slot = slot_owner(str(var["path"]).split("/")[-1], known)
        return (slot, OPTIMIZER_STATE) if slot is not None else (OPTIMIZER_UNASSIGNED, kind)
    owner = var.get("belongs_to")
    if isinstance(owner, str) and owner:
        return known.slot_prefixes.get(owner.replace("/", "_"), OPTIMIZER_UNASSIGNED), kind
    found = slot_owner(str(var["path"]).split("/")[-1], known)
    return found or OPTIMIZER_UNASSIGNED, kind


def parameter_owners(parameters: pd.DataFrame, known: KnownNames) -> list[tuple[str, str]]:
    """(layer, kind) of each parameter row, in order (the module docstring's rule)."""
    placed = [_place_parameter(row, known) for _, row in parameters.iterrows()]
    weights: dict[tuple[str, str], set[str]] = {}
    for (layer, kind), (_, row) in zip(placed, parameters.iterrows(), strict=True):
        if kind == WEIGHT:
            weights.setdefault(_kind_of(row), set()).add(layer)
    out = []
    for (layer, kind), (_, row) in zip(placed, parameters.iterrows(), strict=True):
        owners = weights.get(_kind_of(row), set())
        if kind == OPTIMIZER_STATE and layer == OPTIMIZER_UNASSIGNED and len(owners) == 1:
            layer = next(iter(owners))
        out.append((layer, kind))
    return out


def _kind_of(row: pd.Series) -> tuple[str, str]:
    return (str(row["dtype"]), str(row["shape"]))


def _place_parameter(row: pd.Series, known: KnownNames) -> tuple[str, str]:
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
    if placements and all(p.kind in OPTIMIZER_ROLES for p in placements):
        # Read and updated by the optimizer alone: one of its slots, its state.
        slots = {p.layer for p in placements}
        return (slots.pop() if len(slots) == 1 else OPTIMIZER_UNASSIGNED), OPTIMIZER_STATE
    return NO_LAYER, OTHER


def gradient_shapes(
    ops: Sequence[object], shapes: Sequence[object], known: KnownNames
) -> dict[str, str]:
    """Shape -> layer, for shapes that only one layer's backward ops make and no
    forward op does (pairs of ``ops`` and ``shapes``): without an inventory, a
    weight's gradient has the weight's shape (an input's gradient has an
    activation's), so it ties an optimizer temporary of that shape to the layer."""
    owners: dict[str, set[str]] = {}
    forward: set[str] = set()
    for op, shape in zip(ops, shapes, strict=True):
        key = shape_key(shape)
        if not isinstance(op, str) or key is None:
            continue
        where = place_op(op, known)
        if where.kind == GRADIENT and where.layer != NO_LAYER:
            owners.setdefault(key, set()).add(where.layer)
        elif where.kind == ACTIVATION:
            forward.add(key)
    return {
        shape: next(iter(layers))
        for shape, layers in owners.items()
        if len(layers) == 1 and shape not in forward
    }
