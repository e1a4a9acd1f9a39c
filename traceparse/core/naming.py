"""``Profile``'s names (docs/analyses.md): the Keras generation, the model, layer
and optimizer names and the variables a capture teaches, each learnt once.

A mixin of ``Profile``, like ``core/xla_tables.py``: the rules are in
``analysis.naming`` (``capture_generation``, ``capture_names``,
``op_names_known``, ``match_variables``) and ``analysis.breakdown_at.Holders``;
this hands them the Profile's tables and caches each answer, which the
breakdown, the layers, the scopes and the prediction share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceparse.analysis.breakdown_at import Holders
from traceparse.analysis.naming import (
    Generation,
    KnownNames,
    VariableMatch,
    capture_generation,
    capture_names,
    match_variables,
    op_names_known,
)
from traceparse.core.memory import pooled_property

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.xla import XlaParts

__all__ = ["Naming"]


class Naming:
    """The names of ``Profile``, from the tables it builds."""

    if TYPE_CHECKING:  # Profile's, built there and in XlaTables
        _xla: XlaParts
        allocations: pd.DataFrame
        frees_without_allocation: pd.DataFrame
        variables: pd.DataFrame
        _xla_slabs: pd.DataFrame
        _parameters: pd.DataFrame | None

        @property
        def _has_inventory(self) -> bool: ...

    @pooled_property
    def _inventory(self) -> pd.DataFrame | None:
        """``variables`` where the capture has an inventory with rows, else None."""
        return self.variables if self._has_inventory and len(self.variables) else None

    @pooled_property
    def _known(self) -> tuple[KnownNames, dict[str, str]]:
        """Model, layer and optimizer names, and the weight shapes only one layer has."""
        return capture_names(
            self.allocations, self._xla_slabs, self._inventory, self._parameters, self._generation
        )

    @pooled_property
    def _generation(self) -> Generation:
        """Which Keras (or TensorFlow) generation named the ops (``capture_generation``)."""
        slabs = self._xla_slabs if self._xla.present else None
        return capture_generation(self.allocations, slabs, self._inventory)

    @pooled_property
    def _op_known(self) -> KnownNames | None:
        """Names learnt from the op names alone, for ``scopes`` (``op_names_known``)."""
        return op_names_known(self.allocations, self._generation)

    @pooled_property
    def _variable_match(self) -> VariableMatch | None:
        """The allocations of the capture holding inventoried variables (created or
        replaced during it); None without an inventory."""
        if not self._has_inventory or self.variables.empty:
            return None
        return match_variables(self.allocations, self.variables, self.frees_without_allocation)

    @pooled_property
    def _holders(self) -> Holders:
        """What names the holders of a breakdown, at the peak or any instant."""
        known, shapes = self._known
        return Holders(
            known,
            shapes,
            self.variables if self._has_inventory else None,
            self._parameters,
            self._variable_match,
        )
