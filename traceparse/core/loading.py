"""``load`` and ``load_all``: from a path to ``Profile`` objects."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Literal

from traceparse.core.memory import pooled_call
from traceparse.core.profile import Profile
from traceparse.core.sidecars import read_sidecars
from traceparse.decode.memory_profile import decode_memory_profile
from traceparse.decode.trace import MemoryTrace
from traceparse.decode.xspace import decode_xspace
from traceparse.errors import InputError, UsageError
from traceparse.files.discover import (
    MAX_DECOMPRESSED_BYTES,
    MAX_PROTOBUF_BYTES,
    CaptureFile,
    find_captures,
    read_buffer,
    read_bytes,
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
    read_sidecars(capture, trace)
    return trace


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
