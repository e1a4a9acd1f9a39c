"""``Profile``: the tables of one run (one or more hosts), built once and cached."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from traceparse.analysis import (
    LeakReport,
    attribution_table,
    layers_table,
    leak_report,
    live_at_peak_table,
    ops_table,
    peak_table,
    scopes_table,
    select,
    steps_table,
)
from traceparse.analysis.attribution import ATTRIBUTION
from traceparse.analysis.breakdown import BREAKDOWN
from traceparse.analysis.breakdown_at import (
    Holders,
    chosen_instants,
    live_at,
    peak_repeats,
    repeat_instants,
    tables_at,
)
from traceparse.analysis.failure import Failure, failures
from traceparse.analysis.layers import checked_depth, layers_contract
from traceparse.analysis.liveness import end_events
from traceparse.analysis.naming import CaptureNaming, held_at_end, place_by_stack
from traceparse.analysis.peak import LIVE_AT_PEAK, PEAK
from traceparse.analysis.peak_repeats import PEAK_INSTANTS, peak_instants
from traceparse.analysis.rollups import OPS, SCOPES
from traceparse.analysis.steps import STEPS
from traceparse.core.compat import called_or_read, moved
from traceparse.core.diagnostics import NO_INVENTORY, NO_SOURCES, capture_notes
from traceparse.core.memory import pooled_cache, pooled_property
from traceparse.core.predicting import Predicting, checked_batch, predictor_of
from traceparse.core.source_lines import SourceLines
from traceparse.core.xla import XlaParts
from traceparse.core.xla_tables import XlaTables
from traceparse.decode.batch import BatchRecord
from traceparse.decode.trace import MemoryTrace, lean_masks
from traceparse.records import AllocatorRecord, build_records
from traceparse.records.build import with_predictions
from traceparse.tables import contracts
from traceparse.tables.build import build_run_tables
from traceparse.tables.contracts import concat
from traceparse.tables.sources import breakdown_sources, stacks_table
from traceparse.tables.variables import variables_table

# Moved to core/diagnostics.py and core/predicting.py (issue 46); importable from
# here as before.
__all__ = ["NO_SOURCES", "Profile", "checked_batch", "predictor_of"]


class Profile(XlaTables, SourceLines, Predicting):
    """Memory tables of one profiler run.

    >>> prof = traceparse.load("logs/")                # doctest: +SKIP
    >>> prof.allocations.nlargest(5, "allocated_bytes")  # doctest: +SKIP

    Tables are pandas DataFrames whose columns and dtypes are declared in
    ``traceparse.tables.contracts``: bytes are Int64, times int64 picoseconds
    from the capture start, unknown values NA, repeated strings categorical
    (``host`` and ``allocator`` with the same categories in every table).

    One way to reach each result:

    - a table that takes no parameters is a **property**: ``breakdown`` (the
      table every view below groups), ``allocations``,
      ``frees_without_allocation``, ``timeline``, ``step_markers``, ``peak``,
      ``attribution``, ``ops``, ``steps``, ``variables``, ``xla_programs``,
      ``xla_buffers``, ``xla_parameters``, ``stacks`` (and tables added later the same way);
    - a table with parameters is a **method whose parameters all have
      defaults**, so the plain call gives the usual view:
      ``scopes(depth=1)``, ``layers(by_replica=False)``,
      ``live_at_peak(allocator=None, host=None, expand_xla=False)``,
      ``predict(batch_size=None, ...)`` and ``predicted_breakdown(batch_size=None, ...)``
      (docs/predict.md);
      ``lines(by_stack=False)`` (bytes per source line, docs/sources.md);
    - a result that is not one DataFrame is a **method** too:
      ``leaks()`` (a ``LeakReport``: a verdict and three tables),
      ``xla_at_peak()`` (two tables: programs and their values at the peak) and
      ``summary()`` (one ``AllocatorRecord`` per allocator, ``records/allocator.py``),
      ``diagnostics()`` (sentences) and ``failures()`` (one ``Failure`` per failed host).

    Everything is computed on first use and cached. The rules are in
    ``analysis`` and ``records``; the Profile hands them its tables. Its XLA
    tables, bytes per source line and predictions are written beside it
    (``core/xla_tables.py``, ``core/source_lines.py``, ``core/predicting.py``).
    """

    def __init__(self, traces: Sequence[MemoryTrace], *, run: str | None = None) -> None:
        if not traces:
            raise ValueError("a Profile needs at least one trace")
        self.traces = list(traces)
        self.run = run
        self._xla = XlaParts(self.traces)

    @property
    def path(self) -> str:
        """The capture file (the first host's, when the run has several)."""
        return self.traces[0].path

    @property
    def paths(self) -> list[str]:
        return [trace.path for trace in self.traces]

    @property
    def hosts(self) -> list[str]:
        return [trace.host for trace in self.traces]

    @property
    def host(self) -> str:
        return ", ".join(self.hosts)

    @property
    def format(self) -> str:
        return self.traces[0].format

    @property
    def allocators(self) -> list[str]:
        """Allocator names seen in the capture, in name order."""
        return sorted(self.timeline["allocator"].dropna().unique().tolist())

    @called_or_read  # read as a property before; that spelling warns for a release
    def diagnostics(self) -> list[str]:
        """Plain sentences about what the capture lacks or what looked wrong."""
        return list(self._diagnostics)

    @pooled_property
    def _diagnostics(self) -> list[str]:
        return capture_notes(
            self.traces,
            self.frees_without_allocation,
            self.allocations,
            self._ends,
            self._xla.notes,
            self._naming.generation,
            self.has_sources,
        )

    @pooled_property
    def _tables(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        allocations, frees, timeline = build_run_tables(self.traces)
        return (
            # Linking adds xla_program / xla_allocation_index (NA when not linked).
            lean_masks(self._conform(self._xla.link(allocations), contracts.ALLOCATIONS)),
            self._conform(frees, contracts.FREES_WITHOUT_ALLOCATION),
            lean_masks(self._conform(timeline, contracts.TIMELINE)),
        )

    @pooled_property
    def _categories(self) -> dict[str, pd.CategoricalDtype]:
        """The hosts and allocators: every table of this Profile has these categories,
        so tables merge and compare on them as they are."""
        allocators = (str(a) for t in self.traces for a in t.events["allocator"].cat.categories)
        return {"host": contracts.shared(self.hosts), "allocator": contracts.shared(allocators)}

    def _conform(self, frame: pd.DataFrame, table: contracts.Table) -> pd.DataFrame:
        """``frame`` as ``table`` declares it, with this Profile's hosts and allocators."""
        return contracts.conform(frame, table, self._categories)

    @property
    def allocations(self) -> pd.DataFrame:
        """One row per allocation event, with its free (``free_ps`` NA while live)."""
        return self._tables[0]

    @property
    def frees_without_allocation(self) -> pd.DataFrame:
        """Deallocations whose allocation happened before the capture started."""
        return self._tables[1]

    @property
    def timeline(self) -> pd.DataFrame:
        """Every memory event per allocator, with the allocator's counters after it."""
        return self._tables[2]

    @pooled_property
    def variables(self) -> pd.DataFrame:
        """The variables alive while the capture was made: one row per variable and host.

        Read from ``<host>.variables.json`` beside the capture (written by
        ``traceparse.profile()``, ``traceparse run`` and the Keras
        ``MemoryCallback``). ``role`` is weight / optimizer / other,
        ``belongs_to`` the weight an optimizer slot belongs to, ``allocator``
        the allocator holding the device's memory (``traceparse.tables.variables``),
        ``at_start`` whether it was alive when the profiler started. Empty, with
        ``attrs["diagnostic"]`` saying why, when the capture has no inventory.
        """
        table = self._conform(variables_table(self.traces, self.timeline), contracts.VARIABLES)
        if not self._has_inventory:
            table.attrs["diagnostic"] = NO_INVENTORY
        return table

    @pooled_property
    def step_markers(self) -> pd.DataFrame:
        """The step markers (``Trace(name, step_num=n, _r=1)`` events) of every host."""
        frames = [t.step_markers.assign(host=t.host) for t in self.traces]
        return self._conform(concat(frames), contracts.STEP_MARKERS)

    # Analyses: built by traceparse.analysis, once each. Each module declares its
    # tables (tables.contracts.declare); docs/analyses.md describes the columns.

    @pooled_property
    def peak(self) -> pd.DataFrame:
        """Per (host, allocator): the latest event at its maximum bytes in use (xprof's rule).

        ``in_use_bytes`` is reserved + allocated, ``capacity_bytes`` in use + available,
        ``event`` the row in ``timeline``.
        """
        return self._conform(peak_table(self.timeline), PEAK)

    @pooled_property
    def peak_instants(self) -> pd.DataFrame:
        """Per (host, allocator) every instant its bytes in use come within 1% of its
        maximum (``analysis/peak_repeats.py``): one row per visit near the peak, its
        highest event. ``peak`` keeps the latest; ``breakdown_at`` opens any."""
        return self._conform(peak_instants(self.timeline), PEAK_INSTANTS)

    def at_instant(self, at: str | int = "last") -> tuple[pd.DataFrame, pd.DataFrame]:
        """``peak`` and ``breakdown`` at another of the repeated peak instants
        (``peak_instants``): ``at`` is ``"first"``, ``"last"`` (the peak's own rule,
        the latest at the maximum) or a step number (that step's highest instant).
        Per allocator: its own instant; an allocator that reaches no instant in the
        step has no rows. A usage error when no allocator has one."""
        chosen = chosen_instants(self.peak_instants, at)
        opened = self._opened(zip(chosen["time_ps"], chosen["host"].astype(str), strict=True))
        return tables_at(chosen, self.timeline, opened, self._categories)

    @pooled_property
    def _peak_repeats(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The summary's repeated peaks (``breakdown_at.peak_repeats``)."""
        opened = self._opened(repeat_instants(self.peak_instants))
        return peak_repeats(self.peak_instants, opened)

    def _opened(self, instants: Iterable[tuple[Any, str]]) -> dict[tuple[int, str], pd.DataFrame]:
        """``breakdown_at`` each (time_ps, host), in order (each once, cached)."""
        return {(int(t), h): self.breakdown_at(int(t), h) for t, h in instants}

    @pooled_property
    def _live_at_peak(self) -> pd.DataFrame:
        table = live_at_peak_table(self.allocations, self.peak, self._ends)
        return self._conform(table, LIVE_AT_PEAK)

    @pooled_property
    def _ends(self) -> np.ndarray:
        """Where each allocation stops holding memory (``liveness.end_events``): a sort
        of every allocation, which several analyses need."""
        return end_events(self.allocations)

    def live_at_peak(
        self, allocator: str | None = None, host: str | None = None, expand_xla: bool = False
    ) -> pd.DataFrame:
        """Every allocation live at its allocator's peak (all steps), largest first.

        The allocations' columns plus ``in_peak_step``; filter on it for the
        TensorBoard Memory Profile page's view. The index is the row in ``allocations``.
        With ``expand_xla=True`` a linked XLA slab becomes one row per HLO
        buffer live at its program's peak (``op`` its TF op, ``xla_buffer`` its
        instruction) plus a row for the slab's slack (docs/xla.md), taken from
        ``breakdown``; the index is then a plain range and ``allocation`` the
        row in ``allocations``.
        """
        live = self._live_at_peak_xla if expand_xla else self._live_at_peak
        return select(live, allocator, host, self.timeline)

    @pooled_property
    def _naming(self) -> CaptureNaming:
        """The names the capture teaches (``analysis.naming.CaptureNaming``): its
        generation, model, layer and optimizer names, variables, each learnt once."""
        return CaptureNaming(
            self.allocations,
            self._xla_slabs,
            self._xla.present,
            self.variables if self._has_inventory else None,
            self._parameters,
            self.frees_without_allocation,
        )

    @pooled_property
    def _holders(self) -> Holders:
        """What names the holders of a breakdown, at the peak or any instant."""
        known, shapes = self._naming.known
        variables = self.variables if self._has_inventory else None
        return Holders(known, shapes, variables, self._parameters, self._naming.variable_match)

    @pooled_property
    def breakdown(self) -> pd.DataFrame:
        """Every byte at each allocator's peak, one row per holder (docs/analyses.md).

        ``holder`` says what holds the bytes (an allocation, an HLO buffer, a
        variable, padding, ...), ``part`` the ``attribution`` column they belong
        to; per allocator ``bytes`` sums exactly to the in-use bytes at its peak.
        ``attribution``, the live-at-peak columns of ``ops`` and ``scopes``,
        ``layers`` and ``summary`` are group-bys and filters of this table.
        """
        table = self._holders.table(self.peak, self._live_at_peak, self._xla_slabs)
        # Source lines (docs/sources.md): the allocations' and the XLA values' TF ops'.
        table = breakdown_sources(table, self.allocations, self._xla.stacks, self.traces)
        # Roles the recorded stacks say where the op names do not (eager loops).
        table = place_by_stack(table, self.stacks, self._holders.shapes)
        return self._conform(table, BREAKDOWN)

    # -- the failure the capture ended in (issue 39) --

    @called_or_read  # read as a property before; that spelling warns for a release
    def failures(self) -> list[Failure]:
        """One ``Failure`` per host whose capture ended in an exception (its
        ``<host>.failure.json``): what raised, the request, the allocator's state then."""
        return list(self._failures)

    @pooled_property
    def _failures(self) -> list[Failure]:
        return failures(self.traces, self.timeline)

    @property
    def failure(self) -> Failure | None:
        """The failure the capture ended in (the first host's that has one); None
        when it ended normally. ``failures()`` has one per host."""
        found = self._failures
        return found[0] if found else None

    def breakdown_at(self, time_ps: int | None = None, host: str | None = None) -> pd.DataFrame:
        """``breakdown`` at any instant: per allocator (of ``host``, or all) the
        rows of what held the bytes just after its latest event at or before
        ``time_ps``, summing to its in-use counter then. Without ``time_ps``: at
        the moment of the failure the capture ended in (``failure``; its host's
        allocators), else at the peaks (``breakdown``)."""
        if time_ps is None:
            failure = self.failure
            if failure is None or failure.time_ps is None:
                return self.breakdown
            time_ps, host = failure.time_ps, failure.host
        return self._breakdown_at(int(time_ps), host)

    @pooled_cache
    def _breakdown_at(self, time_ps: int, host: str | None) -> pd.DataFrame:
        instant, live = live_at(
            self.timeline, self.allocations, self._ends, time_ps, host, self._categories
        )
        return self._conform(self._holders.table(instant, live, self._slabs(live)), BREAKDOWN)

    @pooled_property
    def attribution(self) -> pd.DataFrame:
        """Per allocator at its peak: ``in_use_bytes`` split into parts that sum to it exactly."""
        measured: tuple[str, ...] = ("variable_bytes",) if self._has_inventory else ()
        measured += ("xla_parameter_bytes",) if self._parameters is not None else ()
        return self._conform(attribution_table(self.peak, self.breakdown, measured), ATTRIBUTION)

    @pooled_property
    def _op_time(self) -> pd.DataFrame:
        frames = [t.op_time.assign(host=t.host) for t in self.traces]
        return pd.concat(frames, ignore_index=True)

    @pooled_property
    def ops(self) -> pd.DataFrame:
        """One row per (host, allocator, op): counts, byte sums, bytes at the peak and the end."""
        table = ops_table(self.allocations, self.breakdown, self._op_time, self._ends)
        return self._conform(table, OPS)

    @pooled_cache
    def scopes(self, depth: int = 1, as_written: bool = False) -> pd.DataFrame:
        """The ``ops`` roll-up by name scope, ``depth`` levels deep.

        Scopes start at the model's layer (1: the layer, by the user's name, its
        forward and backward ops together; 2: layer/the scope inside it);
        ops outside a model keep their scopes as written. ``as_written=True``
        groups every op by its scopes as written (1: model, 2: model/layer).
        """
        table = scopes_table(
            self.allocations,
            self.breakdown,
            self._op_time,
            depth,
            bool(as_written),
            self._ends,
            known=self._naming.op_known,
        )
        return self._conform(table, SCOPES)

    @called_or_read  # read as a property before; that spelling warns for a release
    def layers(self, by_replica: bool = False, depth: int = 1) -> pd.DataFrame:
        """One row per (host, allocator, layer): bytes at the peak by kind, rows summing to
        the allocator's in-use bytes (explicit rows for what no layer holds).

        ``by_replica=True`` keeps ``replica_N/`` / ``tower_N/`` scopes apart (column
        ``replica``). ``depth=2`` or more opens nested models: one row per layer
        inside them, ``depth`` levels at most, named by a ``path`` column
        (``block/block_dense``); the rows still sum to the in-use bytes."""
        return self._layers(by_replica=bool(by_replica), depth=checked_depth(depth))

    @property
    def layers_by_replica(self) -> pd.DataFrame:
        """Deprecated: ``layers(by_replica=True)``."""
        moved("Profile.layers_by_replica", "Profile.layers(by_replica=True)")
        return self.layers(by_replica=True)

    @pooled_cache
    def _layers(self, *, by_replica: bool, depth: int = 1) -> pd.DataFrame:
        known, shapes = self._naming.known
        table = layers_table(
            self.breakdown, self.allocations, known, shapes, by_replica=by_replica, depth=depth
        )
        return self._conform(table, layers_contract(by_replica, depth))

    @pooled_property
    def steps(self) -> pd.DataFrame:
        """One row per (host, allocator, step): from step markers, else the allocator's step ids."""
        numbered = [t.host for t in self.traces if t.format != "xplane"]
        table = steps_table(
            self.timeline, self.allocations, self.step_markers, numbered, self._ends
        )
        return self._conform(table, STEPS)

    @pooled_property
    def _leaks(self) -> LeakReport:
        current = held_at_end(self._naming.variable_match)
        report = leak_report(self.steps, self.allocations, current, self._ends)
        return report.conformed(self._categories)

    @called_or_read  # read as a property before; that spelling warns for a release
    def leaks(self) -> LeakReport:
        """Step-over-step growth, a verdict, and the ops holding what stays live."""
        return self._leaks

    def summary(self, predict: bool = False) -> list[AllocatorRecord]:
        """One headline record per (host, allocator); empty without memory events.

        ``predict=True`` also fills each record's ``prediction`` (the predicted peak
        against the batch size, docs/predict.md), which the HTML and JSON reports
        show: it replays the capture at several sizes, so it is only made when asked."""
        return list(self._predicted_summaries if predict else self._summaries)

    @pooled_property
    def _predicted_summaries(self) -> list[AllocatorRecord]:
        return with_predictions(self._summaries, self._report_predictions)

    @pooled_property
    def _summaries(self) -> list[AllocatorRecord]:
        return build_records(
            self.peak,
            self.attribution,
            self.breakdown,
            self._live_at_peak_xla,
            self.ops,
            self.scopes(1),
            self.allocations,
            self.leaks(),
            self.variables if self._has_inventory else None,
            self.xla_parameters if self._parameters is not None else None,
            layers=self.layers(),
            xla_at_peak=self.xla_at_peak(),
            steps=self.steps,
            repeats=self._peak_repeats,
        )

    @pooled_property
    def stacks(self) -> pd.DataFrame:
        """Every recorded stack, one row per frame (outermost first): ``host``,
        ``stack`` (the id in ``breakdown`` and ``lines(by_stack=True)``), ``depth``,
        ``frame`` (``path:line function``) and ``user``. Empty without a record."""
        return self._conform(stacks_table(self.traces), contracts.STACKS)

    @property
    def has_sources(self) -> bool:
        """Whether any allocation names a source line (a source record, or JAX's frames)."""
        return any(t.sources is not None for t in self.traces) or bool(
            self.allocations["source"].notna().any()
        )

    @property
    def recorded_batch(self) -> BatchRecord | None:
        """The batch size the capture's steps saw, as the capture recorded it beside
        itself (``<host>.batch.json``: given to ``profile(batch_size=)``, or read off
        the inputs Keras or a ``tf.function`` received); None for a capture made
        elsewhere, or one whose steps fed no batch traceparse could see. The first
        host's that has one (every host of a run records the same steps)."""
        found = [t.batch for t in self.traces if t.batch is not None]
        return next((b for b in found if b.batch_size is not None), None)

    @property
    def _has_inventory(self) -> bool:
        return any(trace.inventory is not None for trace in self.traces)

    def _repr_html_(self) -> str:
        """The summary as HTML in Jupyter (peaks, attribution, top holders; no scripts).

        More rows: ``traceparse.report.notebook.NotebookReport(prof, top=10)``.
        """
        from traceparse.core.display import profile_html

        return profile_html(self, 5)

    def __repr__(self) -> str:
        return (
            f"<Profile run={self.run!r} hosts={self.hosts} format={self.format!r} "
            f"allocations={len(self.allocations)}>"
        )
