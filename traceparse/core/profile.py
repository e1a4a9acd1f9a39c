"""``Profile``: the tables of one run (one or more hosts), built once and cached."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
from traceparse.analysis.breakdown import BREAKDOWN, breakdown_table, expanded_live
from traceparse.analysis.failure import Failure, failures
from traceparse.analysis.instant import instant_table
from traceparse.analysis.leaks import BY_OP, GROWTH, VERDICTS
from traceparse.analysis.lines import LINES, lines_table
from traceparse.analysis.liveness import STILL_LIVE, end_events
from traceparse.analysis.naming import (
    KERAS3,
    Generation,
    KnownNames,
    VariableMatch,
    gradient_shapes,
    inventory_names,
    known_names,
    match_variables,
    place_by_stack,
    read_generation,
    unique_weight_shapes,
)
from traceparse.analysis.peak import LIVE_AT_PEAK, PEAK
from traceparse.analysis.peak_repeats import (
    MOST_INSTANTS,
    NEAR,
    PEAK_INSTANTS,
    chosen_instant,
    held_at_every,
    peak_instants,
)
from traceparse.analysis.rollups import OPS, SCOPES
from traceparse.analysis.steps import STEPS
from traceparse.analysis.xla_live import programs_at_peak
from traceparse.analysis.xla_params import judged_parameters, representatives
from traceparse.analysis.xla_roles import program_peak_roles
from traceparse.core.compat import called_or_read, moved
from traceparse.core.memory import pooled_call, pooled_property
from traceparse.core.sidecars import SOURCES
from traceparse.core.xla import XlaParts
from traceparse.decode.batch import BatchRecord
from traceparse.decode.trace import MemoryTrace, lean_masks
from traceparse.decode.variables import quote
from traceparse.errors import PredictArgumentError, UsageError
from traceparse.records import AllocatorRecord, build_records
from traceparse.records.build import with_predictions
from traceparse.tables import contracts
from traceparse.tables.build import build_tables
from traceparse.tables.contracts import concat
from traceparse.tables.sources import breakdown_sources, stacks_table
from traceparse.tables.variables import variables_table
from traceparse.units import format_bytes

if TYPE_CHECKING:  # prediction is imported when asked for (the summary never is)
    from traceparse.analysis.predict import Capture as PredictionInput
    from traceparse.analysis.predict import Predictor
    from traceparse.records.whatif import WhatIfRecord

_NO_EVENTS = (
    "{path}: the capture has no memory events, so there is nothing to attribute. "
    "Likely causes: the host tracer level was below 2 (use the default, 2); the "
    "allocator emits no events (TF_GPU_ALLOCATOR=cuda_malloc_async does not); or the "
    "program made only small allocations (on CPU, mklcpu serves requests under "
    "256 KiB from a pool that records nothing)."
)

_NO_INVENTORY = (
    "no variable inventory: the capture was not made by traceparse.profile(), "
    "`traceparse run` or traceparse.integrations.keras.MemoryCallback, so the bytes allocated "
    "before it cannot be named"
)
NO_SOURCES = (
    f"no source lines (no <host>{SOURCES.suffix} beside the capture): capture with "
    "traceparse.profile(), `traceparse run` or its Keras MemoryCallback to name the line "
    "of your code that made each allocation (JAX: python_tracer_level=1)"
)
_SOURCES_REFUSED = (
    "no source lines: the source record beside the capture was refused (the diagnostics say why)"
)
_ONEDNN_OFF = (
    "{path}: TensorFlow's CPU allocator kept no statistics while this CPU-only capture "
    "was made, so oneDNN was off: TensorFlow's default CPU allocator records no memory "
    "events at all. Set TF_ENABLE_ONEDNN_OPTS=1 before importing TensorFlow and capture "
    "again (`traceparse run` does this for you)."
)


def _generation_note(generation: Generation) -> str:
    """Which generation's layer rules were used and the clues, when they disagree or are weak."""
    clues = "; ".join(
        f"{count} op name{'s' if count != 1 else ''} with {key} ({gen})"
        for key, gen, count in generation.clues
    )
    rule = (
        "each scope minus one Keras 3 _N suffix"
        if generation.strips_suffix
        else "each scope as written"
    )
    return (
        f"layer names: the op names were read as written by {generation.name} ({rule}), "
        f"but the clues are not conclusive: {clues}."
    )


