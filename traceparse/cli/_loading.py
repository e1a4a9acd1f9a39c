"""Reading captures for a command, with a progress bar for slow reads."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from traceparse.output.units import format_bytes

if TYPE_CHECKING:
    from traceparse.core.profile import Profile
    from traceparse.decode.trace import MemoryTrace
    from traceparse.files.discover import CaptureFile
    from traceparse.gate.baseline import Baseline
    from traceparse.output.terminal import Terminal


def _size(capture: CaptureFile) -> str:
    try:
        return f" ({format_bytes(os.path.getsize(capture.path))})"
    except OSError:
        return ""


def _read(captures: Sequence[CaptureFile], term: Terminal) -> list[MemoryTrace]:
    from traceparse.core.loading import read_trace

    traces: list[MemoryTrace] = []
    with term.progress("Reading captures", total=len(captures)) as bar:
        for capture in captures:
            bar.update(f"Reading {os.path.basename(capture.path)}{_size(capture)}")
            traces.append(read_trace(capture))
            bar.advance()
    return traces


def load_each(paths: Sequence[str], term: Terminal) -> list[Profile]:
    """One ``Profile`` per run and host under every path, oldest run first (``load_all``)."""
    from traceparse.core.loading import each_profile
    from traceparse.files.discover import find_captures

    captures = [capture for path in paths for capture in find_captures(path)]
    return each_profile(captures, read=lambda found: _read(found, term))


def load_newest(path: str, term: Terminal) -> Profile:
    """The newest run under ``path``, all its hosts in one ``Profile`` (``load``).

    When the path holds several runs, a note says which one is shown.
    """
    from traceparse.core.loading import newest_profile
    from traceparse.files.discover import find_captures

    captures = find_captures(path)
    runs = sorted({c.run for c in captures})
    if len(runs) > 1:
        term.note(
            f"{path} holds {len(runs)} runs; showing the newest, {captures[-1].run}. "
            "Give a run directory to see another."
        )
    return newest_profile(captures, read=lambda found: _read(found, term))


def load_baseline(path: str, term: Terminal) -> Baseline:
    """A baseline file, or the figures of the newest run of a capture, to compare with."""
    from traceparse.gate.baseline import baseline_of, is_baseline_file, read_baseline

    if is_baseline_file(path):
        baseline = read_baseline(path)
        for note in baseline.meaning_notes():
            term.warn(note)
        return baseline
    return baseline_of(load_newest(path, term))


def warn_refused_batch(profile: Profile, term: Terminal) -> None:
    """Say, on stderr, why a batch record beside the capture was not used: a command
    that predicts from the batch falls back to the shapes, and would otherwise do
    so without a word (the diagnostic was only in summary's list)."""
    from traceparse.core.sidecars import BATCH

    for note in profile.diagnostics():
        if f"{BATCH.suffix}: " in note:
            term.warn(note)
