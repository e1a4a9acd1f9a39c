"""``Profile``'s XLA tables (docs/xla.md): the programs, their buffers and entry
parameters, the linked slabs at an instant and what the programs hold at the peak.

A mixin of ``Profile``: it hands the XLA analyses out (``analysis.xla_live``,
``analysis.xla_params``) over the run's ``XlaParts`` (``core/xla.py``, the parsing
and linking) and the Profile's own tables, and caches each answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from traceparse.analysis.breakdown import expanded_live
from traceparse.analysis.xla_live import programs_at_peak, slabs_at
from traceparse.analysis.xla_params import judged_parameters, representatives
from traceparse.analysis.xla_roles import PROGRAM_ROLE_COLUMNS, program_peak_roles
from traceparse.core.memory import pooled_property
from traceparse.tables import contracts

if TYPE_CHECKING:
    from traceparse.core.xla import XlaParts

__all__ = ["XlaTables"]


class XlaTables:
    """The XLA tables of ``Profile``, from its ``_xla`` and the tables it declares here."""

    _xla: XlaParts
    if TYPE_CHECKING:  # Profile's, built there
        _tables: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]
        _live_at_peak: pd.DataFrame
        allocations: pd.DataFrame
        peak: pd.DataFrame
        breakdown: pd.DataFrame

        @property
        def _has_inventory(self) -> bool: ...
        def _conform(self, frame: pd.DataFrame, table: contracts.Table) -> pd.DataFrame: ...

    def _slabs(self, live: pd.DataFrame) -> pd.DataFrame:
        """The linked XLA slabs' rows of the allocations in ``live`` (``slabs_at``)."""
        return slabs_at(live, self._xla.held(live.index), self._xla.programs)

    @pooled_property
    def _xla_slabs(self) -> pd.DataFrame:
        return self._slabs(self._live_at_peak)

    @pooled_property
    def _live_at_peak_xla(self) -> pd.DataFrame:
        return expanded_live(self.breakdown, self._live_at_peak)

    def xla_at_peak(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The XLA programs whose allocations are live at a peak (bytes held) and
        their values live there, largest first; empty without linked programs."""
        return self._xla_at_peak

    @pooled_property
    def _xla_at_peak(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        if not self._xla.present:
            return programs_at_peak(self._live_at_peak.iloc[:0].assign(allocation=0))
        return programs_at_peak(self._live_at_peak_xla)

    @pooled_property
    def xla_programs(self) -> pd.DataFrame:
        """One row per XLA program and host stored in the capture (docs/xla.md)."""
        _ = self._tables  # linking counts each program's runs
        return self._conform(self._xla.programs_table(), contracts.XLA_PROGRAMS)

    @pooled_property
    def xla_buffers(self) -> pd.DataFrame:
        """One row per HLO logical buffer assigned to a buffer allocation (docs/xla.md)."""
        return self._conform(self._xla.buffers_table(), contracts.XLA_BUFFERS)

    def xla_program_roles(
        self, program: str | None = None, host: str | None = None
    ) -> pd.DataFrame:
        """The buffers one XLA program holds at its own peak, with their role and
        layer (``analysis/xla_roles.py``): what a step needs where the allocator
        records nothing (JAX on CPU). ``program``: the ``xla_programs`` name;
        None: the program with the most temp and parameter bytes (a training
        step's, where the capture holds one). Empty without programs."""
        if program is None:
            table = self.xla_programs
            if host is not None:
                table = table[table["host"].astype(str) == host]
            if table.empty:
                return pd.DataFrame(columns=["host", "program", *PROGRAM_ROLE_COLUMNS])
            own = table["temp_bytes"].fillna(0) + table["parameter_bytes"].fillna(0)
            program = str(table.loc[own.astype("int64").idxmax(), "program"])
        for on, found in self._xla.programs:
            if found.name == program and (host is None or on == host):
                frame = program_peak_roles(found)
                frame.insert(0, "program", program)
                frame.insert(0, "host", on)
                return frame
        raise KeyError(f"no XLA program {program!r} in the capture")

    @pooled_property
    def xla_parameters(self) -> pd.DataFrame:
        """One row per entry parameter of each XLA program and host: its shape,
        dtype, size, whether the program updates it, and whether it counts
        towards ``xla_parameter_bytes`` (``reason`` says why not; docs/xla.md)."""
        _ = self._tables  # linking counts each program's runs
        peak = self.peak
        allocators = set(
            zip(peak["host"].astype(object), peak["allocator"].astype(object), strict=True)
        )
        table = judged_parameters(
            self._xla.parameters_table(), self._xla.ran(), self.allocations, allocators
        )
        return self._conform(table, contracts.XLA_PARAMETERS)

    @pooled_property
    def _parameters(self) -> pd.DataFrame | None:
        """The XLA parameters standing for distinct buffers read by programs that
        ran; None (not measured) with an inventory or without such a program."""
        if self._has_inventory or not self._xla.present:
            return None
        judged = self.xla_parameters
        if not judged["ran"].any():
            return None
        return representatives(judged)