class Profile:
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

    Everything is computed on first use and cached.
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
        notes: list[str] = []
        for trace in self.traces:
            notes.extend(trace.diagnostics)
            if trace.events.empty:
                notes.append(_NO_EVENTS.format(path=trace.path))
                if trace.inventory is not None and not any(
                    trace.inventory.memory_info.get("start", {})
                ):
                    notes.append(_ONEDNN_OFF.format(path=trace.path))
        unpaired = self.frees_without_allocation
        if len(unpaired):
            notes.append(
                f"{len(unpaired)} frees release memory allocated before the capture started "
                f"({format_bytes(int(unpaired['allocated_bytes'].sum()))}); start the profiler "
                "earlier to see those allocations."
            )
        allocations = self.allocations
        # An allocation without an address pairs with nothing: it is not a reuse. One
        # with no free ends at a later allocation at its address (rows are in time
        # order), which is what _ends found.
        reused = (
            allocations["free_ps"].isna().to_numpy(dtype=bool)
            & allocations["address"].notna().to_numpy(dtype=bool)
            & (self._ends != STILL_LIVE)
        )
        notes.extend(self._xla.notes)
        generation = self._generation
        if not generation.sure and generation.clues:
            notes.append(_generation_note(generation))
        if reused.any():
            notes.append(
                f"{int(reused.sum())} allocations share an address with a later allocation "
                "and have no recorded free: events were dropped, so their lifetimes are unknown."
            )
        # A refused record has its own diagnostic: "no record beside it" would be wrong.
        refused = any(t.sources_refused for t in self.traces)
        if len(allocations) and not self.has_sources and not refused:
            notes.append(NO_SOURCES + ".")
        return notes

    @pooled_property
    def _tables(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        allocations, frees, timelines = [], [], []
        offset = 0
        for trace in self.traces:
            a, f, t = build_tables(trace)
            if offset:  # event indices point into the combined timeline
                a["alloc_event"] += offset
                a["free_event"] += offset
                f["free_event"] += offset
            offset += len(t)
            allocations.append(a)
            frees.append(f)
            timelines.append(t)
        return (
            # Linking adds xla_program / xla_allocation_index (NA when not linked).
            lean_masks(self._conform(self._xla.link(concat(allocations)), contracts.ALLOCATIONS)),
            self._conform(concat(frees), contracts.FREES_WITHOUT_ALLOCATION),
            lean_masks(self._conform(concat(timelines), contracts.TIMELINE)),
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
            table.attrs["diagnostic"] = _NO_INVENTORY
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
        chosen = chosen_instant(self.peak_instants, at)
        if chosen.empty:
            steps = sorted({int(s) for s in self.peak_instants["step"].dropna()})
            raise UsageError(
                f"no peak instant in step {at}; the peak is reached in steps "
                f"{', '.join(map(str, steps)) or 'none (no marked steps)'}"
            )
        peaks, frames = [], []
        for row in chosen.itertuples(index=False):
            instant = instant_table(self.timeline, int(row.time_ps), str(row.host))
            mine = (instant["allocator"].astype(object) == row.allocator).to_numpy(dtype=bool)
            peaks.append(instant[mine])
            rows = self.breakdown_at(int(row.time_ps), str(row.host))
            frames.append(rows[(rows["allocator"].astype(object) == row.allocator).to_numpy()])
        peak = self._conform(pd.concat(peaks, ignore_index=True), PEAK)
        return peak, self._conform(pd.concat(frames, ignore_index=True), BREAKDOWN)

    @pooled_property
    def _peak_repeats(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Per (host, allocator) whose peak is reached at several instants: the
        instants' steps and bytes, and the layers and ops holding memory at every
        one (``peak_repeats.held_at_every``), for the summary."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        keys = ["host", "allocator"]
        for (host, allocator), mine in self.peak_instants.groupby(keys, observed=True):
            if len(mine) < 2:
                continue
            highest = mine.sort_values("in_use_bytes", ascending=False, kind="stable")
            opened = highest.head(MOST_INSTANTS)
            frames = []
            for time_ps in opened["time_ps"].tolist():
                rows = self.breakdown_at(int(time_ps), str(host))
                frames.append(rows[(rows["allocator"] == allocator).to_numpy(dtype=bool)])
            steps = sorted({int(s) for s in mine["step"].dropna()})
            out[(str(host), str(allocator))] = {
                "instants": len(mine),
                "opened": len(opened),
                "near": NEAR,
                "steps": steps,
                "low_bytes": int(mine["in_use_bytes"].min()),
                "high_bytes": int(mine["in_use_bytes"].max()),
                "layers": held_at_every(frames, "layer"),
                "ops": held_at_every(frames, "op"),
            }
        return out

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
    def _xla_slabs(self) -> pd.DataFrame:
        return self._xla.slabs(self._live_at_peak)

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

    def xla_program_roles(self, program: str, host: str | None = None) -> pd.DataFrame:
        """The buffers one XLA program holds at its own peak, with their role and
        layer (``analysis/xla_roles.py``): what a step needs where the allocator
        records nothing (JAX on CPU). ``program``: the ``xla_programs`` name."""
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

    @pooled_property
    def _known(self) -> tuple[KnownNames, dict[str, str]]:
        """Model, layer and optimizer names (``analysis.layer_owners``), and the
        weight shapes only one layer has."""
        variables = self.variables if self._has_inventory and len(self.variables) else None
        slabs = self._xla_slabs
        ops = {str(o) for o in self.allocations["op"].dropna().unique()}
        ops |= {str(o) for o in slabs["tf_op"].dropna().unique()} if len(slabs) else set()
        known = known_names(sorted(ops), variables, self._parameters, self._generation)
        if variables is not None:
            return known, unique_weight_shapes(variables, known)
        # No inventory: the weights' shapes are those of their gradients (each
        # distinct op and shape once: allocations can be millions).
        frames = [self.allocations[["op", "shape"]]]
        if len(slabs):
            frames.append(slabs[["tf_op", "shape"]].set_axis(["op", "shape"], axis=1))
        pairs = [
            key for f in frames for key in f.groupby(["op", "shape"], observed=True).size().index
        ]
        return known, gradient_shapes([o for o, _ in pairs], [s for _, s in pairs], known)

    @pooled_property
    def _generation(self) -> Generation:
        """Which Keras (or TensorFlow) generation named the ops (``analysis.layer_generation``),
        read from the op names and the inventory's variable names."""
        ops = sorted({str(o) for o in self.allocations["op"].dropna().unique()})
        slabs = self._xla.present and len(self._xla_slabs)
        if slabs:
            ops = sorted({*ops, *(str(o) for o in self._xla_slabs["tf_op"].dropna().unique())})
        variables = self.variables if self._has_inventory and len(self.variables) else None
        return read_generation(ops, inventory_names(variables))

    @pooled_property
    def _op_known(self) -> KnownNames | None:
        """Names learnt from the op names alone (no inventory), for ``scopes`` in a
        capture not written by Keras 3 (whose rules need none)."""
        if self._generation.name == KERAS3:
            return None
        ops = sorted({str(o) for o in self.allocations["op"].dropna().unique()})
        return known_names(ops, None, None, self._generation)

    @pooled_property
    def breakdown(self) -> pd.DataFrame:
        """Every byte at each allocator's peak, one row per holder (docs/analyses.md).

        ``holder`` says what holds the bytes (an allocation, an HLO buffer, a
        variable, padding, ...), ``part`` the ``attribution`` column they belong
        to; per allocator ``bytes`` sums exactly to the in-use bytes at its peak.
        ``attribution``, the live-at-peak columns of ``ops`` and ``scopes``,
        ``layers`` and ``summary`` are group-bys and filters of this table.
        """
        known, shapes = self._known
        table = breakdown_table(
            self.peak,
            self._live_at_peak,
            self._xla_slabs,
            known,
            shapes,
            self.variables if self._has_inventory else None,
            self._parameters,
            self._variable_match,
        )
        # Source lines (docs/sources.md): the allocations' and the XLA values' TF ops'.
        table = breakdown_sources(table, self.allocations, self._xla.stacks, self.traces)
        # Roles the recorded stacks say where the op names do not (eager loops).
        table = place_by_stack(table, self.stacks, shapes)
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
        key = (int(time_ps), host)
        if key not in self._instants:
            instant = self._conform(instant_table(self.timeline, key[0], host), PEAK)
            live = self._conform(
                live_at_peak_table(self.allocations, instant, self._ends), LIVE_AT_PEAK
            )
            known, shapes = self._known
            table = breakdown_table(
                instant,
                live,
                self._xla.slabs(live),
                known,
                shapes,
                self.variables if self._has_inventory else None,
                self._parameters,
                self._variable_match,
            )
            self._instants[key] = self._conform(table, BREAKDOWN)
        return self._instants[key]

    @pooled_property
    def _instants(self) -> dict[tuple[int, str | None], pd.DataFrame]:
        return {}

    @pooled_property
    def _variable_match(self) -> VariableMatch | None:
        """The allocations of the capture holding inventoried variables (created or
        replaced during it); None without an inventory."""
        if not self._has_inventory or self.variables.empty:
            return None
        return match_variables(self.allocations, self.variables, self.frees_without_allocation)

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

    @pooled_call
    def scopes(self, depth: int = 1, as_written: bool = False) -> pd.DataFrame:
        """The ``ops`` roll-up by name scope, ``depth`` levels deep.

        Scopes start at the model's layer (1: the layer, by the user's name, its
        forward and backward ops together; 2: layer/the scope inside it);
        ops outside a model keep their scopes as written. ``as_written=True``
        groups every op by its scopes as written (1: model, 2: model/layer).
        """
        key = (depth, bool(as_written))
        if key not in self._scopes:
            table = scopes_table(
                self.allocations,
                self.breakdown,
                self._op_time,
                depth,
                as_written,
                self._ends,
                known=self._op_known,
            )
            self._scopes[key] = self._conform(table, SCOPES)
        return self._scopes[key]

    @pooled_property
    def _scopes(self) -> dict[tuple[int, bool], pd.DataFrame]:
        return {}

    @called_or_read  # read as a property before; that spelling warns for a release
    def layers(self, by_replica: bool = False, depth: int = 1) -> pd.DataFrame:
        """One row per (host, allocator, layer): bytes at the peak by kind, rows summing to
        the allocator's in-use bytes (explicit rows for what no layer holds).

        ``by_replica=True`` keeps ``replica_N/`` / ``tower_N/`` scopes apart (column
        ``replica``). ``depth=2`` or more opens nested models: one row per layer
        inside them, ``depth`` levels at most, named by a ``path`` column
        (``block/block_dense``); the rows still sum to the in-use bytes."""
        if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
            raise UsageError(
                f"layer depth must be a whole number of levels, 1 or more, not {depth!r}"
            )
        key = (bool(by_replica), int(depth))
        if key not in self._layer_tables:
            self._layer_tables[key] = self._layers(by_replica=key[0], depth=key[1])
        return self._layer_tables[key]

    @property
    def layers_by_replica(self) -> pd.DataFrame:
        """Deprecated: ``layers(by_replica=True)``."""
        moved("Profile.layers_by_replica", "Profile.layers(by_replica=True)")
        return self.layers(by_replica=True)

    @pooled_property
    def _layer_tables(self) -> dict[tuple[bool, int], pd.DataFrame]:
        return {}

    @pooled_call
    def _layers(self, *, by_replica: bool, depth: int = 1) -> pd.DataFrame:
        known, shapes = self._known
        table = layers_table(
            self.breakdown, self.allocations, known, shapes, by_replica=by_replica, depth=depth
        )
        contract = {
            (False, False): contracts.LAYERS,
            (True, False): contracts.LAYERS_BY_REPLICA,
            (False, True): contracts.LAYER_PATHS,
            (True, True): contracts.LAYER_PATHS_BY_REPLICA,
        }[(by_replica, depth > 1)]
        return self._conform(table, contract)

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
        match = self._variable_match
        current = None if match is None else match.named.index[match.named["holds_until_ps"].isna()]
        report = leak_report(self.steps, self.allocations, current, self._ends)
        report.by_op = self._conform(report.by_op, BY_OP)
        report.growth = self._conform(report.growth, GROWTH)
        report.allocators = self._conform(report.allocators, VERDICTS)
        return report

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
    def _report_predictor(self) -> Predictor | None:
        """The Predictor the reports' curves and what-ifs share (one calibration);
        None where the captured batch size cannot be read."""
        try:
            return predictor_of(self)
        except UsageError:
            return None

    @pooled_property
    def _report_predictions(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The reports' curve of the predicted peak against the batch size, per
        (host, allocator); empty where the captured batch size cannot be read."""
        predictor = self._report_predictor
        if predictor is None:
            return {}
        from traceparse.analysis.predict import report_curves

        return report_curves(predictor)

    @pooled_property
    def _report_whatif(self) -> WhatIfRecord | None:
        """The reports' what-if section (``records.whatif.report_whatif``); None
        where the captured batch size cannot be read."""
        from traceparse.records.whatif import report_whatif

        return report_whatif(self._report_predictor, str(self.path))

    # Prediction at another batch size (issue 40, analysis/predict.py, docs/predict.md).
    def predict(
        self,
        batch_size: int | None = None,
        from_batch: int | None = None,
        other: Profile | None = None,
        other_batch: int | None = None,
        *,
        precision: str | None = None,
        optimizer: str | None = None,
        remat: str | tuple[str, ...] | None = None,
    ) -> pd.DataFrame:
        """Per (host, allocator): the predicted peak at ``batch_size`` (default: the
        captured batch size, where the prediction is the capture itself) (with
        ``low_bytes`` / ``high_bytes``), its moment (``step``, ``op``), its bytes by
        role and a ``basis``; ``predicted_breakdown()`` has them by layer and role
        (also in ``attrs["breakdown"]``, which most pandas operations drop).

        The captured batch size is read off the capture unless ``from_batch``
        gives it; ``other`` (a Profile of the same program at another batch
        size, ``other_batch`` when it cannot be read off it) fits each
        allocation's size through both (docs/predict.md). ``precision``
        (``mixed_float16``, ``mixed_bfloat16``, ``float32``), ``optimizer`` (``sgd``,
        ``adam``, ...) and ``remat`` (``"all"`` or layer names) predict the peak with
        that change made (docs/whatif.md).

        >>> prof.predict(256)  # doctest: +SKIP

        A batch that is not a whole number from 1 to ``MAX_BATCH`` raises
        ``TypeError`` / ``ValueError`` (``PredictArgumentError``) naming it.
        """
        for name, value in (
            ("batch_size", batch_size),
            ("from_batch", from_batch),
            ("other_batch", other_batch),
        ):
            if value is not None:
                checked_batch(value, name)
        predictor = predictor_of(self, batch_size, from_batch, other, other_batch)
        if precision is not None or optimizer is not None or remat is not None:
            # What-ifs (docs/whatif.md): the same replay with each allocation resized.
            from traceparse.analysis.whatif import parse_change, what_if

            predictor = what_if(predictor, parse_change(precision, optimizer, remat))
        batch = predictor.batch if batch_size is None else batch_size
        table = predictor.at(batch)
        table.attrs["breakdown"] = predictor.breakdown(batch)
        return table

    def predicted_breakdown(
        self,
        batch_size: int | None = None,
        from_batch: int | None = None,
        other: Profile | None = None,
        other_batch: int | None = None,
    ) -> pd.DataFrame:
        """What ``predict`` (same arguments) predicts, by layer and role: per (host,
        allocator) the bytes of each layer's weights, optimizer state, activations
        and gradients at the predicted peak, with the bytes captured and the basis.
        Many batch sizes at once: ``traceparse.predictor_of(prof).breakdown(n)``.

        >>> prof.predicted_breakdown(256)  # doctest: +SKIP
        """
        predictor = predictor_of(self, batch_size, from_batch, other, other_batch)
        return predictor.breakdown(predictor.batch if batch_size is None else batch_size)

    @pooled_property
    def _prediction_input(self) -> PredictionInput:
        known, shapes = self._known
        fill = {}
        if self._xla.present:  # each linked slab's buffers at its program's peak
            a = self.allocations
            linked = a[a["xla_program"].notna() & a["xla_allocation_index"].notna()]
            wanted = set(
                zip(
                    linked["host"].astype(str),
                    linked["xla_program"].astype(str),
                    linked["xla_allocation_index"].astype(int),
                    strict=True,
                )
            )
            from traceparse.analysis.predict.xla import slab_spans

            fill = slab_spans(self._xla.programs, wanted)
        from traceparse.analysis.predict import Capture

        return Capture(
            self.allocations,
            self.timeline,
            self._ends,
            known,
            shapes,
            self.peak,
            self.breakdown,
            self.variables if self._has_inventory else None,
            self.xla_buffers,
            self.xla_parameters,
            fill,
            self.stacks if self.has_sources else None,
        )

    # -- source lines (docs/sources.md) ----------------------------------------------

    def lines(self, by_stack: bool = False) -> pd.DataFrame:
        """Bytes per line of the program's own code, largest first (``analysis/lines.py``):
        held at each allocator's peak and allocated over the capture, with the
        layers and ops under each line. ``by_stack=True`` keeps whole stacks apart.
        Without source lines the table's ``attrs["diagnostic"]`` says how to get them.
        """
        key = bool(by_stack)
        if key not in self._lines:
            _ = self._tables  # the join fills the stacks
            table = lines_table(self.breakdown, self.allocations, self._xla.stacks, by_stack=key)
            table = self._conform(table, LINES)
            if not self.has_sources:
                table.attrs["diagnostic"] = (
                    _SOURCES_REFUSED if any(t.sources_refused for t in self.traces) else NO_SOURCES
                )
            self._lines[key] = table
        return self._lines[key]

    @pooled_property
    def _lines(self) -> dict[bool, pd.DataFrame]:
        return {}

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


# Prediction at other batch sizes (issue 40): the Predictor behind Profile.predict,
# for many batch sizes at once (analysis/predict_capacity.py).
def checked_batch(value: object, what: str = "batch_size") -> int:
    """``value`` as a batch size: a whole number (``TypeError`` for a float, a bool,
    NaN or text) from 1 to ``MAX_BATCH`` (``PredictArgumentError``, a ValueError,
    otherwise). MAX_BATCH is the largest batch the capacity search tries
    (analysis/predict_capacity.py); past it a batch is a typo, and the sizes
    scaled to it would leave int64."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be a whole number, not {value!r}")
    number = int(value)
    # Imported here, as the predictors are: the summary never loads prediction.
    from traceparse.analysis.predict import MAX_BATCH

    if not 1 <= number <= MAX_BATCH:
        shown = f"{number:,}" if abs(number) < 10**30 else f"a {len(str(abs(number)))}-digit number"
        raise PredictArgumentError(
            f"{what} must be a positive whole number up to {MAX_BATCH:,}, not {shown}"
        )
    return number


def _check_pair(
    profile: Profile, other: Profile, from_batch: int | None, other_batch: int | None
) -> None:
    """Refuse an ``other`` that cannot be fitted with ``profile``: the same capture,
    the same batch given twice, or another program.

    A fit through two captures needs the same program at two batch sizes. The
    batch changes allocations' sizes, not which ops make them: TensorFlow names
    a graph's nodes after the model's code (scopes from layer names), so the
    same program's captures share allocators and nearly all op names (seen:
    94 to 100% of the bytes on every pair of the predict fixtures; 0.4 to 59%
    between different models). Less than half of either capture's bytes under
    ops the other has is another program."""
    if sorted(profile.paths) == sorted(other.paths):
        raise UsageError(
            f"{other.path}: --with names the capture PATH already is; give a capture of "
            "the same program at another batch size"
        )
    if from_batch is not None and other_batch is not None and from_batch == other_batch:
        raise UsageError(
            f"{other.path}: --with-batch {other_batch} is PATH's own batch; a fit needs two "
            "batch sizes"
        )
    mine, theirs = set(profile.allocators), set(other.allocators)
    if not mine & theirs:
        raise UsageError(
            f"{other.path}: none of its allocators ({', '.join(sorted(theirs)) or 'none'}) is "
            f"one of PATH's ({', '.join(sorted(mine)) or 'none'}), so nothing can be fitted "
            "through both: --with needs a capture of the same program on the same devices"
        )
    unmatched = []
    for a, b, names in ((profile, other, ("PATH", "OTHER")), (other, profile, ("OTHER", "PATH"))):
        share, missing = _op_share(a, b)
        if share < 0.5:
            unmatched.append((names, share, missing))
    if unmatched:
        parts = [
            f"{share:.0%} of {mine}'s bytes are by ops {theirs} has (not in {theirs}: "
            f"{', '.join(missing)})"
            for (mine, theirs), share, missing in unmatched
        ]
        raise UsageError(
            f"{other.path}: not the program PATH captured: {'; '.join(parts)}. --with needs "
            "the same program at another batch size"
        )


def _op_share(profile: Profile, other: Profile) -> tuple[float, list[str]]:
    """The share of ``profile``'s requested bytes made by (allocator, op) pairs
    ``other`` has too (op names with Keras' auto-numbered scopes renumbered alike,
    ``program_names``), and up to three of the largest that it lacks."""
    from traceparse.analysis.predict.fit import program_names  # prediction only when asked

    a, b = profile.allocations, other.allocations
    if a.empty:
        return 1.0, []
    keys = pd.MultiIndex.from_arrays([a["allocator"].astype(str), program_names(a["op"])])
    theirs = pd.MultiIndex.from_arrays([b["allocator"].astype(str), program_names(b["op"])])
    found = keys.isin(theirs)
    size = a["requested_bytes"].fillna(0).to_numpy(dtype=np.float64)
    total = float(size.sum())
    share = float(size[found].sum()) / total if total > 0 else float(found.mean())
    lacking = pd.Series(size[~found], index=a["op"].astype(str)[~found].to_numpy())
    missing = lacking.groupby(level=0).sum().sort_values(ascending=False).head(3).index
    return share, [quote(name, 60) for name in missing]


def predictor_of(
    profile: Profile,
    batch_size: int | None = None,
    from_batch: int | None = None,
    other: Profile | None = None,
    other_batch: int | None = None,
) -> Predictor:
    """A Predictor of ``profile`` (captured at ``from_batch``, else at the batch the
    capture recorded, else read off it), fitted through ``other`` (at ``other_batch``,
    else recorded, else read) when given; with two captures the one nearer
    ``batch_size`` gives the order of events. A capture it cannot read a prediction
    from raises ``UsageError`` naming its file.

    A recorded batch (``Profile.recorded_batch``) comes before anything read off the
    shapes: it is what the steps were fed, where the shapes only suggest it."""
    for capture in (profile, other):
        if capture is not None and capture.timeline.empty:
            raise UsageError(
                f"{capture.path}: the capture has no memory events, so there is nothing "
                "to predict from"
            )
    if other is not None:
        # What the user gave is checked as given; a batch equal on both records is
        # fit_two's refusal (both captures at one batch).
        _check_pair(profile, other, from_batch, other_batch)
    recorded = profile.recorded_batch if from_batch is None else None
    if recorded is not None:
        from_batch = recorded.batch_size
    if other is not None and other_batch is None and other.recorded_batch is not None:
        other_batch = other.recorded_batch.batch_size
    try:
        from traceparse.analysis.predict import make_predictor

        predictor = make_predictor(
            profile._prediction_input,
            from_batch,
            None if other is None else other._prediction_input,
            batch_size,
            other_batch,
        )
    except UsageError as exc:
        paths = profile.path if other is None else f"{profile.path} (with {other.path})"
        raise UsageError(f"{paths}: {exc}") from None
    if recorded is not None and predictor.batch == recorded.batch_size:
        predictor.batch_evidence = recorded.evidence
        if predictor.found_batch != recorded.batch_size:
            # As for a batch given that the shapes disagree with: say what they say.
            predictor.batch_evidence += f"; read off the capture: {predictor.found_evidence}"
    return predictor
