"""Read a source record (``<host>.sources.json.gz``) without TensorFlow.

``traceparse.capture.sources`` writes it beside the capture (its docstring
gives the format). The record is an input like any other: every field is
checked, paths are only text (never opened), characters that could move a
terminal's cursor or reorder text are escaped, and a record that cannot be
used is one diagnostic while the capture loads without it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceparse.decode.limits import JsonBudget, is_int64
from traceparse.decode.variables import quote

FORMAT = "traceparse.sources"
VERSION = 1

# What a real record holds: a few thousand frames and stacks, graph ops in the
# thousands, eager ops up to the recorder's own limit (capture/sources.py).
MAX_FRAMES = 1_000_000
MAX_STACKS = 1_000_000
MAX_STACK_ENTRIES = 20_000_000
MAX_DEPTH = 1024
MAX_OPS = 2_000_000
MAX_EAGER = 2_000_000
MAX_TEXT = 4096
# What parsing may build, checked on the text before it is parsed
# (``decode.limits.JsonBudget``): a list per frame and per stack and a few more;
# values enough for every field at its limit above would be 36M Python objects
# (GBs), far past the recorder's real output (2M eager ops are 6M values), so
# the total is bounded on its own.
MAX_CONTAINERS = MAX_FRAMES + MAX_STACKS + 16
MAX_VALUES = 16_000_000

# Control characters (C0, DEL, C1), bidi overrides and isolates, and other
# format characters a terminal or browser would act on rather than show; and
# lone surrogates, which JSON can spell (``"\udcff"``) but no UTF-8 writer
# (pyarrow, a page, a terminal) can encode.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)


# The runtime names of traced functions, as an eager call's op type.
_FUNCTION_PREFIXES = ("__inference_", "__forward_", "__backward_")


class SourcesProblem(ValueError):
    """The file is not a usable source record; the message says why."""


def sources_budget() -> JsonBudget:
    """The counter ``read_bytes`` runs over a source record's text before it is parsed."""
    return JsonBudget("source record", MAX_CONTAINERS, MAX_VALUES, SourcesProblem)


@dataclass
class SourceRecord:
    """The stacks of one host's ops, as read and checked."""

    path: str
    tensorflow: str | None
    started_ns: int | None
    stopped_ns: int | None
    # One row per frame: path, line, function (escaped text) and whether it is
    # the program's own code.
    frame_path: list[str]
    frame_line: np.ndarray
    frame_function: list[str]
    frame_user: np.ndarray
    # Stack i is frames[stack_frames[offsets[i]:offsets[i + 1]]], outermost first.
    stack_frames: np.ndarray
    offsets: np.ndarray
    ops: dict[str, int]
    eager_ns: np.ndarray  # sorted
    eager_stack: np.ndarray
    # Whether each eager op was a call of a traced function (its allocations
    # carry the function's node names).
    eager_function: np.ndarray
    eager_dropped: int = 0

    def stack(self, index: int) -> list[int]:
        return self.stack_frames[self.offsets[index] : self.offsets[index + 1]].tolist()

    @property
    def stack_count(self) -> int:
        return len(self.offsets) - 1

    def user_frames(self) -> np.ndarray:
        """Per stack, its innermost frame in the user's code (-1 where none)."""
        found = np.full(self.stack_count, -1, dtype=np.int64)
        user = self.frame_user
        for i in range(self.stack_count):
            frames = self.stack_frames[self.offsets[i] : self.offsets[i + 1]]
            mine = frames[user[frames]] if len(frames) else frames
            if len(mine):
                found[i] = int(mine[-1])
        return found

    def frame_text(self, frame: int) -> str:
        return (
            f"{self.frame_path[frame]}:{int(self.frame_line[frame])} {self.frame_function[frame]}"
        )


def escaped(text: str) -> str:
    """``text`` with unsafe characters as ``\\xNN`` / ``\\uNNNN``, cut to MAX_TEXT.

    A lone surrogate becomes its backslash escape (``/x/\\udcff.py``): Python's
    ``json.dumps`` writes one for a file name that is not UTF-8 (os.fsdecode's
    surrogateescape, PEP 383), so a real record can carry it; escaped, the name
    stays readable and every writer can encode it."""
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    return _UNSAFE.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def _is_count(value: Any) -> bool:
    """A whole number 0 or more that fits the int64 every count is stored as."""
    return is_int64(value) and value >= 0


def _int_list(value: Any, what: str, limit: int) -> np.ndarray:
    if not isinstance(value, list):
        raise SourcesProblem(f"{what} is not a list")
    if len(value) > limit:
        raise SourcesProblem(f"{what} has {len(value):,} entries, more than the {limit:,} read")
    if not all(_is_count(v) for v in value):
        bad = next(v for v in value if not _is_count(v))
        raise SourcesProblem(f"{what} holds {quote(bad)}, not a count (0 to 2**63 - 1)")
    return np.asarray(value, dtype=np.int64)


