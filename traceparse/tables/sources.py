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
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from traceparse.decode.runs import RunRecords
from traceparse.decode.trace import MemoryTrace

# "<file>.py:<line> <function>"; builtins and unknown files have no line.
_FRAME = re.compile(r"^(?P<file>\S+\.py):(?P<line>\d+) (?P<function>.+)$")
_LIBRARY = re.compile(r"(?:^|/)(?:site-packages|dist-packages|lib/python\d+(?:\.\d+)?)/")


def is_library_path(path: str) -> bool:
    """Whether a frame's file is a library's (an installed package or the standard
    library: TensorFlow, Keras, ...), not the program's own; the one test every
    reader of frames uses."""
    return _LIBRARY.search(path) is not None


def user_frame(frames: list[str]) -> str | None:
    """The user's frame of a call stack (outermost first), or None."""
    located = [f for f in frames if _FRAME.match(f)]
    if not located:
        return None
    with_paths = [f for f in located if "/" in f.split(":", 1)[0]]
    if with_paths:
        for frame in reversed(with_paths):
            if not is_library_path(frame.split(":", 1)[0]):
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


# -- the source record (TensorFlow captures; docs/sources.md) -------------------------

# The scope TensorFlow puts a gradient op under: the forward op's name follows.
_GRADIENT_SCOPES = ("gradient_tape/", "gradients/")


def op_stack(name: str, ops: Mapping[str, int]) -> int | None:
    """The recorded stack of the op the profiler calls ``name``, or None.

    Exact first; a gradient op takes its forward op's stack (the line that
    called the layer); a name under a call's wrapper (``StatefulPartitionedCall/``)
    drops the wrapper; a node the graph optimizer made under an op's name takes
    that op's.
    """
    for scope in _GRADIENT_SCOPES:
        if name.startswith(scope):
            forward = _longest_prefix(name[len(scope) :], ops)
            if forward is not None:
                return forward
    found = ops.get(name)
    if found is not None:
        return found
    parts = name.split("/")
    for start in range(1, len(parts)):
        found = ops.get("/".join(parts[start:]))
        if found is not None:
            return found
    return _longest_prefix(name, ops)


def _longest_prefix(name: str, ops: Mapping[str, int]) -> int | None:
    parts = name.split("/")
    for end in range(len(parts), 0, -1):
        found = ops.get("/".join(parts[:end]))
        if found is not None:
            return found
    return None


def recorded_stacks(allocations: pd.DataFrame, traces: Sequence[MemoryTrace]) -> pd.Series:
    """Each allocation's recorded stack id (Int64, NA where the record has none)
    (its host's ``SourceRecord``): by op name for graph ops, by time for eager ops."""
    out = np.full(len(allocations), -1, dtype=np.int64)
    hosts = allocations["host"].astype(object).to_numpy()
    ops = allocations["op"]
    codes = ops.cat.codes.to_numpy(dtype=np.int64)
    names = [str(n) for n in ops.cat.categories]
    times = allocations["alloc_ps"].to_numpy(dtype=np.int64)
    for trace in traces:
        record = trace.sources
        if record is None:
            continue
        mine = np.flatnonzero(hosts == trace.host)
        if not len(mine):
            continue
        # Each op name is looked up once, not once per allocation.
        graph = np.array([_stack_or(name, record.ops) for name in names] + [-1], dtype=np.int64)
        scoped = np.array(["/" in name for name in names] + [False], dtype=bool)
        found = graph[codes[mine]]
        # A name without a scope is an eager op's type, or a node at the top of a
        # function: the next eager op on the thread says which (ops run synchronously,
        # and a function call's callback follows everything the function did).
        bare = ~scoped[codes[mine]]
        if bare.any() and len(record.eager_ns) and trace.start_ns is not None:
            at = trace.start_ns + times[mine[bare]] // 1000
            slot = np.searchsorted(record.eager_ns, at, side="left")
            inside = slot < len(record.eager_ns)
            slot = np.minimum(slot, len(record.eager_ns) - 1)
            eager = inside & ~(record.eager_function[slot] & (found[bare] >= 0))
            picked = found[bare]
            picked[eager] = record.eager_stack[slot[eager]]
            found[bare] = picked
        out[mine] = found
    return pd.Series(pd.arrays.IntegerArray(out, out < 0), index=allocations.index)


def _stack_or(name: str, ops: Mapping[str, int]) -> int:
    found = op_stack(name, ops)
    return -1 if found is None else found


