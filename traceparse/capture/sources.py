"""The source record: which Python line made each op that can allocate.

Written beside the capture as ``<host>.sources.json.gz`` by every capture way
(``traceparse.profile()``, ``traceparse run``, the Keras ``MemoryCallback``),
so that ``allocations.source`` names the user's line (docs/sources.md)::

    {"format": "traceparse.sources", "version": 1, "tensorflow": "2.21.0",
     "started_ns": .., "stopped_ns": ..,          # wall clock around the capture
     "frames": [[path, line, function, user], ..],  # user: 1 for the program's own code
     "stacks": [[frame, ..], ..],                   # frame ids, outermost first
     "ops": {"<op name as the profiler writes it>": stack, ..},
     "eager": {"time_ns": [..], "op_type": [..], "stack": [..]}}

Two mechanisms, one per kind of op:

- **Traced functions** (``tf.function``, Keras' train and predict steps,
  ``jit_compile`` programs): TensorFlow keeps, for every node of a function
  graph, the Python stack that created it (``Operation.traceback``). When the
  capture stops, every live ``FuncGraph`` is found through the garbage
  collector, so functions traced before the capture started (a warm-up step)
  are included. Nodes reached through a call (``PartitionedCall``, ``If``,
  ``While``) are also listed under ``<call node>/<node>``, the name the runtime
  gives them when it inlines the call.
- **Eager ops**: TensorFlow's op callbacks (``op_callbacks.add_op_callback``)
  run after each eager op with the caller's frames still on the stack; the
  callback notes the time, the op type and the stack. The allocator names an
  eager op's allocations by its type only, so they are joined by time: the op
  whose callback follows the allocation (ops run synchronously on the calling
  thread). In a ``GradientTape``'s backward pass the forward op's stack is
  used, found from the forward outputs the tape hands to the gradient function.

Like all of ``traceparse.capture`` this imports TensorFlow only inside functions.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import sysconfig
import threading
import time
from types import CodeType, FrameType
from typing import Any

from traceparse.capture.graph_ops import GRAD_FUNCTION, GRADIENT_SCOPES, callees, forward_ops
from traceparse.core.sidecars import SOURCES
from traceparse.decode.fields import CLOCK_STAT
from traceparse.decode.sources import FORMAT, VERSION

__all__ = [
    "CLOCK_EVENT",
    "FORMAT",
    "VERSION",
    "SourceRecorder",
    "forward_name",
    "mark_clock",
    "treat_as_user",
    "try_start",
    "try_stop",
    "write_sources",
]

# Deeper stacks keep their innermost frames (the user's line is near the op).
MAX_DEPTH = 128
# Eager ops noted per capture: a long eager capture stops noting (and says so)
# rather than growing without bound; about 40 bytes each in memory.
MAX_EAGER = 2_000_000
# Forward outputs remembered for the backward pass (id -> stack): trimmed when full.
_MAX_OUTPUTS = 200_000
# Ops reached through nested calls are listed this many calls deep.
_MAX_CALL_DEPTH = 8


class SourceRecorder:
    """Notes eager ops while the capture runs and the traced graphs when it stops."""

    def __init__(self) -> None:
        self.started_ns = time.time_ns()
        self.stopped_ns: int | None = None
        self._frames: dict[tuple[str, int, str], int] = {}
        self._stacks: dict[tuple[int, ...], int] = {}
        self._by_code: dict[tuple[object, ...], int] = {}
        self._times: list[int] = []
        self._types: list[str] = []
        self._eager_stacks: list[int] = []
        self._outputs: dict[object, int] = {}
        self._dropped = 0
        self._thread = threading.get_ident()
        self._user: dict[str, bool] = {}
        self._library = _library_roots()
        self._grad_code: CodeType | None = None
        self._installed = False
        self._active = False
        self._ops: dict[str, int] = {}
        self._grad_functions: dict[str, str] = {}  # gradient op -> forward op type
        # Ops made for the backward pass whose forward op their graph lacks.
        self._backward: set[str] = set()

    # -- eager ops -----------------------------------------------------------------

    def start(self, active: bool = True) -> None:
        """Install the op callback (on this thread: TensorFlow keeps them per thread).

        ``active=False`` installs it idle, for a capture that another thread will
        start (``traceparse run --delay``); :meth:`activate` starts noting."""
        from tensorflow.python.eager import backprop
        from tensorflow.python.framework import op_callbacks

        self._grad_code = backprop._gradient_function.__code__
        op_callbacks.add_op_callback(self._callback)
        self._installed = True
        if active:
            self.activate()

    def activate(self) -> None:
        self.started_ns = time.time_ns()
        self._active = True

    def _callback(
        self,
        op_type: Any,
        inputs: Any,
        attrs: Any,
        outputs: Any,
        op_name: Any = None,
        graph: Any = None,
    ) -> None:
        # Graph construction: its ops' tracebacks are read from the graph at stop.
        if graph is not None or not self._active:
            return None
        now = time.time_ns()
        if not isinstance(op_type, str):  # a function's name comes as bytes
            op_type = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        frame = sys._getframe(1)
        stack, forward = self._stack_of(frame)
        if forward is not None:
            stack = forward
        else:
            if len(self._outputs) > _MAX_OUTPUTS:
                self._outputs.clear()
            # What the tape hands the gradient function: the op's type and inputs
            # (kept alive by the tape, so their ids still name them), else outputs.
            key = (op_type, *map(id, inputs or ()))
            self._outputs[key] = stack
            for tensor in outputs or ():
                self._outputs[id(tensor)] = stack
        if len(self._times) >= MAX_EAGER:
            self._dropped += 1
            return None
        self._times.append(now)
        self._types.append(op_type)
        self._eager_stacks.append(stack)
        return None

    def _stack_of(self, frame: FrameType | None) -> tuple[int, int | None]:
        """The stack id of ``frame`` and its callers, and, inside a gradient
        function, the stack of the forward op whose gradient is being taken."""
        codes: list[CodeType] = []
        lines: list[int] = []
        forward: int | None = None
        while frame is not None:
            code = frame.f_code
            if code is self._grad_code and forward is None:
                forward = self._forward_stack(frame)
            codes.append(code)
            lines.append(frame.f_lineno)
            frame = frame.f_back
        cache_key = (*codes, *lines)
        found = self._by_code.get(cache_key)
        if found is None:
            frames = [
                self._frame_id(code.co_filename, line, code.co_name)
                for code, line in zip(codes, lines, strict=True)
            ]
            found = self._stack_id(list(reversed(frames)))
            self._by_code[cache_key] = found
        return found, forward

    def _forward_stack(self, frame: FrameType) -> int | None:
        local = frame.f_locals
        key = (local.get("op_name"), *map(id, local.get("inputs") or ()))
        found = self._outputs.get(key)
        if found is not None:
            return found
        for tensor in local.get("outputs") or ():
            if tensor is not None and id(tensor) in self._outputs:
                return self._outputs[id(tensor)]
        return None

    # -- traced functions ----------------------------------------------------------

    def stop(self) -> None:
        """Remove the callback and read the stacks of every live traced graph."""
        self._active = False
        if self._installed:
            from tensorflow.python.framework import op_callbacks

            # Already removed: another thread's stop.
            with contextlib.suppress(KeyError, ValueError):
                op_callbacks.remove_op_callback(self._callback)
            self._installed = False
        self.stopped_ns = time.time_ns()
        self._read_graphs()

    def _read_graphs(self) -> None:
        from tensorflow.python.framework.func_graph import FuncGraph

        graphs: list[Any] = []
        atomic: list[Any] = []
        # One pass: a large program has millions of objects. ``type()``, not
        # ``isinstance``: the heap holds weak proxies, and ``isinstance`` on one
        # whose object is gone raises ReferenceError (seen on TensorFlow 2.16).
        for obj in gc.get_objects():
            kind = type(obj)
            if issubclass(kind, FuncGraph):
                graphs.append(obj)
            elif kind.__name__ == "AtomicFunction":
                atomic.append(obj)
        by_name: dict[str, Any] = {}
        for graph in graphs:
            by_name.setdefault(str(graph.name), graph)
        # Functions are registered under their runtime names (__inference_f_27).
        for obj in atomic:
            graph = getattr(obj, "graph", None)
            name = getattr(obj, "name", None)
            if graph is not None and name is not None:
                text = name.decode() if isinstance(name, bytes) else str(name)
                by_name.setdefault(text, graph)
        for graph in graphs:
            self._note_graph(graph, "", by_name, 0)
        self._attribute_backward()

    def _note_graph(self, graph: Any, prefix: str, by_name: dict[str, Any], depth: int) -> None:
        operations = graph.get_operations()
        traced = {op.name: self._traceback_stack(op) for op in operations}
        forward = forward_ops(operations, self._grad_functions)
        for op in operations:
            name = prefix + op.name
            if name in self._ops:
                continue
            # A gradient op is the line that called its forward op.
            own = forward.get(op.name)
            stack, backward = traced[op.name if own is None else own]
            self._ops[name] = stack
            if own is None and backward:
                self._backward.add(name)
            if depth >= _MAX_CALL_DEPTH:
                continue
            for callee in callees(op):
                inner = by_name.get(callee)
                if inner is not None and inner is not graph:
                    self._note_graph(inner, name + "/", by_name, depth + 1)

    def _traceback_stack(self, op: Any) -> tuple[int, bool]:
        """The op's stack, and whether it was made for the backward pass (under a
        gradient scope, or by a gradient function: a while loop's accumulators)."""
        try:
            frames = [(f.filename, f.lineno, f.name) for f in op.traceback]
        except Exception:  # an op without a traceback (imported graphs)
            frames = []
        gradient = op.name.startswith(GRADIENT_SCOPES)
        # The gradient function that made it (nn_grad.py's _SoftplusGrad) names
        # the forward op's type; frames from the innermost out.
        for _path, _line, function in reversed(frames):
            found = GRAD_FUNCTION.match(function)
            if found:
                if gradient:
                    self._grad_functions[op.name] = found.group(1)
                gradient = True
                break
        return self._stack_id([self._frame_id(*f) for f in frames]), gradient

    def _attribute_backward(self) -> None:
        """Ops made for the backward pass whose forward op is in another graph (a
        while loop's gradient body; the accumulators it adds to the forward body)
        have the stack of the code that asked for gradients (``fit``'s line).
        They take the stack of the op their name points to: the forward op after
        the innermost gradient scope (``gradients/<op>_grad/..``), else the
        nearest op above them in their scope (the loop)."""
        for name in self._backward:
            parts = forward_name(name).split("/")
            for end in range(len(parts), 0, -1):
                owner = "/".join(parts[:end])
                if owner != name and owner in self._ops and owner not in self._backward:
                    self._ops[name] = self._ops[owner]
                    break

    # -- the record ----------------------------------------------------------------

    def _frame_id(self, path: str, line: int, function: str) -> int:
        key = (path, int(line or 0), function)
        found = self._frames.get(key)
        if found is None:
            found = self._frames[key] = len(self._frames)
        return found

    def _stack_id(self, frames: list[int]) -> int:
        key = tuple(frames[-MAX_DEPTH:])
        found = self._stacks.get(key)
        if found is None:
            found = self._stacks[key] = len(self._stacks)
        return found

    def is_user(self, path: str) -> bool:
        """Whether ``path`` is the program's own code: not the standard library,
        site-packages, TensorFlow, Keras or traceparse, nor a frozen module."""
        found = self._user.get(path)
        if found is None:
            if path.startswith("<") or not path:
                found = False
            else:
                full = os.path.realpath(path)
                found = full in _USER_FILES or not any(
                    full == root or full.startswith(root + os.sep) for root in self._library
                )
            self._user[path] = found
        return found

    def to_json(self, tensorflow: str) -> dict[str, Any]:
        cwd = os.getcwd()
        frames = [
            [_shown(path, cwd), line, function, int(self.is_user(path))]
            for (path, line, function) in self._frames
        ]
        return {
            "format": FORMAT,
            "version": VERSION,
            "tensorflow": tensorflow,
            "started_ns": self.started_ns,
            "stopped_ns": self.stopped_ns,
            "frames": frames,
            "stacks": [list(stack) for stack in self._stacks],
            "ops": self._ops,
            "eager": {"time_ns": self._times, "op_type": self._types, "stack": self._eager_stacks},
            "eager_dropped": self._dropped,
        }


