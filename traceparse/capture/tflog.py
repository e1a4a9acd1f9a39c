"""``traceparse run``: TensorFlow's C++ log lines to a file, the script's stderr as it is.

TensorFlow's native code logs to file descriptor 2 (``W0000 00:00:... file.cc:55]
host_tracer_level expects an i value.`` and a hundred more on a profiled run),
some of it whatever ``TF_CPP_MIN_LOG_LEVEL`` says. The script's child process
writes its Python ``sys.stderr`` to the terminal's own descriptor (passed to it
as ``REAL_STDERR_ENV``) and its descriptor 2, where native code and the
script's subprocesses write, to a pipe. This process reads the pipe: lines in
TensorFlow's (absl's) log formats go to the log file, everything else to the
real stderr at once. A line not yet ended is held only while it could still
become a log line, and never longer than ``HOLD_S``, so a progress bar drawn
with ``\\r`` shows as it is drawn. The reader lives in this process, not the
child: a script that crashes cannot take lines with it.
"""

from __future__ import annotations

import os
import re
import select
import threading
from dataclasses import dataclass, field
from typing import BinaryIO

# The child's descriptor for the real stderr, and how the child finds it.
REAL_STDERR_ENV = "TRACEPARSE_RUN_STDERR"
# How long a started line that may be a log line is held before it is shown.
HOLD_S = 0.2

# absl (TF 2.13 and later): "W0000 00:00:1764000000.123456   10039 file.cc:55] text";
# TensorFlow's own older format: "2026-01-01 10:00:00.123456: W tensorflow/x.cc:55] text";
# and absl's notice before its logging starts.
_LOG_LINE = re.compile(
    rb"^(?:[IWEF]\d{4} \d\d:\d\d:\d\d[.\d]*\s+\d+ [^\s\]]+:\d+\]"
    rb"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.\d]*: [IWEF] [^\s\]]+:\d+\]"
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called)"
)
# What the start of such a line can look like before the rest arrives.
_MAY_START = re.compile(
    rb"^(?:[IWEF]\d[\d :.]*|\d[\d\- :.]*|W(?:A(?:R(?:N(?:I(?:N(?:G.*)?)?)?)?)?)?)$"
)
# Lines of a log message that spans several (absl writes them as they are): the one
# known on start-up, cpu_feature_guard's. Only these follow a log line into the
# file, so that no line of the script's is taken for one.
_CONTINUED = (b"To enable the following instructions:",)
_SEVERE = re.compile(rb"^(?:[EF]\d{4} |\d{4}-\d\d-\d\d [\d:.]+: [EF] )")


def is_log_line(line: bytes) -> bool:
    """Whether ``line`` is one of TensorFlow's (absl's) native log lines."""
    return _LOG_LINE.match(line) is not None


@dataclass
class LogSplit:
    """Splits a byte stream into log lines (to ``log``) and the rest (to ``out``)."""

    log: BinaryIO
    out: BinaryIO
    lines: int = 0  # log lines written
    severe: int = 0  # of which errors (E) or fatal (F)
    _pending: bytes = field(default=b"", repr=False)
    _after_log: bool = field(default=False, repr=False)  # the last line was a log line

    def feed(self, data: bytes) -> None:
        """Take ``data``: whole lines are routed, a started line waits when it may be a
        log line (``flush`` shows it), and is shown at once when it cannot."""
        data = self._pending + data
        *whole, rest = data.split(b"\n")
        for line in whole:
            self._route(line + b"\n")
        self._pending = rest
        if (
            rest
            and not self._continues(rest)
            and not _MAY_START.match(rest)
            and not is_log_line(rest)
        ):
            self._pending = b""
            self._show(rest)
        self.out.flush()
        self.log.flush()

    def flush(self) -> None:
        """Route what is left of a line not ended (a prompt, a progress bar)."""
        pending, self._pending = self._pending, b""
        if pending:
            self._route(pending)
        self.out.flush()
        self.log.flush()

    def _continues(self, line: bytes) -> bool:
        """Whether ``line`` is (or may become) the next line of the last log message."""
        return self._after_log and any(c.startswith(line[: len(c)]) for c in _CONTINUED)

    def _route(self, line: bytes) -> None:
        if is_log_line(line):
            self.lines += 1
            self.severe += _SEVERE.match(line) is not None
            self.log.write(line)
            self._after_log = True
        elif self._continues(line):
            self.log.write(line)
        else:
            self._after_log = False
            self._show(line)

    def _show(self, data: bytes) -> None:
        self.out.write(data)


class PipeReader:
    """Reads the child's descriptor-2 pipe on a thread until it closes (``split``)."""

    def __init__(self, fd: int, split: LogSplit) -> None:
        self.fd = fd
        self.split = split
        self._thread = threading.Thread(target=self._read, name="traceparse-tf-log", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.fd], [], [], HOLD_S)
                if not ready:  # quiet: a held line was not a log line's start after all
                    self.split.flush()
                    continue
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    self.split.flush()
                    return
                self.split.feed(data)
        finally:
            os.close(self.fd)

    def finish(self, timeout_s: float = 2.0) -> None:
        """Wait for the pipe to close (a process the script left running may hold it
        open: then stop waiting after ``timeout_s``)."""
        self._thread.join(timeout_s)
