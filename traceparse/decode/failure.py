"""Read a failure record (``<host>.failure.json``) without TensorFlow.

When the code under ``traceparse.profile()``, ``Capture.step()``, the Keras
``MemoryCallback`` or ``traceparse run`` raises, the capture is written and the
exception is recorded beside it (``traceparse.capture.failure`` writes it)::

    {"format": "traceparse.failure", "version": 1, "tensorflow": "2.21.0",
     "way": "profile" | "step" | "keras" | "run",
     "exception": {"type": "ResourceExhaustedError", "module": "...", "message": "..."},
     "message_bytes": 1234,          # the message's full length; the file keeps its head
     "step": 3,                      # the step running when it raised, or null
     "failed_at_ns": ..,             # wall clock (ns since the epoch) when it was caught
     "capture": {"started_ns": .., "stopped_ns": ..},   # the run identity
     "traceback": [{"file": .., "line": .., "function": ..}]}

What TensorFlow's message says (the op, the requested shape and dtype, the
allocator and device, the Python stack that defined a graph node) is parsed
here, from the message itself, so a record and its fields cannot disagree. A
field the message does not state, or states in a form this reader does not
know, is None: never a guessed number.

A record that cannot be used is not a reason to refuse the capture: the reader
says what is wrong in one diagnostic and the capture loads without it. A record
whose failure time lies outside the capture's own window (``profile_start_time``
to ``profile_stop_time``) belongs to another run and is refused the same way.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from traceparse.decode.datatypes import dtype_code, dtype_name, itemsize
from traceparse.decode.limits import MAX_BYTES
from traceparse.decode.variables import quote

FORMAT = "traceparse.failure"
VERSION = 1
WAYS = ("profile", "step", "keras", "run")
# A message longer than this is cut by the writer (TensorFlow's OOM messages are
# a few KiB with a long graph stack); the head holds what is parsed.
MAX_MESSAGE_CHARS = 64 * 1024
# The record's file: a message, a traceback and a few numbers.
MAX_FAILURE_BYTES = 1 * 2**20
# Frames kept of a traceback or a "defined at" stack.
MAX_FRAMES = 200
# How far (ns) a failure may lie outside the capture's window and still be its own:
# the clocks are the same (the host's), read a few calls apart.
_SLACK_NS = 2_000_000_000

# TensorFlow's words (tensorflow/core/common_runtime/bfc_allocator.cc,
# op_kernel.cc): "OOM when allocating tensor with shape[16777215,4096] and type
# float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu".
_TENSOR = re.compile(
    r"OOM when allocating tensor (?:with|of) shape\s*(?P<shape>\[[^\]\n]{0,2000}\])"
    r"(?:\s+and type\s+(?P<dtype>[A-Za-z0-9_]{1,40}))?"
    r"(?:\s+on\s+(?P<device>[^\s]{1,300}))?"
    r"(?:\s+by allocator\s+(?P<allocator>[^\s]{1,200}))?"
)
# XLA and other allocators: "Out of memory while trying to allocate 1073741824 bytes."
_BYTES = re.compile(r"(?:trying to )?allocate\s+(?P<bytes>\d{1,19})\s*bytes", re.IGNORECASE)
# A device named anywhere (XLA's and JAX's messages name no allocator).
_ANY_DEVICE = re.compile(r"(?:/job:[\w:/.-]{1,200})?/device:[A-Z_]{2,16}:\d{1,6}")
_NODE = re.compile(r"\{\{node\s+(?P<node>[^\s{}]{1,1000})\s*\}\}")
_DETECTED = re.compile(r"Detected at node\s+'?(?P<node>[^\s']{1,1000})'?\s+defined at")
_EAGER_OP = re.compile(r"\[Op:(?P<op>[A-Za-z0-9_.>-]{1,200})(?:\]|\s|,)")
_EAGER_NAME = re.compile(r"\bname:\s*(?P<name>[^\s\]]{1,1000})\]")
_FRAME = re.compile(
    r'File "(?P<file>[^"\n]{1,2000})", line (?P<line>\d{1,9}), in (?P<fn>[^\n]{0,500})'
)


@dataclass(frozen=True)
class Frame:
    file: str
    line: int | None
    function: str | None


@dataclass(frozen=True)
class Request:
    """What the failed request was, as far as the message says (None: not stated)."""

    op: str | None = None  # the node (graph) or op (eager) that asked
    op_type: str | None = None
    shape: str | None = None  # the profiler's spelling, "[16777215,4096]"
    dtype: str | None = None  # TensorFlow's Python name, "float32"
    requested_bytes: int | None = None
    allocator: str | None = None
    device: str | None = None
    defined_at: tuple[Frame, ...] = ()  # the Python stack that defined a graph node


@dataclass(frozen=True)
class FailureRecord:
    """One host's failure: what raised, when, in which step, and what it asked for."""

    path: str
    host: str
    way: str | None
    exception_type: str
    exception_module: str | None
    message: str
    message_bytes: int | None  # the whole message's length, when the file keeps only its head
    step: int | None
    failed_at_ns: int | None
    time_ps: int | None  # from the capture's start: set by the loader, which knows the start
    tensorflow: str | None
    traceback: tuple[Frame, ...] = ()
    request: Request = field(default_factory=Request)

    @property
    def out_of_memory(self) -> bool:
        """Whether the failure is an allocation that could not be served."""
        return (
            self.exception_type == "ResourceExhaustedError"
            or "OOM when allocating" in self.message
            or "Out of memory" in self.message
            or self.exception_type in ("MemoryError", "OutOfMemoryError")
        )

    @property
    def message_cut(self) -> bool:
        return self.message_bytes is not None and self.message_bytes > len(self.message)