def forward_name(name: str) -> str:
    """The forward op a backward op's name points to: what follows its innermost
    gradient scope, up to the ``<op>_grad`` part (``a/while/gradients/a/while/
    cell/MatMul_grad/MatMul_1`` -> ``a/while/cell/MatMul``); without one, the
    name less its gradient scopes (``gradient_tape/a/while/gradients/AddN`` ->
    ``a/while/AddN``, under the loop)."""
    parts = name.split("/")
    inner = max((i + 1 for i, part in enumerate(parts) if part + "/" in GRADIENT_SCOPES), default=0)
    rest = parts[inner:]
    for i, part in enumerate(rest):
        if part.endswith("_grad") and len(part) > len("_grad"):
            return "/".join([*rest[:i], part.removesuffix("_grad")])
    return "/".join(part for part in parts if part + "/" not in GRADIENT_SCOPES)


def _library_roots() -> list[str]:
    """Directories whose files are not the user's: the interpreter's libraries,
    every site directory, and the packages TensorFlow, Keras and traceparse."""
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
    # Console scripts (.venv/bin/traceparse) and the interpreter's own directory.
    for path in (sysconfig.get_paths().get("scripts"), os.path.dirname(sys.executable)):
        if path:
            roots.add(os.path.realpath(path))
    for entry in sys.path:
        if entry and ("site-packages" in entry or "dist-packages" in entry):
            roots.add(os.path.realpath(entry))
    for module in ("tensorflow", "keras", "tf_keras", "traceparse", "tensorboard", "numpy"):
        loaded = sys.modules.get(module)
        location = getattr(loaded, "__file__", None) if loaded is not None else None
        if location:
            roots.add(os.path.realpath(os.path.dirname(location)))
    return sorted(roots)


