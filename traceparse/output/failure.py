"""The sentences about a capture that ended in failure (issue 39), for every view.

``failure_sentence`` is the line a summary, a report, the notebook view and the
CI gate open with, before the peak. It has three forms for an out-of-memory
failure, chosen by the allocator's counters at the moment of failure
(``analysis.failure``):

- the request alone exceeds the allocator's capacity;
- the request would have fitted in the free bytes, which were not in one piece
  (fragmentation);
- otherwise the largest holders then, and how much more would have had to be free.

Other exceptions get one sentence naming the exception and its first line.
Every name and the message come from the program (or a crafted file): the
caller passes ``code`` and ``text``, which make them safe for its medium
(terminal, Markdown, HTML); the default shows control and invisible
characters as escapes and cuts long text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from traceparse.output.cells import shorten, visible
from traceparse.output.units import format_bytes
from traceparse.tables.sources import is_library_path

if TYPE_CHECKING:
    from traceparse.records.terms import Failure

# How much of a message or a name a sentence quotes.
MAX_QUOTE = 200
# Holders a sentence names.
HOLDERS = 3

Format = Callable[[str], str]


def plain_code(text: str) -> str:
    """A name in a plain-text sentence: one line, escaped, cut, in backticks."""
    return f"`{shorten(visible(' '.join(str(text).split()), cell=True), MAX_QUOTE)}`"


def plain_text(text: str) -> str:
    return shorten(visible(str(text), cell=True), MAX_QUOTE)


def first_line(message: str) -> str:
    """The message's first non-empty line, as TensorFlow's messages start with the fact."""
    for line in message.splitlines():
        if line.strip():
            return line.strip()
    return ""


def failure_title(f: Failure) -> str:
    """A short label: "Out of memory" or the exception's type (our words; the type
    is passed through ``plain_text`` by the caller when shown)."""
    return "Out of memory" if f.out_of_memory else "Failed"


def failure_sentence(
    f: Failure,
    holders: Sequence[tuple[str, int]] = (),
    *,
    code: Format = plain_code,
    text: Format = plain_text,
) -> str:
    """What failed, where, and why, in one or two sentences (see the module doc)."""
    where = "" if f.step is None else f" at step {f.step}"
    if not f.out_of_memory:
        line = first_line(f.message)
        said = f": {text(line)}" if line else ""
        return (
            f"The run ended in {code(f.exception_type)}{where}{said}. "
            "The memory figures below are up to the failure."
        )
    who = code(f.op) if f.op else "a request"
    allocator = code(f.allocator) if f.allocator else "the allocator"
    asked = f"for {format_bytes(f.requested_bytes)}" if f.requested_bytes is not None else ""
    what = " ".join(p for p in (code(f.shape) if f.shape else "", f.dtype or "") if p)
    head = f"Out of memory{where}: {who} asked {allocator}"
    head += f" {asked}" if asked else " for memory"
    head += f" ({what})" if what else ""
    if f.unmatched_allocator is not None:
        return (
            f"{head}. Its message names the allocator {code(f.unmatched_allocator)}, of which "
            "this capture has no events (the record may belong to another machine's "
            "capture), so the allocator's state then is not known."
        )
    if f.in_use_bytes is None:
        return head + ". The capture has no allocator counters for that moment."
    state = f"{format_bytes(f.in_use_bytes)} were in use"
    if f.capacity_bytes is not None:
        state += f" of {format_bytes(f.capacity_bytes)}"
    out = f"{head}; {state}."
    if f.exceeds_capacity:
        return out + " The request alone exceeds the capacity."
    shortfall = f.shortfall_bytes
    if shortfall == 0 and f.free_bytes is not None and f.requested_bytes is not None:
        return (
            f"{out} {format_bytes(f.free_bytes)} were free but the allocator could not give "
            f"{format_bytes(f.requested_bytes)} in one piece (fragmentation)."
        )
    named = [f"{code(name)} {format_bytes(size)}" for name, size in holders[:HOLDERS]]
    if named:
        out += f" The largest holders then were {', '.join(named)}."
    if shortfall:
        out += f" {format_bytes(shortfall)} more would have had to be free for the request to fit."
    return out


def to_free_sentence(f: Failure) -> str | None:
    """How much would have had to be freed for the request to fit; None when unknown."""
    if not f.out_of_memory or f.requested_bytes is None or f.free_bytes is None:
        return None
    if f.exceeds_capacity:
        return (
            f"Nothing can be freed to fit it: the request ({format_bytes(f.requested_bytes)}) "
            f"is larger than the allocator's capacity ({format_bytes(f.capacity_bytes)})."
        )
    shortfall = f.shortfall_bytes
    if shortfall == 0:
        return (
            f"{format_bytes(f.free_bytes)} were free, more than the "
            f"{format_bytes(f.requested_bytes)} asked, but not in one piece: freeing "
            "enough for one contiguous chunk (or restarting with less fragmentation) is needed."
        )
    return (
        f"To fit the request, {format_bytes(shortfall)} ({shortfall:,} bytes) more would have "
        f"had to be free: {format_bytes(f.free_bytes)} were free, "
        f"{format_bytes(f.requested_bytes)} were asked."
    )


def failure_record(f: Failure) -> dict[str, object]:
    """The failure as JSON data for exports and the gate (every field, plus the sentence)."""
    data = f.to_dict()
    data["sentence"] = failure_sentence(f, code=lambda s: f"`{s}`", text=lambda s: s)
    return data


def stack_lines(f: Failure, limit: int = 8) -> tuple[str, list[str]]:
    """A title and ``file:line in function`` lines: the Python stack that defined the
    failing graph node, else the traceback; the program's own frames (not those of
    installed packages) when it has any, innermost last."""
    frames = list(f.defined_at or f.traceback)
    own = [fr for fr in frames if not _not_own(fr.file)]
    shown = (own or frames)[-limit:]
    title = "Where it was defined" if f.defined_at else "Traceback"
    if own and len(own) < len(frames):
        title += " (the program's own frames)"
    lines = [
        f"{fr.file}:{fr.line if fr.line is not None else '?'} in {fr.function or '?'}"
        for fr in shown
    ]
    return title, lines


# traceparse's own wrappers around the program (``traceparse run``'s script
# runner, Capture.step, the Keras callback), wherever traceparse was installed
# from (a source checkout is in no site-packages), and the interpreter's frozen
# modules (``<frozen runpy>``, which ``traceparse run`` calls the script through).
_WRAPPER_PATHS = tuple(
    f"/traceparse/{part}"
    for part in ("capture/", "integrations/", "cli/", "batching/", "keras.py", "__main__.py")
)


def _not_own(file: str) -> bool:
    """Whether a frame's file is not the program's own code."""
    path = file.replace("\\", "/")
    return (
        path.startswith("<frozen ")
        or is_library_path(path)
        or any(p in path for p in _WRAPPER_PATHS)
    )
