"""Who a byte belongs to: the model layer, the part of training, the variable.

The capture names ops, not layers; these modules read the names (and, where a
capture has them, the variable inventory and the recorded Python stacks) into
a layer, a role and a replica for every allocation, buffer and variable:

- ``generations``: which Keras (or TensorFlow) generation wrote the op names,
  since each scopes its ops its own way;
- ``layers``: an op name's layer and role (``place_op``), the model's scopes,
  and the vocabulary of roles the views group on;
- ``owners``: which layer owns a variable, an XLA parameter or an optimizer
  temporary (``KnownNames``, learnt from the inventory and the op names);
- ``variables`` (with ``variable_slots``): which allocations made during the
  capture hold an inventoried variable's bytes;
- ``place``: the rows of a breakdown placed (layer, role, replica, scope), each
  distinct row once (``placed``, ``first_ids``);
- ``stacks``: roles read from the recorded Python stacks where names say none;
- ``optimizers``: the Keras optimizers, named once;
- ``capture``: the generation, names and weight shapes one capture's tables teach.

The breakdown, the roll-ups, the layer table and the prediction take their
names from here; code outside this package imports them from this face.
"""

from traceparse.analysis.naming.capture import (
    CaptureNaming,
    capture_generation,
    capture_names,
    op_names,
    op_names_known,
)
from traceparse.analysis.naming.generations import KERAS3, Generation, read_generation
from traceparse.analysis.naming.layers import (
    ACTIVATION,
    BEFORE_CAPTURE,
    EXPLICIT_ROWS,
    GRADIENT,
    NO_LAYER,
    OPTIMIZER_ROLES,
    OPTIMIZER_STATE,
    OPTIMIZER_UNASSIGNED,
    OPTIMIZER_UPDATE,
    OTHER,
    RESERVED,
    ROLES,
    UNKNOWN,
    WEIGHT,
    XLA_SLAB,
    KnownNames,
    layer_path,
    model_scopes,
    optimizer_op_roles,
    place_op,
    written_scopes,
)
from traceparse.analysis.naming.optimizers import OPTIMIZER_NAMES, OPTIMIZER_SCOPES
from traceparse.analysis.naming.owners import (
    gradient_shapes,
    inventory_names,
    known_names,
    parameter_owners,
    shape_key,
    unique_weight_shapes,
    variable_owner,
)
from traceparse.analysis.naming.place import NO_SCOPE, NO_TF_OP, first_ids, place, placed
from traceparse.analysis.naming.stacks import place_by_stack
from traceparse.analysis.naming.variables import (
    VariableMatch,
    covered_at,
    held_at_end,
    match_variables,
    named_at,
)

__all__ = [
    "ACTIVATION",
    "BEFORE_CAPTURE",
    "EXPLICIT_ROWS",
    "GRADIENT",
    "KERAS3",
    "NO_LAYER",
    "NO_SCOPE",
    "NO_TF_OP",
    "OPTIMIZER_NAMES",
    "OPTIMIZER_ROLES",
    "OPTIMIZER_SCOPES",
    "OPTIMIZER_STATE",
    "OPTIMIZER_UNASSIGNED",
    "OPTIMIZER_UPDATE",
    "OTHER",
    "RESERVED",
    "ROLES",
    "UNKNOWN",
    "WEIGHT",
    "XLA_SLAB",
    "CaptureNaming",
    "Generation",
    "KnownNames",
    "VariableMatch",
    "capture_generation",
    "capture_names",
    "covered_at",
    "first_ids",
    "gradient_shapes",
    "held_at_end",
    "inventory_names",
    "known_names",
    "layer_path",
    "match_variables",
    "model_scopes",
    "named_at",
    "op_names",
    "op_names_known",
    "optimizer_op_roles",
    "parameter_owners",
    "place",
    "place_by_stack",
    "place_op",
    "placed",
    "read_generation",
    "shape_key",
    "unique_weight_shapes",
    "variable_owner",
    "written_scopes",
]
