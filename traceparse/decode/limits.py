"""Limits every real capture respects. What lies outside them is read as
unknown, skipped or refused, each with a sentence in the diagnostics
(docs/robustness.md), so a damaged file cannot overflow a sum or make the
analyses allocate without bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import pandas as pd

from traceparse.errors import CaptureTooLargeError

# A byte count below 0 or above 256 TiB (no allocator manages that much) is
# read as unknown. An event more than 2**62 ps (53 days) from the capture start
# is skipped: times stay far enough inside int64 that sums and differences of
# them cannot overflow.
MAX_BYTES = 2**48
MAX_TIME_PS = 2**62
BYTE_STATS = (
    "requested_bytes",
    "allocation_bytes",
    "bytes_allocated",
    "bytes_reserved",
    "bytes_available",
    "peak_bytes_in_use",
)
# A host has a few allocators per device (GPU_0_bfc, gpu_host_bfc, ...): a few
# dozen on the largest. A file naming more is damaged or made up, and every
# analysis and report section costs time per allocator, so it is refused.
MAX_ALLOCATORS = 128


def within_time(values: np.ndarray) -> np.ndarray:
    """Whether each int64 lies strictly between -MAX_TIME_PS and MAX_TIME_PS."""
    return (values > -MAX_TIME_PS) & (values < MAX_TIME_PS)


def check_allocators(events: pd.DataFrame, path: str) -> None:
    """Raise ``CaptureTooLargeError`` when ``events`` name more than MAX_ALLOCATORS
    allocators. Shared with the pre-converted profile reader."""
    count = events["allocator"].nunique(dropna=False)
    if count > MAX_ALLOCATORS:
        raise CaptureTooLargeError(
            f"{path}: the memory events name {count} allocators, more than the "
            f"{MAX_ALLOCATORS} traceparse reads from one capture (a host has a few per "
            "device); the file is damaged or not a profiler capture",
            path,
        )


def checked_bytes(events: pd.DataFrame, path: str) -> list[str]:
    """Set the byte counts of ``events`` outside 0..MAX_BYTES to NA, in place; a
    sentence per stat that had any. Shared with the pre-converted profile reader."""
    notes: list[str] = []
    for column in BYTE_STATS:
        values = events[column].to_numpy(dtype=np.int64, na_value=0)  # NA is in range
        bad = (values < 0) | (values > MAX_BYTES)
        if bad.any():
            events.loc[bad, column] = pd.NA
            notes.append(
                f"{path}: {int(bad.sum())} memory events carry {column} below 0 or above "
                f"{MAX_BYTES // 2**40} TiB, which no allocator reports; it is read as unknown."
            )
    return notes


def out_of_range_note(path: str, count: int, origin: str) -> str:
    """The sentence for ``count`` memory events skipped for lying more than
    MAX_TIME_PS from ``origin``. Shared with the pre-converted profile reader."""
    return (
        f"{path}: {count} memory events lie more than {MAX_TIME_PS / 1e12 / 86400:.0f} "
        f"days from {origin} (corrupt timestamps) and were skipped."
    )


def problem_notes(
    problems: Counter[tuple[str, str]], path: str, expected: Mapping[str, str]
) -> list[str]:
    """A sentence per kind of bad value counted while decoding."""
    notes: list[str] = []
    for (stat, problem), count in sorted(problems.items()):
        if problem == "range":
            notes.append(out_of_range_note(path, count, "the capture start"))
        else:
            notes.append(
                f"{path}: {count} memory events carry a {stat} stat that is not "
                f"{expected[stat]} (or names nothing); it is read as unknown."
            )
    return notes


class JsonBudget:
    """The work a JSON record may cost, counted on its text as it is read
    (``files.discover.read_bytes(scan=...)``), before ``json.loads`` builds it.

    ``json.loads`` makes a Python object per value: a 119 KiB gzip of 40M empty
    lists becomes 3.5 GB of lists before any field can be checked. Each ``[``
    and ``{`` opens a container and each ``,`` separates two values, so their
    counts bound what parsing would build; the same characters inside strings
    count too, which only makes the bound stricter than the record's shape. A
    record past ``containers`` or ``values`` raises ``refuse(reason)`` as soon
    as the chunk that crosses it is seen.
    """

    def __init__(self, what: str, containers: int, values: int, refuse: type[Exception]) -> None:
        self.what = what
        self.max_containers = containers
        self.max_values = values
        self.refuse = refuse
        self.containers = 0
        self.values = 0

    def __call__(self, chunk: bytes) -> None:
        self.containers += chunk.count(b"[") + chunk.count(b"{")
        self.values += chunk.count(b",")
        if self.containers > self.max_containers:
            raise self.refuse(
                f"it opens more than {self.max_containers:,} lists and objects, more than "
                f"a {self.what} holds"
            )
        if self.values + self.containers > self.max_values:
            raise self.refuse(
                f"it holds more than {self.max_values:,} values, more than a {self.what} holds"
            )


def is_int64(value: object) -> bool:
    """Whether ``value`` is a Python int (not a bool) that fits int64: every number a
    record or an argument becomes is stored as one."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
