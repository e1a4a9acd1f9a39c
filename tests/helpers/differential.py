"""One capture through both decoders (the compiled loops and the numpy path),
compared table by table: what differs, by name."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import pandas as pd

from traceparse.decode import native, xspace
from traceparse.decode.runs import RunRecords
from traceparse.decode.trace import MemoryTrace
from traceparse.decode.xspace import decode_xspace
from traceparse.errors import TraceparseError

TABLES = ("events", "step_markers", "op_time", "function_runs")
VALUES = ("op_types", "start_ns", "duration_ps", "diagnostics", "stat_names")
# Run records (decode/runs.py) are compared apart: "runs" in a name.
RUN_TABLES = ("runs", "allocation_runs")


def decode(data: bytes, on: bool) -> MemoryTrace | str:
    """The trace, or the name of the error (and its message) that rejected it."""
    with native.use_native(on):
        try:
            return decode_xspace(data, path="capture.xplane.pb", host="host")
        except TraceparseError as exc:
            return type(exc).__name__


@contextmanager
def without_runs() -> Iterator[None]:
    """Decoding that reads no run records (decode/runs.py, the "runs" helper's part
    of issue 37): tells whether a difference comes from them."""
    with (
        mock.patch.object(xspace, "run_ids_of", lambda *_: ([], [])),
        mock.patch.object(xspace._Decoder, "_run_records", lambda *_: RunRecords()),
    ):
        yield


def _frames_differ(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    try:
        pd.testing.assert_frame_equal(a, b)
    except AssertionError:
        return True
    return False


def differences(data: bytes) -> tuple[list[str], str]:
    """(what differs between the two decodes, "loaded" or the error's name). A
    difference that goes away when no run records are read is named "runs: ..."."""
    found, outcome = _differences(data)
    if found and not all(n.startswith("runs") for n in found):
        with without_runs():
            again, _ = _differences(data)
        if not again:
            found = [f"runs: {n}" for n in found]
    return found, outcome


def _differences(data: bytes) -> tuple[list[str], str]:
    compiled, numpy = decode(data, True), decode(data, False)
    if isinstance(compiled, str) or isinstance(numpy, str):
        if compiled == numpy:
            return [], str(compiled)
        outcome = lambda t: t if isinstance(t, str) else "loaded"  # noqa: E731
        return [f"outcome: compiled {outcome(compiled)}, numpy {outcome(numpy)}"], "differ"
    found = [n for n in TABLES if _frames_differ(getattr(compiled, n), getattr(numpy, n))]
    found += [n for n in VALUES if getattr(compiled, n) != getattr(numpy, n)]
    a, b = compiled.runs, numpy.runs
    if (a is None) != (b is None):
        found.append("runs: present on one path only")
    elif a is not None and b is not None:
        found += [f"runs.{n}" for n in RUN_TABLES if _frames_differ(getattr(a, n), getattr(b, n))]
        if a.modules != b.modules:
            found.append("runs.modules")
    return found, "loaded"
