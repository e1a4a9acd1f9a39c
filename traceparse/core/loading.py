"""``load`` and ``load_all``: from a path to ``Profile`` objects."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

from traceparse.core.memory import pooled_call
from traceparse.core.profile import Profile
from traceparse.decode.failure import (
    MAX_FAILURE_BYTES,
    FailureProblem,
    check_identity,
    decode_failure,
)
from traceparse.decode.memory_profile import decode_memory_profile
from traceparse.decode.sources import SourcesProblem, decode_sources
from traceparse.decode.trace import MemoryTrace
from traceparse.decode.variables import InventoryProblem, decode_inventory
from traceparse.decode.xspace import decode_xspace
from traceparse.errors import CaptureTooLargeError, InputError, UsageError
from traceparse.files.discover import (
    FAILURE_SUFFIX,
    INVENTORY_SUFFIX,
    MAX_DECOMPRESSED_BYTES,
    MAX_INVENTORY_BYTES,
    MAX_PROTOBUF_BYTES,
    MAX_SOURCES_BYTES,
    SOURCES_SUFFIX,
    CaptureFile,
    find_captures,
    read_buffer,
    read_bytes,
    sidecar,
)

PathLike = str | os.PathLike[str]
# Reads a list of captures into traces, in order (the CLI's shows progress).
Reader = Callable[[Sequence[CaptureFile]], list[MemoryTrace]]


@pooled_call
def read_trace(capture: CaptureFile) -> MemoryTrace:
    """Decode one capture file, whatever its format."""
    # Protobuf files stop at protobuf's limit; JSON at the decompression limit.
    if capture.format == "xplane":
        # A large file's pages are given back as the decoder passes them.
        buffer = read_buffer(capture, MAX_PROTOBUF_BYTES)
        trace = decode_xspace(buffer, path=capture.path, host=capture.host)
    else:
        binary = capture.format == "memory_profile"
        data = read_bytes(capture, MAX_PROTOBUF_BYTES if binary else MAX_DECOMPRESSED_BYTES)
        trace = decode_memory_profile(
            data, path=capture.path, host=capture.host, binary=capture.format == "memory_profile"
        )
    read_inventory(capture, trace)
    read_failure(capture, trace)
    read_sources(capture, trace)
    return trace


def read_inventory(capture: CaptureFile, trace: MemoryTrace) -> None:
    """Attach the variable inventory beside ``capture`` to ``trace``, if there is one.

    An unusable inventory (bad content, too large, a FIFO, a directory, a link
    loop) becomes one diagnostic: the capture itself is fine.
    """
    found = sidecar(capture, INVENTORY_SUFFIX)
    if found is None:
        return
    try:
        data = read_bytes(found, MAX_INVENTORY_BYTES)
        trace.inventory = decode_inventory(data, path=found.path)
    except InventoryProblem as exc:
        reason = str(exc)
    except CaptureTooLargeError:
        reason = f"it is larger than the {MAX_INVENTORY_BYTES // 2**20} MiB traceparse reads"
    except InputError as exc:
        # The reader's sentence without its path (the diagnostic starts with it)
        # and without its advice, which is about captures.
        reason = str(exc).removeprefix(f"{found.path}: ").split("; ", 1)[0]
    else:
        return
    trace.diagnostics.append(
        f"{found.path}: the variable inventory was ignored: {reason}; capture again "
        "with traceparse.profile() to name the variables"
    )


def read_failure(capture: CaptureFile, trace: MemoryTrace) -> None:
    """Attach the failure record beside ``capture`` (``<host>.failure.json``) to
    ``trace``, if there is one; an unusable or stale record becomes one diagnostic."""
    found = sidecar(capture, FAILURE_SUFFIX)
    if found is None:
        return
    try:
        data = read_bytes(found, MAX_FAILURE_BYTES)
        record = decode_failure(data, path=found.path, host=capture.host)
        stop_ns = None
        if trace.start_ns is not None and trace.duration_ps is not None:
            stop_ns = trace.start_ns + trace.duration_ps // 1000
        time_ps = check_identity(record, trace.start_ns, stop_ns)
    except FailureProblem as exc:
        reason = str(exc)
    except CaptureTooLargeError:
        reason = f"it is larger than the {MAX_FAILURE_BYTES // 2**20} MiB traceparse reads"
    except InputError as exc:
        reason = str(exc).removeprefix(f"{found.path}: ").split("; ", 1)[0]
    else:
        trace.failure = replace(record, time_ps=time_ps)
        return
    trace.diagnostics.append(f"{found.path}: the failure record was ignored: {reason}")


# How far the capture's own start may lie outside the recorder's window: the
# recorder's clock is read just before the profiler starts and after it stops.
_CLOCK_SLACK_NS = 2 * 10**9
SOURCES_ADVICE = (
    "capture with traceparse.profile(), `traceparse run` or "
    "traceparse.integrations.keras.MemoryCallback to record source lines"
)


def read_sources(capture: CaptureFile, trace: MemoryTrace) -> None:
    """Attach the source record beside ``capture`` to ``trace`` (docs/sources.md).

    An unusable record, or one written by another capture (its clock window
    does not hold this capture's start), becomes one diagnostic.
    """
    found = sidecar(capture, SOURCES_SUFFIX)
    if found is None:
        return
    try:
        data = read_bytes(found, MAX_SOURCES_BYTES)
        record = decode_sources(data, path=found.path)
    except SourcesProblem as exc:
        reason = str(exc)
    except CaptureTooLargeError:
        reason = f"it is larger than the {MAX_SOURCES_BYTES // 2**20} MiB traceparse reads"
    except InputError as exc:
        reason = str(exc).removeprefix(f"{found.path}: ").split("; ", 1)[0]
    else:
        start = trace.start_ns
        if (
            start is not None
            and record.started_ns is not None
            and record.stopped_ns is not None
            and not (
                record.started_ns - _CLOCK_SLACK_NS <= start <= record.stopped_ns + _CLOCK_SLACK_NS
            )
        ):
            reason = "it was written by another capture (its times do not hold this capture's)"
        else:
            trace.sources = record
            return
    trace.diagnostics.append(
        f"{found.path}: the source lines were ignored: {reason}; {SOURCES_ADVICE}"
    )


def read_traces(captures: Sequence[CaptureFile]) -> list[MemoryTrace]:
    """Decode the captures in order; the command line passes its own, with a progress bar."""
    return [read_trace(capture) for capture in captures]


def newest_profile(captures: Sequence[CaptureFile], read: Reader = read_traces) -> Profile:
    """The newest run of ``captures`` (``find_captures`` order), all hosts in one Profile."""
    newest = captures[-1].run_dir
    mine = [capture for capture in captures if capture.run_dir == newest]
    return Profile(read(mine), run=mine[0].run)


def each_profile(captures: Sequence[CaptureFile], read: Reader = read_traces) -> list[Profile]:
    """One Profile per capture (run and host), in the order given."""
    traces = read(captures)
    return [Profile([t], run=c.run) for c, t in zip(captures, traces, strict=True)]


def load(path: PathLike) -> Profile:
    """The newest run under ``path`` (a logdir, a run directory or a capture file).

    All hosts of that run are in the one ``Profile``; tables have a ``host``
    column. Raises a ``TraceparseError`` subclass for a bad path or file.
    """
    return newest_profile(find_captures(path))


class Profiles(list[Profile]):
    """``load_all``'s list of profiles; ``diagnostics``: one line per capture file
    it skipped (``errors="skip"``), naming the file and why."""

    def __init__(self, profiles: Sequence[Profile] = (), diagnostics: Sequence[str] = ()) -> None:
        super().__init__(profiles)
        self.diagnostics: list[str] = list(diagnostics)


def load_all(path: PathLike, errors: Literal["raise", "skip"] = "raise") -> Profiles:
    """One ``Profile`` per run and host under ``path``, oldest run first.

    A capture file that cannot be read (corrupt, truncated, too large, not
    readable) raises a ``TraceparseError`` subclass, as ``load`` does; with
    ``errors="skip"`` it is left out and named in the list's ``diagnostics``
    instead (as ``batch`` keeps its failures), so one bad file anywhere under
    a logdir does not hide the others. A path with no capture still raises.

    >>> profiles = traceparse.load_all("logs/", errors="skip")  # doctest: +SKIP
    >>> profiles.diagnostics  # doctest: +SKIP
    ['skipped logs/old/h.xplane.pb: not a readable XSpace (truncated or corrupt: ...)...']
    """
    if errors not in ("raise", "skip"):
        raise UsageError(f"errors={errors!r}: give 'raise' or 'skip'")
    captures = find_captures(path)
    if errors == "raise":
        return Profiles(each_profile(captures))
    profiles = Profiles()
    for capture in captures:
        try:
            trace = read_trace(capture)
        except InputError as exc:  # a file's problem, which names it
            profiles.diagnostics.append(f"skipped {exc}")
            continue
        profiles.append(Profile([trace], run=capture.run))
    return profiles