class FailureProblem(ValueError):
    """The file is not a usable failure record; the message says why."""


def decode_failure(data: bytes, path: str, host: str) -> FailureRecord:
    """Parse the file's bytes; ``FailureProblem`` when they are not a failure record."""
    try:
        document = json.loads(data)
    except RecursionError as exc:
        raise FailureProblem("nested too deeply to be a failure record") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise FailureProblem(f"not JSON ({quote(str(exc), 80)})") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise FailureProblem(f'its "format" is not "{FORMAT}"')
    if document.get("version") != VERSION:
        raise FailureProblem(
            f"version {quote(document.get('version'))}; this traceparse reads version {VERSION}"
        )
    exception = document.get("exception")
    if not isinstance(exception, dict):
        raise FailureProblem('"exception" is not an object')
    kind = exception.get("type")
    if not isinstance(kind, str) or not kind or len(kind) > 200:
        raise FailureProblem(f"the exception type is {quote(kind)}, not a class name")
    message = exception.get("message")
    if not isinstance(message, str):
        raise FailureProblem(f"the exception message is {quote(message)}, not text")
    if len(message) > MAX_MESSAGE_CHARS:
        raise FailureProblem(
            f"its message has {len(message):,} characters, more than the "
            f"{MAX_MESSAGE_CHARS:,} a record keeps"
        )
    way = document.get("way")
    module = exception.get("module")
    return FailureRecord(
        path=path,
        host=host,
        way=way if way in WAYS else None,
        exception_type=kind,
        exception_module=module if isinstance(module, str) and len(module) <= 500 else None,
        message=message,
        message_bytes=_count(document.get("message_bytes"), "message_bytes"),
        step=_count(document.get("step"), "step"),
        failed_at_ns=_count(document.get("failed_at_ns"), "failed_at_ns"),
        time_ps=None,
        tensorflow=_short_text(document.get("tensorflow")),
        traceback=_frames(document.get("traceback")),
        request=parse_message(message),
    )


def check_identity(record: FailureRecord, start_ns: int | None, stop_ns: int | None) -> int | None:
    """The failure's time in ps from the capture's start; ``FailureProblem`` when the
    record's failure time lies outside the capture's window (another run's record).

    None when the capture does not say when it started (an old capture). A
    record without a time beside a capture that knows its start is refused:
    traceparse's writers always stamp the failure, and without the time nothing
    ties the record to this capture rather than to another run's."""
    at = record.failed_at_ns
    if start_ns is None:
        return None
    if at is None:
        raise FailureProblem(
            'it does not say when the failure happened ("failed_at_ns"), so nothing ties '
            "it to this capture"
        )
    end = stop_ns if stop_ns is not None and stop_ns >= start_ns else None
    if at < start_ns - _SLACK_NS or (end is not None and at > end + _SLACK_NS):
        raise FailureProblem(
            "it records a failure at a time outside this capture (another run's record)"
        )
    return max(0, (at - start_ns) * 1000)


