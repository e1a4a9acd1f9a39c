"""Roles read from the recorded Python stacks where the op names do not say.

An eager op (a ``GradientTape`` loop run eagerly) is named by its type alone
(``Mul``, ``_MklMatMul``): no scope says what part of training made it. The
source record (``docs/sources.md``) keeps the Python stack that called each op;
the frames of the library's own methods say the part:

- called from a Keras optimizer's ``apply_gradients``/``apply``/``update_step``
  (``keras/src/optimizers/base_optimizer.py`` and each optimizer's
  ``update_step``; tf.keras 2's ``optimizer_v2`` ``_resource_apply_dense``): an
  optimizer update temporary, unless the op runs inside the optimizer's
  ``add_variable``/``add_variable_from_reference``/``add_slot`` (the initial
  value of a slot it creates on its first step): optimizer state;
- called from ``GradientTape.gradient`` (``tensorflow/python/eager/backprop.py``):
  a gradient (TensorFlow 2.21's recorder gives a gradient op its forward op's
  stack instead, which names the layer's ``call``, so such rows stay as placed).

Only rows the names left as ``unknown`` (or ``other``) under no layer change; their layer is the
one whose weight has the shape (``shapes``), as for scoped optimizer ops.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from traceparse.analysis.naming.layers import (
    GRADIENT,
    NO_LAYER,
    OPTIMIZER_STATE,
    OPTIMIZER_UNASSIGNED,
    OPTIMIZER_UPDATE,
    OTHER,
    UNKNOWN,
)
from traceparse.analysis.naming.owners import shape_key

# ``path:line function`` of a frame in a Keras optimizer's update.
_UPDATE = re.compile(
    r"(?:keras/src/optimizers/|keras/src/backend/\w+/optimizer\.py|"
    r"keras/optimizers/|optimizer_v2/)\S*:\d+ "
    r"(?:apply_gradients|apply|update_step|_backend_update_step|_update_step|"
    r"_resource_apply_dense|_resource_apply_sparse|_distributed_apply)$"
)
_CREATE = re.compile(
    r"(?:keras/src/optimizers/|keras/optimizers/|optimizer_v2/)\S*:\d+ "
    r"(?:add_variable|add_variable_from_reference|add_slot|_create_slots|build)$"
)
_GRADIENT = re.compile(r"tensorflow/python/eager/backprop\.py:\d+ gradient$")
# A Keras layer's call: the forward stack TF 2.21's recorder also gives the
# gradient ops of that forward op.
_LAYER_CALL = re.compile(
    r"(?:keras/src/layers/layer\.py|keras/engine/base_layer\.py)\S*:\d+ __call__$"
)
# A stack marked only as a layer's call: forward op, or its gradient (told by shape).
_IN_LAYER = "in_layer"


def stack_roles(stacks: pd.DataFrame) -> dict[tuple[str, int], str]:
    """(host, stack) -> the role its frames say (only stacks that say one)."""
    if stacks.empty:
        return {}
    frames = stacks["frame"].astype(str)
    marks = pd.DataFrame(
        {
            "host": stacks["host"].astype(str).to_numpy(),
            "stack": stacks["stack"].to_numpy(dtype=np.int64),
            "update": frames.str.contains(_UPDATE).to_numpy(dtype=bool),
            "create": frames.str.contains(_CREATE).to_numpy(dtype=bool),
            "gradient": frames.str.contains(_GRADIENT).to_numpy(dtype=bool),
            "layer": frames.str.contains(_LAYER_CALL).to_numpy(dtype=bool),
        }
    )
    kinds = ["update", "create", "gradient", "layer"]
    said = marks.groupby(["host", "stack"], sort=False)[kinds].any()
    out: dict[tuple[str, int], str] = {}
    for (host, stack), row in said[said.any(axis=1)].iterrows():
        if row["create"]:
            out[(host, int(stack))] = OPTIMIZER_STATE
        elif row["update"]:
            out[(host, int(stack))] = OPTIMIZER_UPDATE
        elif row["gradient"]:
            out[(host, int(stack))] = GRADIENT
        else:
            out[(host, int(stack))] = _IN_LAYER
    return out


def place_by_stack(
    rows: pd.DataFrame, stacks: pd.DataFrame, shapes: dict[str, str]
) -> pd.DataFrame:
    """``rows`` (the breakdown) with the roles the stacks say where names said none."""
    if rows.empty or "stack" not in rows or stacks.empty:
        return rows
    roles = stack_roles(stacks)
    if not roles:
        return rows
    open_rows = (
        np.isin(rows["role"].astype(object).to_numpy(), (OTHER, UNKNOWN))
        & (rows["layer"].astype(object).to_numpy() == NO_LAYER)
        & rows["stack"].notna().to_numpy(dtype=bool)
    )
    where = np.flatnonzero(open_rows)
    if not len(where):
        return rows
    keys = zip(
        rows["host"].astype(str).to_numpy()[where],
        rows["stack"].to_numpy(dtype=np.int64, na_value=-1)[where],
        strict=True,
    )
    found = np.asarray([roles.get(key, "") for key in keys], dtype=object)
    # Under a layer's call, an op whose output has the shape of a weight only one
    # layer has is that weight's gradient: TF's tape returns the gradient of a
    # variable in the variable's shape (``GradientTape.gradient``), and the
    # recorder gave it its forward op's stack. Other ops there keep their role.
    in_layer = np.flatnonzero(found == _IN_LAYER)
    if len(in_layer):
        kept = rows["shape"].to_numpy(dtype=object)[where[in_layer]]
        weight = np.asarray([shape_key(k) in shapes for k in kept], dtype=bool)
        found[in_layer] = np.where(weight, GRADIENT, "")
    hit = found != ""
    if not hit.any():
        return rows
    at = where[hit]
    out = rows.astype({"role": object, "layer": object})
    out.iloc[at, out.columns.get_loc("role")] = found[hit]
    shape = [shape_key(s) for s in out["shape"].to_numpy(dtype=object)[at]]
    optimizer = np.isin(found[hit], (OPTIMIZER_STATE, OPTIMIZER_UPDATE))
    layer = [
        shapes.get(k or "", OPTIMIZER_UNASSIGNED if opt else NO_LAYER)
        for k, opt in zip(shape, optimizer, strict=True)
    ]
    out.iloc[at, out.columns.get_loc("layer")] = layer
    return out
