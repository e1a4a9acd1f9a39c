"""The plain records a batch passes around: a task, its outcome, the fingerprint kind.

Their own module, below both ``store`` (which reads and writes outcomes) and
``tasks`` (which makes and runs tasks), so neither imports the other's types.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from traceparse.files.discover import CaptureFile

__all__ = ["Fingerprint", "Outcome", "Status", "Task"]

Fingerprint = Literal["stat", "hash"]

# out_of_memory: the capture ended in out-of-memory (issue 39); its allocators are
# summarised as ok ones are, and the batch lists it apart.
Status = Literal["ok", "empty", "error", "out_of_memory"]


@dataclass(frozen=True)
class Task:
    """What a worker needs to analyse one capture; every field is plain data."""

    capture: CaptureFile  # its path is absolute (or a URL): workers may run elsewhere
    directory: str  # absolute: OUTDIR/captures/<name>
    reports: tuple[str, ...]  # report formats to write (names in report.formats)
    fingerprint: Fingerprint
    force: bool = False

    @property
    def name(self) -> str:
        """The capture's directory name under ``OUTDIR/captures/``."""
        return os.path.basename(self.directory)


class Outcome(TypedDict):
    """A task's result: JSON values only."""

    path: str
    status: Status
    message: str | None
    rows: list[dict[str, Any]]  # one per allocator; empty unless status is "ok"
    reused: bool  # True when the stored result was still valid
