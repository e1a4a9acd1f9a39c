"""What a path that is not a capture is, and what to give instead.

A new user points traceparse at the script they profiled, the inventory beside
a capture, a TensorBoard event file or a logdir the profiler never wrote to.
Reading such a file as an XSpace fails with a wire-format error and advice to
copy the file again, which helps nobody. These checks look at the name and at
most the first bytes of a file that is not named like a capture (a renamed
capture still reads), and at the names in a directory that holds none.
"""

from __future__ import annotations

import os
import re
import stat

# The format tag every record traceparse writes beside a capture starts with.
_RECORD = re.compile(rb'"format"\s*:\s*"(traceparse\.[a-z_]{1,40})"')
# How many bytes of a file are looked at to tell what it is.
_HEAD_BYTES = 512
_CAPTURE = "<logdir>/plugins/profile/<run>/<host>.xplane.pb"
_GIVE = f"give the logdir the profiler wrote ({_CAPTURE}), a run directory or an .xplane.pb file"


def what_file(path: str, local: bool = True) -> str | None:
    """What the file at ``path`` is, with what to give instead, when it is recognisably
    not a capture; None when it may be one. ``local``: its first bytes may be read."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    lower = name.lower()
    if lower.endswith(".py"):
        return (
            "a Python script, not a profiler capture; run it under the profiler with "
            f"`traceparse run {name}`, then give the logdir it writes"
        )
    if lower.endswith(".ipynb"):
        return f"a Jupyter notebook, not a profiler capture; {_GIVE}"
    if "tfevents" in lower:
        return f"a TensorBoard event file (summaries, not the profiler's capture); {_GIVE}"
    head = _head(path) if local else b""
    text = head.lstrip()
    if lower.endswith(".json") or text[:1] in (b"{", b"["):
        if b'"traceparse.baseline"' in head:
            return (
                "a traceparse baseline; compare a capture with it by "
                f"`traceparse check PATH --baseline {name}` or `traceparse diff {name} PATH`"
            )
        if record := _RECORD.search(head):
            # A record traceparse writes beside a capture (core.sidecars names them):
            # told by its format, so that this first stage needs no list of names.
            return (
                f"a {record.group(1).decode()} record, which traceparse reads beside its "
                "capture; give the capture (the <host>.xplane.pb in the same directory) "
                "or its run directory"
            )
        return f"a JSON file, not a profiler capture; {_GIVE}"
    if text.startswith(b"#!") or (head and _is_text(head)):
        return f"a text file, not a profiler capture (those are binary); {_GIVE}"
    return None


def what_directory(root: str, files: list[str]) -> str:
    """Why a directory whose files (``files``: every path under it) hold no capture,
    and what to give instead."""
    names = [f.replace("\\", "/") for f in files]
    if any("/plugins/profile/" in f for f in names):
        return (
            "its plugins/profile/ holds no .xplane.pb (a run still being written, or one "
            "whose profiler stopped before writing); capture the profile again"
        )
    if any("tfevents" in f.rsplit("/", 1)[-1] for f in names):
        return (
            "a TensorBoard log directory without a profile: its event files hold "
            "summaries, and no plugins/profile/ is under it (the profiler did not run; "
            "use traceparse.profile(...), `traceparse run` or "
            "TensorBoard(profile_batch=...))"
        )
    return (
        "a directory with no plugins/profile/ under it (looked for "
        f"{_CAPTURE}); capture one with traceparse.profile(...) or `traceparse run`, "
        "or point at the logdir the profiler wrote"
    )


def _head(path: str) -> bytes:
    """The first bytes of a regular local file; nothing when it cannot be read so
    (the reader then says why)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, _HEAD_BYTES)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _is_text(head: bytes) -> bool:
    """UTF-8 text without control bytes other than whitespace (a capture is binary:
    its first bytes are a protobuf tag and a length)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end
            return False
        text = head[: exc.start].decode("utf-8")
    return bool(text) and all(c.isprintable() or c in "\t\r\n" for c in text)