def parse_message(message: str) -> Request:
    """The request TensorFlow's message describes; a part it does not state is None."""
    head = message[:MAX_MESSAGE_CHARS]
    found = _TENSOR.search(head)
    shape = dtype = device = allocator = None
    requested: int | None = None
    if found is not None:
        shape = _shape(found.group("shape"))
        dtype = _dtype(found.group("dtype"))
        device = found.group("device")
        allocator = found.group("allocator")
        requested = _tensor_bytes(shape, dtype)
    if requested is None:
        stated = _BYTES.search(head)
        if stated is not None:
            value = int(stated.group("bytes"))
            requested = value if value <= MAX_BYTES * 2**8 else None
    if device is None:
        named = _ANY_DEVICE.search(head)
        device = None if named is None else named.group(0)
    node = _first(_NODE, head, "node") or _first(_DETECTED, head, "node")
    eager_op = _first(_EAGER_OP, head, "op")
    op = node or _first(_EAGER_NAME, head, "name") or eager_op
    return Request(
        op=op,
        op_type=_type_of(node) if node is not None else eager_op,
        shape=shape,
        dtype=dtype,
        requested_bytes=requested,
        allocator=allocator,
        device=device,
        defined_at=_defined_at(head),
    )


def _first(pattern: re.Pattern[str], text: str, group: str) -> str | None:
    found = pattern.search(text)
    return None if found is None else found.group(group)


def _type_of(node: str | None) -> str | None:
    """A graph node's op type, where its name ends in it (``.../RandomUniform``)."""
    if node is None:
        return None
    last = node.rsplit("/", 1)[-1].split("_", 1)[0]
    return last if last[:1].isupper() and last.isalnum() else None


def _shape(text: str) -> str | None:
    """``[16777215,4096]`` as the profiler spells shapes; None unless every
    dimension is a plain non-negative number (``?``, ``-1`` or junk: unknown)."""
    body = text.strip()[1:-1]
    if not body.strip():
        return "[]"
    dims = []
    for part in body.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit() and len(part) <= 19):
            return None
        dims.append(int(part))
    return "[" + ",".join(str(d) for d in dims) + "]"


def _dtype(text: str | None) -> str | None:
    if text is None:
        return None
    code = dtype_code(text)
    return None if code is None else dtype_name(code)


def _tensor_bytes(shape: str | None, dtype: str | None) -> int | None:
    """Elements x itemsize: the bytes TensorFlow asks its allocator for such a tensor."""
    if shape is None or dtype is None:
        return None
    size = itemsize(dtype)
    if size is None:
        return None
    dims = [int(d) for d in shape[1:-1].split(",") if d] if shape != "[]" else []
    total = math.prod(dims) * size
    return total if total <= MAX_BYTES * 2**8 else None


def _defined_at(message: str) -> tuple[Frame, ...]:
    """The Python stack after TensorFlow's "defined at (most recent call last):"."""
    at = message.find("defined at")
    if at < 0:
        return ()
    frames = []
    for found in _FRAME.finditer(message, at):
        frames.append(Frame(found.group("file"), int(found.group("line")), found.group("fn")))
        if len(frames) >= MAX_FRAMES:
            break
    return tuple(frames)


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 2**63:
        raise FailureProblem(f'"{name}" is {quote(value)}, not a count')
    return value


def _short_text(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 200 else None


def _frames(value: Any) -> tuple[Frame, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise FailureProblem('"traceback" is not a list')
    frames = []
    for item in value[-MAX_FRAMES:]:
        if not isinstance(item, dict) or not isinstance(item.get("file"), str):
            raise FailureProblem("a traceback frame is not an object with a file")
        line = item.get("line")
        function = item.get("function")
        frames.append(
            Frame(
                file=item["file"][:2000],
                line=line if isinstance(line, int) and not isinstance(line, bool) else None,
                function=function[:500] if isinstance(function, str) else None,
            )
        )
    return tuple(frames)