def stack_sources(traces: Sequence[MemoryTrace]) -> dict[str, list[str | None]]:
    """Per host, each recorded stack's source: its innermost user frame as
    ``path:line function`` (None where the stack has no user frame)."""
    out: dict[str, list[str | None]] = {}
    for trace in traces:
        record = trace.sources
        if record is None:
            continue
        frames = record.user_frames()
        text = {int(f): record.frame_text(int(f)) for f in np.unique(frames) if f >= 0}
        out[trace.host] = [text.get(int(f)) for f in frames]
    return out


def sources_of(
    allocations: pd.DataFrame, stacks: pd.Series, traces: Sequence[MemoryTrace]
) -> pd.Series:
    """The ``source`` of each allocation with a recorded stack (object, None elsewhere)."""
    out = np.full(len(allocations), None, dtype=object)
    hosts = allocations["host"].astype(object).to_numpy()
    ids = stacks.to_numpy(dtype=np.int64, na_value=-1)
    # An array lookup per host: allocations can be millions.
    for host, texts in stack_sources(traces).items():
        rows = np.flatnonzero((hosts == host) & (ids >= 0))
        table = np.array([*texts, None], dtype=object)
        out[rows] = table[np.minimum(ids[rows], len(texts))]
    return pd.Series(out, index=allocations.index, dtype=object)


# Breakdown rows that stand for an HLO value: named by their TF op, not their slab.
_HLO_HOLDERS = ("xla_buffer", "xla_value")


def breakdown_sources(
    breakdown: pd.DataFrame,
    allocations: pd.DataFrame,
    stacks: pd.Series | None,
    traces: Sequence[MemoryTrace],
) -> pd.DataFrame:
    """``breakdown`` with ``source`` and ``stack``: an allocation's row takes its
    allocation's; an XLA value's row the stack of the TF op it carries."""
    rows = breakdown["allocation"].to_numpy(dtype=np.int64, na_value=-1)
    has = rows >= 0
    source = np.full(len(breakdown), None, dtype=object)
    stack = np.full(len(breakdown), -1, dtype=np.int64)
    if has.any():
        positions = allocations.index.get_indexer(rows[has])
        found = positions >= 0
        where = np.flatnonzero(has)[found]
        source[where] = allocations["source"].astype(object).to_numpy()[positions[found]]
        if stacks is not None:
            stack[where] = stacks.to_numpy(dtype=np.int64, na_value=-1)[positions[found]]
    records = {t.host: t.sources for t in traces if t.sources is not None}
    if records:
        texts = stack_sources(traces)
        holders = breakdown["holder"].astype(object).to_numpy()
        hosts = breakdown["host"].astype(object).to_numpy()
        ops = breakdown["op"].astype(object).to_numpy()
        for row in np.flatnonzero(np.isin(holders, _HLO_HOLDERS)).tolist():
            record = records.get(hosts[row])
            if record is None or not isinstance(ops[row], str):
                continue
            found_stack = op_stack(ops[row], record.ops)
            if found_stack is not None:
                stack[row] = found_stack
                source[row] = texts[hosts[row]][found_stack]
    return breakdown.assign(
        source=pd.Series(source, index=breakdown.index, dtype=object),
        stack=pd.Series(pd.arrays.IntegerArray(stack, stack < 0), index=breakdown.index),
    )


def stacks_table(traces: Sequence[MemoryTrace]) -> pd.DataFrame:
    """One row per frame of every recorded stack: host, stack, depth (0 outermost),
    frame (``path:line function``) and whether it is the user's code."""
    hosts: list[str] = []
    stack: list[np.ndarray] = []
    depth: list[np.ndarray] = []
    frames: list[np.ndarray] = []
    for trace in traces:
        record = trace.sources
        if record is None:
            continue
        lengths = np.diff(record.offsets)
        ids = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        hosts += [trace.host] * len(ids)
        stack.append(ids)
        depth.append(np.arange(len(ids), dtype=np.int64) - np.repeat(record.offsets[:-1], lengths))
        frames.append(record.stack_frames)
    if not hosts:
        return pd.DataFrame(
            {"host": [], "stack": pd.array([], dtype="Int64"), "depth": [], "frame": [], "user": []}
        )
    text: list[str] = []
    user: list[bool] = []
    for trace, ids in zip([t for t in traces if t.sources is not None], frames, strict=True):
        record = trace.sources
        assert record is not None
        names = [record.frame_text(i) for i in range(len(record.frame_path))]
        text += [names[i] for i in ids.tolist()]
        user += record.frame_user[ids].tolist()
    return pd.DataFrame(
        {
            "host": hosts,
            "stack": pd.array(np.concatenate(stack), dtype="Int64"),
            "depth": np.concatenate(depth),
            "frame": text,
            "user": np.asarray(user, dtype=bool),
        }
    )
