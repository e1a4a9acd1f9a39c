"""The names one capture's tables teach: who wrote the op names (``generations``),
the model, layer and optimizer names (``owners``) and the weight shapes only one
layer has, and which allocations hold the inventoried variables: a
``CaptureNaming`` learns each on first use from the tables it is given, and
``Profile`` caches one; the breakdown, the layers, the scopes and the prediction
take them (moved from ``core/profile.py``, issue 46).

The op names read are the allocations' and, where XLA slabs are linked, the TF
ops of their buffers (``Profile``'s ``_xla_slabs``, ``tf_op``): a compiled step's
allocations name the function, its buffers the layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from traceparse.analysis.naming.generations import KERAS3, Generation, read_generation
from traceparse.analysis.naming.layers import KnownNames
from traceparse.analysis.naming.owners import (
    gradient_shapes,
    inventory_names,
    known_names,
    unique_weight_shapes,
)
from traceparse.analysis.naming.variables import VariableMatch, match_variables

__all__ = [
    "CaptureNaming",
    "capture_generation",
    "capture_names",
    "op_names",
    "op_names_known",
]


def op_names(allocations: pd.DataFrame, slabs: pd.DataFrame | None = None) -> list[str]:
    """The distinct op names of ``allocations`` and of ``slabs``' buffers, sorted."""
    ops = {str(o) for o in allocations["op"].dropna().unique()}
    if slabs is not None and len(slabs):
        ops |= {str(o) for o in slabs["tf_op"].dropna().unique()}
    return sorted(ops)


def capture_generation(
    allocations: pd.DataFrame, slabs: pd.DataFrame | None, variables: pd.DataFrame | None
) -> Generation:
    """Which Keras (or TensorFlow) generation named the ops (``read_generation``),
    read from the op names and the inventory's variable names (``variables``: the
    inventory, None without one)."""
    return read_generation(op_names(allocations, slabs), inventory_names(variables))


def capture_names(
    allocations: pd.DataFrame,
    slabs: pd.DataFrame,
    variables: pd.DataFrame | None,
    parameters: pd.DataFrame | None,
    generation: Generation,
) -> tuple[KnownNames, dict[str, str]]:
    """Model, layer and optimizer names (``known_names``), and the weight shapes
    only one layer has: the inventory's where there is one (``variables``), else
    those of the weights' gradients."""
    known = known_names(op_names(allocations, slabs), variables, parameters, generation)
    if variables is not None:
        return known, unique_weight_shapes(variables, known)
    # No inventory: the weights' shapes are those of their gradients (each
    # distinct op and shape once: allocations can be millions).
    frames = [allocations[["op", "shape"]]]
    if len(slabs):
        frames.append(slabs[["tf_op", "shape"]].set_axis(["op", "shape"], axis=1))
    pairs = [key for f in frames for key in f.groupby(["op", "shape"], observed=True).size().index]
    return known, gradient_shapes([o for o, _ in pairs], [s for _, s in pairs], known)


def op_names_known(allocations: pd.DataFrame, generation: Generation) -> KnownNames | None:
    """Names learnt from the op names alone (no inventory), for ``scopes`` in a
    capture not written by Keras 3 (whose rules need none): None for Keras 3."""
    if generation.name == KERAS3:
        return None
    return known_names(op_names(allocations), None, None, generation)


@dataclass
class CaptureNaming:
    """What one capture teaches about names, each learnt once, when first asked:
    from its ``allocations``, the linked XLA ``slabs`` live at the peak
    (``xla_present``: whether it has programs at all), its variable inventory
    (``variables``, None without one), the XLA parameters standing for distinct
    buffers (``parameters``, None when not measured) and its frees without an
    allocation (``frees``)."""

    allocations: pd.DataFrame
    slabs: pd.DataFrame
    xla_present: bool
    variables: pd.DataFrame | None
    parameters: pd.DataFrame | None
    frees: pd.DataFrame

    @cached_property
    def inventory(self) -> pd.DataFrame | None:
        """The inventory when it has rows, else None."""
        return self.variables if self.variables is not None and len(self.variables) else None

    @cached_property
    def generation(self) -> Generation:
        """Which Keras (or TensorFlow) generation named the ops (``capture_generation``)."""
        slabs = self.slabs if self.xla_present else None
        return capture_generation(self.allocations, slabs, self.inventory)

    @cached_property
    def known(self) -> tuple[KnownNames, dict[str, str]]:
        """Model, layer and optimizer names, and the weight shapes only one layer has."""
        return capture_names(
            self.allocations, self.slabs, self.inventory, self.parameters, self.generation
        )

    @cached_property
    def op_known(self) -> KnownNames | None:
        """Names learnt from the op names alone, for ``scopes`` (``op_names_known``)."""
        return op_names_known(self.allocations, self.generation)

    @cached_property
    def variable_match(self) -> VariableMatch | None:
        """The allocations holding inventoried variables (created or replaced during
        the capture); None without an inventory."""
        if self.variables is None or self.variables.empty:
            return None
        return match_variables(self.allocations, self.variables, self.frees)
