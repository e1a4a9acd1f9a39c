"""What a run's capture lacks or got wrong, in plain sentences: ``Profile.diagnostics()``.

Moved from ``core/profile.py`` (issue 46): ``Profile`` gathers the tables and
caches the list; the sentences, and the few counts they need, are made here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.naming import Generation
from traceparse.core.sidecars import SOURCES
from traceparse.decode.trace import MemoryTrace
from traceparse.units import format_bytes

__all__ = ["NO_INVENTORY", "NO_SOURCES", "SOURCES_REFUSED", "capture_notes", "sources_note"]

NO_EVENTS = (
    "{path}: the capture has no memory events, so there is nothing to attribute. "
    "Likely causes: the host tracer level was below 2 (use the default, 2); the "
    "allocator emits no events (TF_GPU_ALLOCATOR=cuda_malloc_async does not); or the "
    "program made only small allocations (on CPU, mklcpu serves requests under "
    "256 KiB from a pool that records nothing)."
)
NO_INVENTORY = (
    "no variable inventory: the capture was not made by traceparse.profile(), "
    "`traceparse run` or traceparse.integrations.keras.MemoryCallback, so the bytes allocated "
    "before it cannot be named"
)
NO_SOURCES = (
    f"no source lines (no <host>{SOURCES.suffix} beside the capture): capture with "
    "traceparse.profile(), `traceparse run` or its Keras MemoryCallback to name the line "
    "of your code that made each allocation (JAX: python_tracer_level=1)"
)
SOURCES_REFUSED = (
    "no source lines: the source record beside the capture was refused (the diagnostics say why)"
)
ONEDNN_OFF = (
    "{path}: TensorFlow's CPU allocator kept no statistics while this CPU-only capture "
    "was made, so oneDNN was off: TensorFlow's default CPU allocator records no memory "
    "events at all. Set TF_ENABLE_ONEDNN_OPTS=1 before importing TensorFlow and capture "
    "again (`traceparse run` does this for you)."
)


def generation_note(generation: Generation) -> str:
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


def sources_note(traces: Sequence[MemoryTrace]) -> str:
    """Why a run has no source lines: its record was refused, or there is none."""
    return SOURCES_REFUSED if any(t.sources_refused for t in traces) else NO_SOURCES


def capture_notes(
    traces: Sequence[MemoryTrace],
    frees: pd.DataFrame,
    allocations: pd.DataFrame,
    ends: np.ndarray,
    xla_notes: list[str],
    generation: Generation,
    has_sources: bool,
) -> list[str]:
    """The run's diagnostics, in order: each trace's own, a capture without events
    (and why, where the inventory says oneDNN was off), frees of memory from
    before the capture, the XLA notes, inconclusive layer-name clues, allocations
    whose free was dropped (``ends``: ``liveness.end_events``), missing source lines."""
    notes: list[str] = []
    for trace in traces:
        notes.extend(trace.diagnostics)
        if trace.events.empty:
            notes.append(NO_EVENTS.format(path=trace.path))
            if trace.inventory is not None and not any(
                trace.inventory.memory_info.get("start", {})
            ):
                notes.append(ONEDNN_OFF.format(path=trace.path))
    if len(frees):
        notes.append(
            f"{len(frees)} frees release memory allocated before the capture started "
            f"({format_bytes(int(frees['allocated_bytes'].sum()))}); start the profiler "
            "earlier to see those allocations."
        )
    # An allocation without an address pairs with nothing: it is not a reuse. One
    # with no free ends at a later allocation at its address (rows are in time
    # order), which is what ``ends`` found.
    reused = (
        allocations["free_ps"].isna().to_numpy(dtype=bool)
        & allocations["address"].notna().to_numpy(dtype=bool)
        & (ends != STILL_LIVE)
    )
    notes.extend(xla_notes)
    if not generation.sure and generation.clues:
        notes.append(generation_note(generation))
    if reused.any():
        notes.append(
            f"{int(reused.sum())} allocations share an address with a later allocation "
            "and have no recorded free: events were dropped, so their lifetimes are unknown."
        )
    # A refused record has its own diagnostic: "no record beside it" would be wrong.
    refused = any(t.sources_refused for t in traces)
    if len(allocations) and not has_sources and not refused:
        notes.append(NO_SOURCES + ".")
    return notes