def decode_sources(data: bytes, path: str) -> SourceRecord:
    """Parse the file's bytes; ``SourcesProblem`` when they are not a source record.

    The text's containers and values are counted before it is parsed (the
    reader counts them while it reads, ``sources_budget``)."""
    sources_budget()(data)
    try:
        document = json.loads(data)
    except RecursionError as exc:
        raise SourcesProblem("nested too deeply to be a source record") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise SourcesProblem(f"not JSON ({quote(str(exc), 80)})") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise SourcesProblem(f'its "format" is not "{FORMAT}"')
    if document.get("version") != VERSION:
        raise SourcesProblem(
            f"version {quote(document.get('version'))}; this traceparse reads version {VERSION}"
        )
    frames = document.get("frames")
    if not isinstance(frames, list):
        raise SourcesProblem('"frames" is not a list')
    if len(frames) > MAX_FRAMES:
        raise SourcesProblem(f"it has {len(frames):,} frames, more than the {MAX_FRAMES:,} read")
    paths, lines, functions, user = [], [], [], []
    for i, frame in enumerate(frames):
        if (
            not isinstance(frame, list)
            or len(frame) != 4
            or not isinstance(frame[0], str)
            or not _is_count(frame[1])
            or not isinstance(frame[2], str)
            or frame[3] not in (0, 1)
        ):
            raise SourcesProblem(f"frame {i} is {quote(frame)}, not [path, line, function, user]")
        paths.append(escaped(frame[0]))
        lines.append(min(frame[1], 2**31 - 1))
        functions.append(escaped(frame[2]))
        user.append(bool(frame[3]))
    stacks = document.get("stacks")
    if not isinstance(stacks, list):
        raise SourcesProblem('"stacks" is not a list')
    if len(stacks) > MAX_STACKS:
        raise SourcesProblem(f"it has {len(stacks):,} stacks, more than the {MAX_STACKS:,} read")
    offsets = np.zeros(len(stacks) + 1, dtype=np.int64)
    entries: list[int] = []
    for i, stack in enumerate(stacks):
        if not isinstance(stack, list) or len(stack) > MAX_DEPTH:
            what = quote(stack) if not isinstance(stack, list) else f"{len(stack):,} frames deep"
            raise SourcesProblem(f"stack {i} is {what}, not a list of up to {MAX_DEPTH} frames")
        if len(entries) + len(stack) > MAX_STACK_ENTRIES:
            raise SourcesProblem(f"its stacks hold more than {MAX_STACK_ENTRIES:,} frames")
        for frame in stack:
            if not _is_count(frame) or frame >= len(frames):
                raise SourcesProblem(f"stack {i} names frame {quote(frame)}, which is not listed")
        entries.extend(stack)
        offsets[i + 1] = len(entries)
    ops = document.get("ops")
    if not isinstance(ops, dict):
        raise SourcesProblem('"ops" is not an object')
    if len(ops) > MAX_OPS:
        raise SourcesProblem(f"it names {len(ops):,} ops, more than the {MAX_OPS:,} read")
    for name, stack in ops.items():
        if not _is_count(stack) or stack >= len(stacks):
            raise SourcesProblem(f"op {quote(name)} has stack {quote(stack)}, which is not listed")
    eager = document.get("eager")
    if not isinstance(eager, dict):
        raise SourcesProblem('"eager" is not an object')
    times = _int_list(eager.get("time_ns"), "eager.time_ns", MAX_EAGER)
    eager_stacks = _int_list(eager.get("stack"), "eager.stack", MAX_EAGER)
    if len(times) != len(eager_stacks):
        raise SourcesProblem("eager.time_ns and eager.stack differ in length")
    if len(eager_stacks) and int(eager_stacks.max()) >= len(stacks):
        raise SourcesProblem("an eager op names a stack that is not listed")
    types = eager.get("op_type")
    if not isinstance(types, list) or len(types) != len(times):
        raise SourcesProblem("eager.op_type is not a list as long as eager.time_ns")
    function = np.array(
        [isinstance(t, str) and t.startswith(_FUNCTION_PREFIXES) for t in types], dtype=bool
    )
    order = np.argsort(times, kind="stable")
    started, stopped = document.get("started_ns"), document.get("stopped_ns")
    version = document.get("tensorflow")
    dropped = document.get("eager_dropped", 0)
    return SourceRecord(
        path=path,
        tensorflow=escaped(version) if isinstance(version, str) else None,
        started_ns=started if _is_count(started) else None,
        stopped_ns=stopped if _is_count(stopped) else None,
        frame_path=paths,
        frame_line=np.asarray(lines, dtype=np.int64),
        frame_function=functions,
        frame_user=np.asarray(user, dtype=bool),
        stack_frames=np.asarray(entries, dtype=np.int64),
        offsets=offsets,
        ops={str(k): int(v) for k, v in ops.items()},
        eager_ns=times[order],
        eager_stack=eager_stacks[order],
        eager_function=function[order],
        eager_dropped=dropped if _is_count(dropped) else 0,
    )
