"""Where in the user's Python code an allocation was made: the ``source`` column.

JAX's Python tracer (``python_tracer_level=1``) writes each frame as an event on
the host's ``python`` line, named ``$<file>:<line> <function>`` (``$builtins
len`` for C functions, ``$<unknown> ...`` when it cannot tell). The frames
around an allocation on its thread are its call stack (``decode/runs.py``).
The source is the innermost frame outside the standard library and
site-packages. Where frames carry a path, that is decided by the path; JAX
writes only the file's base name (``array_methods.py:599``), which cannot tell
the user's code from a library's, so then the outermost frame with a file and
line is taken: the user's call that led into the library (on the TraceLens JAX
captures, ``generate_elementwise_trace.py:20 elementwise_ops``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from traceparse.decode.runs import RunRecords

# "<file>.py:<line> <function>"; builtins and unknown files have no line.
_FRAME = re.compile(r"^(?P<file>\S+\.py):(?P<line>\d+) (?P<function>.+)$")
_LIBRARY = re.compile(r"(?:^|/)(?:site-packages|dist-packages|lib/python\d+(?:\.\d+)?)/")


def user_frame(frames: list[str]) -> str | None:
    """The user's frame of a call stack (outermost first), or None."""
    located = [f for f in frames if _FRAME.match(f)]
    if not located:
        return None
    with_paths = [f for f in located if "/" in f.split(":", 1)[0]]
    if with_paths:
        for frame in reversed(with_paths):
            if not _LIBRARY.search(frame.split(":", 1)[0]):
                return frame
        return None
    return located[0]


def allocation_sources(
    allocations: pd.DataFrame, records: Mapping[str, RunRecords | None]
) -> pd.Series:
    """Each allocation row's source (categorical, NA where no frames say)."""
    # The rows some frames name, and their sources: categorical codes are made from
    # these alone, not from an object per allocation (allocations can be millions).
    rows: list[int] = []
    found: list[str | None] = []
    hosts = allocations["host"]
    times = allocations["alloc_ps"].to_numpy(dtype=np.int64)
    addresses = allocations["address"].to_numpy(dtype=np.int64, na_value=0)
    for host, record in records.items():
        if record is None or record.allocation_runs.empty:
            continue
        table = record.allocation_runs.dropna(subset=["frames"])
        by_key: dict[tuple[int, int], str | None] = {}
        for t, a, frames in zip(
            table["time_ps"].tolist(),
            table["address"].tolist(),
            table["frames"].tolist(),
            strict=True,
        ):
            by_key[(t, a)] = user_frame(str(frames).split("\n"))
        if not by_key:
            continue
        for row in np.flatnonzero((hosts == host).to_numpy(dtype=bool, na_value=False)).tolist():
            rows.append(row)
            found.append(by_key.get((int(times[row]), int(addresses[row]))))
    named = pd.Categorical(found) if found else pd.Categorical([], pd.Index([], dtype=object))
    codes = np.full(len(allocations), -1, dtype=named.codes.dtype)
    codes[rows] = named.codes
    return pd.Series(pd.Categorical.from_codes(codes, dtype=named.dtype), index=allocations.index)
