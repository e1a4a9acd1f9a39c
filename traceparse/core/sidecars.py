"""The records written beside a capture, in one registry (``SIDECARS``).

Each record (``<host>.variables.json``, ``<host>.failure.json``,
``<host>.sources.json.gz``, ``<host>.batch.json``) is one :class:`Sidecar`: its
file name, the most bytes read of it, how it is written (``write``: the capture
stage calls it), how it is read, checked and attached to the capture's trace
(``read``: loading calls every entry), and whether ``traceparse batch``'s
fingerprint covers it. A file name is written here and nowhere else; adding a
record is one entry here, its decoder and what records it.

An unusable record becomes one diagnostic that names it; the capture itself
still loads.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from traceparse.decode.batch import (
    MAX_BATCH_BYTES,
    BatchProblem,
    BatchRecord,
    batch_budget,
    decode_batch,
)
from traceparse.decode.failure import (
    MAX_FAILURE_BYTES,
    FailureProblem,
    FailureRecord,
    check_identity,
    decode_failure,
)
from traceparse.decode.limits import JsonBudget
from traceparse.decode.sources import (
    SourceRecord,
    SourcesProblem,
    decode_sources,
    sources_budget,
)
from traceparse.decode.trace import MemoryTrace
from traceparse.decode.variables import (
    MAX_INVENTORY_VARIABLES,
    InventoryProblem,
    decode_inventory,
)
from traceparse.errors import CaptureTooLargeError, InputError
from traceparse.files.atomic import atomic_write
from traceparse.files.discover import CaptureFile, read_bytes, sidecar

__all__ = [
    "BATCH",
    "FAILURE",
    "INVENTORY",
    "SIDECARS",
    "SOURCES",
    "SOURCES_ADVICE",
    "Sidecar",
    "read_sidecars",
]

T = TypeVar("T")


def _inventory_budget() -> JsonBudget:
    # An object and a shape list per variable and about a dozen fields each;
    # the failure record needs none: its 1 MiB bound keeps parsing under ~30 MB.
    return JsonBudget(
        "variable inventory",
        4 * MAX_INVENTORY_VARIABLES + 1024,
        64 * MAX_INVENTORY_VARIABLES,
        InventoryProblem,
    )


# How far the capture's own start may lie outside the recorder's window: the
# recorder's clock is read just before the profiler starts and after it stops.
_CLOCK_SLACK_NS = 2 * 10**9
SOURCES_ADVICE = (
    "capture with traceparse.profile(), `traceparse run` or "
    "traceparse.integrations.keras.MemoryCallback to record source lines"
)


class _Stale(Exception):
    """A record written by another capture than the one beside it."""


def _same_capture(trace: MemoryTrace, began: int | None, ended: int | None) -> None:
    """Raise ``_Stale`` where the recorder's clock window (``began``..``ended``, ns)
    does not hold the capture's start: the record beside it is another capture's."""
    start = trace.start_ns
    if start is None or began is None or ended is None:
        return
    if not began - _CLOCK_SLACK_NS <= start <= ended + _CLOCK_SLACK_NS:
        raise _Stale("it was written by another capture (its times do not hold this capture's)")


def _read_beside(
    capture: CaptureFile,
    trace: MemoryTrace,
    suffix: str,
    limit: int,
    problem: type[Exception],
    decode: Callable[[bytes, str], T],
    ignored: Callable[[str], str],
    budget: Callable[[], JsonBudget] | None = None,
) -> T | None:
    """The record ``<host><suffix>`` beside ``capture`` decoded, or None: absent, or
    unusable (then ``ignored(reason)`` is added to the trace's diagnostics, after
    the record's path). ``budget`` counts the text as it is read, so a record
    that would cost too much to parse is refused before it is parsed."""
    found = sidecar(capture, suffix)
    if found is None:
        return None
    try:
        scan = None if budget is None else budget()
        return decode(read_bytes(found, limit, scan=scan), found.path)
    except (problem, _Stale) as exc:
        reason = str(exc)
    except CaptureTooLargeError:
        reason = f"it is larger than the {limit // 2**20} MiB traceparse reads"
    except InputError as exc:
        # The reader's sentence without its path (the diagnostic starts with it)
        # and without its advice, which is about captures.
        reason = str(exc).removeprefix(f"{found.path}: ").split("; ", 1)[0]
    trace.diagnostics.append(f"{found.path}: {ignored(reason)}")
    return None


def read_inventory(capture: CaptureFile, trace: MemoryTrace) -> None:
    """Attach the variable inventory beside ``capture`` to ``trace``, if there is one
    (a FIFO, a directory or a link loop is an unusable one)."""
    found = _read_beside(
        capture,
        trace,
        INVENTORY.suffix,
        INVENTORY.limit,
        InventoryProblem,
        lambda data, path: decode_inventory(data, path=path),
        lambda reason: (
            f"the variable inventory was ignored: {reason}; capture again "
            "with traceparse.profile() to name the variables"
        ),
        _inventory_budget,
    )
    if found is not None:
        trace.inventory = found


def read_failure(capture: CaptureFile, trace: MemoryTrace) -> None:
    """Attach the failure record beside ``capture`` (``<host>.failure.json``) to
    ``trace``, if there is one; one from another run (its time outside this
    capture's window) is ignored."""

    def decode(data: bytes, path: str) -> FailureRecord:
        record = decode_failure(data, path=path, host=capture.host)
        stop_ns = None
        if trace.start_ns is not None and trace.duration_ps is not None:
            stop_ns = trace.start_ns + trace.duration_ps // 1000
        return replace(record, time_ps=check_identity(record, trace.start_ns, stop_ns))

    found = _read_beside(
        capture,
        trace,
        FAILURE.suffix,
        FAILURE.limit,
        FailureProblem,
        decode,
        lambda reason: f"the failure record was ignored: {reason}",
    )
    if found is not None:
        trace.failure = found


def read_sources(capture: CaptureFile, trace: MemoryTrace) -> None:
    """Attach the source record beside ``capture`` to ``trace`` (docs/sources.md);
    one written by another capture (its clock window does not hold this
    capture's start) is ignored."""

    def decode(data: bytes, path: str) -> SourceRecord:
        record = decode_sources(data, path=path)
        _same_capture(trace, record.started_ns, record.stopped_ns)
        return record

    found = _read_beside(
        capture,
        trace,
        SOURCES.suffix,
        SOURCES.limit,
        SourcesProblem,
        decode,
        lambda reason: f"the source lines were ignored: {reason}; {SOURCES_ADVICE}",
        sources_budget,
    )
    if found is None:
        trace.sources_refused = sidecar(capture, SOURCES.suffix) is not None
        return
    trace.sources = found
    if trace.start_ns is None and len(found.eager_ns):
        # tables/sources.py joins eager ops by wall-clock time, which needs the start.
        trace.diagnostics.append(
            f"{found.path}: its {len(found.eager_ns):,} eager ops are not matched to "
            "allocations, so those have no source line: the capture does not say when it "
            "started (TensorFlow before 2.20 records no start time, and no usable "
            "traceparse.clock mark is in it); capture again with this traceparse"
        )


def read_batch(capture: CaptureFile, trace: MemoryTrace) -> None:
    """Attach the batch record beside ``capture`` to ``trace`` (``decode/batch.py``);
    one written by another capture (its clock window does not hold this capture's
    start) is ignored, as a source record from another run is."""

    def decode(data: bytes, path: str) -> BatchRecord:
        record = decode_batch(data, path=path)
        _same_capture(trace, record.started_ns, record.stopped_ns)
        return record

    found = _read_beside(
        capture,
        trace,
        BATCH.suffix,
        BATCH.limit,
        BatchProblem,
        decode,
        lambda reason: (
            f"the recorded batch size was ignored: {reason}; predictions read the batch "
            "off the capture's shapes (or give --from-batch)"
        ),
        batch_budget,
    )
    if found is not None:
        trace.batch = found


# -- the registry -------------------------------------------------------------------


def _json(document: Any) -> bytes:
    # ensure_ascii: control and bidi characters of a message travel as \\u escapes.
    return (json.dumps(document, indent=1, ensure_ascii=True) + "\n").encode()


def _gzip_json(document: Any) -> bytes:
    text = json.dumps(document, separators=(",", ":"))
    # mtime=0: the same record gives the same bytes.
    return gzip.compress(text.encode(), compresslevel=6, mtime=0)


@dataclass(frozen=True)
class Sidecar:
    """One record written beside a capture as ``<host><suffix>``."""

    name: str  # the key of its entry in a batch fingerprint
    suffix: str
    title: str  # what it is, in a sentence
    limit: int  # the most bytes read of it (expanded, for gzip)
    read: Callable[[CaptureFile, MemoryTrace], None]  # attach it to the trace
    encode: Callable[[Any], bytes]  # its JSON-able document to the file's bytes
    # Whether ``traceparse batch`` redoes a capture when this record beside it is
    # added, changed or removed (every record the analysis reads).
    fingerprint: bool = True

    def path(self, run_dir: str | os.PathLike[str], host: str) -> str:
        """``<run_dir>/<host><suffix>``."""
        return os.path.join(os.fspath(run_dir), host + self.suffix)

    def beside(self, capture: CaptureFile) -> CaptureFile | None:
        """The record beside ``capture``, if anything is there (``files.discover.sidecar``)."""
        return sidecar(capture, self.suffix)

    def write(self, document: Any, run_dir: str | os.PathLike[str], host: str) -> str:
        """Write ``document`` as ``<run_dir>/<host><suffix>``, atomically; return its path."""
        path = self.path(run_dir, host)
        atomic_write(path, self.encode(document))
        return path


# A variable inventory lists a model's variables, about 400 bytes each as traceparse
# writes them: a few thousand variables, a few MiB at most. Parsing JSON takes up to
# ~25 times the file in memory, so this bound keeps a crafted one under half a GiB.
INVENTORY = Sidecar(
    "inventory", ".variables.json", "variable inventory", 16 * 2**20, read_inventory, _json
)
# A message, a traceback and a few numbers (decode.failure.MAX_FAILURE_BYTES).
FAILURE = Sidecar(
    "failure", ".failure.json", "failure record", MAX_FAILURE_BYTES, read_failure, _json
)
# docs/sources.md. A record lists a few thousand graph ops and at most two million
# eager ops; this bound on its expanded size keeps a crafted one under a GiB or so.
SOURCES = Sidecar(
    "sources", ".sources.json.gz", "source record", 128 * 2**20, read_sources, _gzip_json
)
# The batch size of the steps a capture saw (decode/batch.py).
BATCH = Sidecar("batch", ".batch.json", "batch record", MAX_BATCH_BYTES, read_batch, _json)

# In the order they are read (and fingerprinted).
SIDECARS: tuple[Sidecar, ...] = (INVENTORY, FAILURE, SOURCES, BATCH)


def read_sidecars(capture: CaptureFile, trace: MemoryTrace) -> None:
    """Attach every record beside ``capture`` to ``trace``; an unusable one is a diagnostic."""
    for entry in SIDECARS:
        entry.read(capture, trace)
