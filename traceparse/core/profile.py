"""``Profile``: the tables of one run (one or more hosts), built once and cached."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import pandas as pd

from traceparse.analysis import (
    AllocatorSummary,
    LeakReport,
    attribution_table,
    build_summaries,
    leak_report,
    live_at_peak_table,
    ops_table,
    peak_table,
    scopes_table,
    select,
    steps_table,
)
from traceparse.analysis.attribution import ATTRIBUTION
from traceparse.analysis.leaks import BY_OP, GROWTH, VERDICTS
from traceparse.analysis.peak import LIVE_AT_PEAK, PEAK
from traceparse.analysis.rollups import OPS, SCOPES
from traceparse.analysis.steps import STEPS
from traceparse.decode.trace import MemoryTrace
from traceparse.tables import contracts
from traceparse.tables.build import build_tables
from traceparse.tables.contracts import concat

_NO_EVENTS = (
    "{path}: the capture has no memory events, so there is nothing to attribute. "
    "Likely causes: the host tracer level was below 2 (use the default, 2); the "
    "allocator emits no events (TF_GPU_ALLOCATOR=cuda_malloc_async does not); or the "
    "program made only small allocations (on CPU, mklcpu serves requests under "
    "256 KiB from a pool that records nothing)."
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

    - a table that takes no parameters is a **property**: ``allocations``,
      ``frees_without_allocation``, ``timeline``, ``step_markers``, ``peak``,
      ``attribution``, ``ops``, ``steps`` (and tables added later the same way);
    - a table with parameters is a **method whose parameters all have
      defaults**, so the plain call gives the usual view:
      ``scopes(depth=1)``, ``live_at_peak(allocator=None, host=None)``;
    - a result that is not one DataFrame is a **method** too:
      ``leaks()`` (a ``LeakReport``: a verdict and three tables) and
      ``summary()`` (one ``AllocatorSummary`` per allocator).

    Everything is computed on first use and cached.
    """

    def __init__(self, traces: Sequence[MemoryTrace], *, run: str | None = None) -> None:
        if not traces:
            raise ValueError("a Profile needs at least one trace")
        self.traces = list(traces)
        self.run = run

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

    @cached_property
    def diagnostics(self) -> list[str]:
        """Plain sentences about what the capture lacks or what looked wrong."""
        notes: list[str] = []
        for trace in self.traces:
            notes.extend(trace.diagnostics)
            if trace.events.empty:
                notes.append(_NO_EVENTS.format(path=trace.path))
        unpaired = self.frees_without_allocation
        if len(unpaired):
            notes.append(
                f"{len(unpaired)} frees release memory allocated before the capture started "
                f"({int(unpaired['allocated_bytes'].sum()):,} bytes); start the profiler "
                "earlier to see those allocations."
            )
        allocations = self.allocations
        # An allocation without an address pairs with nothing: it is not a reuse.
        reused = (
            allocations["free_ps"].isna()
            & allocations["address"].notna()
            & allocations.duplicated(["host", "allocator", "address"], keep="last")
        )
        if reused.any():
            notes.append(
                f"{int(reused.sum())} allocations share an address with a later allocation "
                "and have no recorded free: events were dropped, so their lifetimes are unknown."
            )
        return notes

    @cached_property
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
            self._conform(concat(allocations), contracts.ALLOCATIONS),
            self._conform(concat(frees), contracts.FREES_WITHOUT_ALLOCATION),
            self._conform(concat(timelines), contracts.TIMELINE),
        )

    @cached_property
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

    @property
    def step_markers(self) -> pd.DataFrame:
        """The step markers (``Trace(name, step_num=n, _r=1)`` events) of every host."""
        frames = [t.step_markers.assign(host=t.host) for t in self.traces]
        return self._conform(concat(frames), contracts.STEP_MARKERS)

    # Analyses: built by traceparse.analysis, once each. Each module declares its
    # tables (tables.contracts.declare); docs/analyses.md describes the columns.

    @cached_property
    def peak(self) -> pd.DataFrame:
        """Per (host, allocator): the latest event at its maximum bytes in use (xprof's rule).

        ``in_use_bytes`` is reserved + allocated, ``capacity_bytes`` in use + available,
        ``event`` the row in ``timeline``.
        """
        return self._conform(peak_table(self.timeline), PEAK)

    @cached_property
    def _live_at_peak(self) -> pd.DataFrame:
        return self._conform(live_at_peak_table(self.allocations, self.peak), LIVE_AT_PEAK)

    def live_at_peak(self, allocator: str | None = None, host: str | None = None) -> pd.DataFrame:
        """Every allocation live at its allocator's peak (all steps), largest first.

        The allocations' columns plus ``in_peak_step``; filter on it for the
        TensorBoard Memory Profile page's view. The index is the row in ``allocations``.
        """
        return select(self._live_at_peak, allocator, host, self.timeline)

    @cached_property
    def attribution(self) -> pd.DataFrame:
        """Per allocator at its peak: ``in_use_bytes`` split into parts that sum to it exactly."""
        return self._conform(attribution_table(self.peak, self._live_at_peak), ATTRIBUTION)

    @cached_property
    def _op_time(self) -> pd.DataFrame:
        frames = [t.op_time.assign(host=t.host) for t in self.traces]
        return pd.concat(frames, ignore_index=True)

    @cached_property
    def ops(self) -> pd.DataFrame:
        """One row per (host, allocator, op): counts, byte sums, bytes at the peak and the end."""
        return self._conform(ops_table(self.allocations, self.peak, self._op_time), OPS)

    def scopes(self, depth: int = 1) -> pd.DataFrame:
        """The ``ops`` roll-up by name scope, ``depth`` levels deep (1: model, 2: layer)."""
        if depth not in self._scopes:
            table = scopes_table(self.allocations, self.peak, self._op_time, depth)
            self._scopes[depth] = self._conform(table, SCOPES)
        return self._scopes[depth]

    @cached_property
    def _scopes(self) -> dict[int, pd.DataFrame]:
        return {}

    @cached_property
    def steps(self) -> pd.DataFrame:
        """One row per (host, allocator, step): from step markers, else the allocator's step ids."""
        numbered = [t.host for t in self.traces if t.format != "xplane"]
        table = steps_table(self.timeline, self.allocations, self.step_markers, numbered)
        return self._conform(table, STEPS)

    @cached_property
    def _leaks(self) -> LeakReport:
        report = leak_report(self.steps, self.allocations)
        report.by_op = self._conform(report.by_op, BY_OP)
        report.growth = self._conform(report.growth, GROWTH)
        report.allocators = self._conform(report.allocators, VERDICTS)
        return report

    def leaks(self) -> LeakReport:
        """Step-over-step growth, a verdict, and the ops holding what stays live."""
        return self._leaks

    def summary(self) -> list[AllocatorSummary]:
        """One headline record per (host, allocator); empty without memory events."""
        return build_summaries(
            self.peak,
            self.attribution,
            self._live_at_peak,
            self.ops,
            self.scopes(1),
            self.allocations,
            self.leaks(),
        )

    def __repr__(self) -> str:
        return (
            f"<Profile run={self.run!r} hosts={self.hosts} format={self.format!r} "
            f"allocations={len(self.allocations)}>"
        )