# Files of traceparse's own that stand for a user's program (the demo's model).
_USER_FILES: set[str] = set()


def treat_as_user(path: str) -> None:
    """Count ``path`` as the program's own code (``traceparse demo`` is its model's author)."""
    _USER_FILES.add(os.path.realpath(path))


def _shown(path: str, cwd: str) -> str:
    """A path under the working directory as relative (the same in every capture
    way and on every machine); others as they are."""
    if path.startswith("<") or not os.path.isabs(path):
        return path
    relative = os.path.relpath(path, cwd)
    return path if relative.startswith("..") else relative


def try_start(active: bool = True) -> SourceRecorder | None:
    """A started recorder, or None and a line on stderr when TensorFlow refuses:
    the capture matters more than its source lines."""
    recorder = SourceRecorder()
    try:
        recorder.start(active)
    except Exception as exc:  # a TensorFlow without op callbacks
        print(
            f"traceparse: source lines are not recorded ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )
        return None
    return recorder


def try_stop(recorder: SourceRecorder) -> bool:
    """Stop the recorder; False and a line on stderr when reading the graphs fails."""
    try:
        recorder.stop()
    except Exception as exc:  # a program's object that breaks the walk
        print(
            f"traceparse: reading the source lines failed ({type(exc).__name__}: {exc}); "
            "the capture is kept without them",
            file=sys.stderr,
        )
        return False
    return True


# The profiler event that ties the capture's clock to the wall clock.
CLOCK_EVENT = "traceparse.clock"


def mark_clock(tf: Any) -> None:
    """Write a profiler event stamped with the wall clock (``decode/xspace.py``
    reads it). TensorFlow 2.16's captures count time from the profiler's start
    without saying when that was, and eager ops are joined to the record by
    wall-clock time; microseconds apart, so the mark must be in the capture."""
    with tf.profiler.experimental.Trace(CLOCK_EVENT, **{CLOCK_STAT: time.time_ns()}):
        pass


def write_sources(recorder: SourceRecorder, run_dir: str | os.PathLike[str], host: str) -> str:
    """Write the record beside ``<run_dir>/<host>.xplane.pb``; return its path."""
    import tensorflow as tf

    return SOURCES.write(recorder.to_json(str(tf.__version__)), run_dir, host)
