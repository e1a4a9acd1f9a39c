"""The failure a capture ended in, placed on its allocator's timeline: numbers only.

A failure record (``decode/failure.py``) says what raised and when Python
caught it. The allocator's events say what it held then. The record's time is
when the exception reached Python, which comes after the request that failed:
TensorFlow's BFC allocator waits (up to 10 s) for memory to be freed before it
gives up, and a graph step that fails frees its tensors before it raises. So
the *moment of failure* is the latest allocation the failing allocator made at
or before that time: the request came after it, and what was freed after it is
mostly the failed step unwinding. The allocator's counters at that event (in
use, available) are the state the request met. ``Profile.breakdown_at`` lists
who held the bytes then.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceparse.decode.failure import FailureRecord, Frame
from traceparse.decode.trace import MemoryTrace

__all__ = ["Failure", "failures"]


@dataclass(frozen=True)
class Failure:
    """One host's failure: what raised, what it asked for, and the allocator's state then.

    A field the record or the capture does not give is None (never a guess):
    ``requested_bytes`` is shape x dtype from TensorFlow's message, or the bytes
    it states; ``in_use_bytes`` and ``capacity_bytes`` are the allocator's own
    counters at the moment of failure (``time_ps``); ``caught_ps`` is when the
    exception reached Python. Times are ps from the host's capture start.
    """

    host: str
    path: str
    way: str | None
    exception_type: str
    message: str
    message_cut: bool
    out_of_memory: bool
    op: str | None
    op_type: str | None
    shape: str | None
    dtype: str | None
    requested_bytes: int | None
    allocator: str | None
    device: str | None
    step: int | None
    caught_ps: int | None
    time_ps: int | None
    in_use_bytes: int | None
    capacity_bytes: int | None
    free_bytes: int | None
    fragmentation: float | None
    tensorflow: str | None
    defined_at: tuple[Frame, ...] = ()
    traceback: tuple[Frame, ...] = ()
    # The allocator the message names when the capture has no events of it (a
    # record beside another machine's capture): never shown as the failing one.
    unmatched_allocator: str | None = None

    @property
    def shortfall_bytes(self) -> int | None:
        """How much more would have had to be free for the request to fit (0: it
        would have fitted in the free bytes, so fragmentation stopped it)."""
        if self.requested_bytes is None or self.free_bytes is None:
            return None
        return max(0, self.requested_bytes - self.free_bytes)

    @property
    def exceeds_capacity(self) -> bool | None:
        """Whether the request alone is larger than everything the allocator has."""
        if self.requested_bytes is None or self.capacity_bytes is None:
            return None
        return self.requested_bytes > self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-able data (frames as dicts)."""
        out = asdict(self)
        out["shortfall_bytes"] = self.shortfall_bytes
        out["exceeds_capacity"] = self.exceeds_capacity
        return out


def failures(traces: Sequence[MemoryTrace], timeline: pd.DataFrame) -> list[Failure]:
    """One ``Failure`` per host whose capture has a failure record, in host order."""
    out = []
    for trace in traces:
        record = trace.failure
        if record is None:
            continue
        out.append(_place(record, trace.host, timeline))
    return out


def _place(record: FailureRecord, host: str, timeline: pd.DataFrame) -> Failure:
    request = record.request
    mine = timeline[(timeline["host"].astype(object) == host).to_numpy(dtype=bool)]
    names = sorted(str(a) for a in mine["allocator"].dropna().unique())
    allocator = request.allocator
    unmatched = allocator if allocator is not None and allocator not in names else None
    if allocator not in names:
        allocator = _allocator_of(request.device, names) if allocator is None else None
    row = None if allocator is None else _moment(mine, allocator, record.time_ps)
    step = record.step
    if step is None and row is not None and pd.notna(row["step"]):
        step = int(row["step"])
    in_use = capacity = free = None
    fragmentation = None
    if row is not None:
        heap = _int(row["heap_bytes"]) or 0
        in_use = heap + (_int(row["reserved_bytes"]) or 0)
        free = _int(row["available_bytes"])
        capacity = None if free is None else in_use + free
        value = row["fragmentation"]
        fragmentation = None if pd.isna(value) else float(value)
    return Failure(
        host=host,
        path=record.path,
        way=record.way,
        exception_type=record.exception_type,
        message=record.message,
        message_cut=record.message_cut,
        out_of_memory=record.out_of_memory,
        op=request.op,
        op_type=request.op_type,
        shape=request.shape,
        dtype=request.dtype,
        requested_bytes=request.requested_bytes,
        allocator=allocator,
        device=request.device,
        step=step,
        caught_ps=record.time_ps,
        time_ps=None if row is None else int(row["time_ps"]),
        in_use_bytes=in_use,
        capacity_bytes=capacity,
        free_bytes=free,
        fragmentation=fragmentation,
        tensorflow=record.tensorflow,
        defined_at=request.defined_at,
        traceback=record.traceback,
        unmatched_allocator=unmatched,
    )


def _allocator_of(device: str | None, names: list[str]) -> str | None:
    """The allocator of a message that names only a device (XLA's, JAX's): the
    device's BFC allocator when the capture has it; the only allocator otherwise."""
    found = re.search(r"device:(GPU|CPU):(\d+)", device or "")
    if found is not None:
        wanted = f"GPU_{found.group(2)}_bfc" if found.group(1) == "GPU" else "mklcpu"
        if wanted in names:
            return wanted
    return names[0] if len(names) == 1 else None


def _moment(mine: pd.DataFrame, allocator: str, caught_ps: int | None) -> pd.Series | None:
    """The allocator's latest allocation event at or before ``caught_ps`` (the
    capture's last when the time is unknown); its latest event if it made none."""
    events = mine[(mine["allocator"].astype(object) == allocator).to_numpy(dtype=bool)]
    if caught_ps is not None:
        events = events[events["time_ps"].to_numpy(dtype=np.int64) <= caught_ps]
    if events.empty:
        return None
    grew = events[(events["delta_bytes"].to_numpy(dtype=np.int64, na_value=0) > 0)]
    chosen = grew if len(grew) else events
    return chosen.sort_values("time_ps", kind="stable").iloc[-1]


def _int(value: object) -> int | None:
    return None if value is None or pd.isna(value) else int(value)  # type: ignore[call-overload]


def holders_at(breakdown: pd.DataFrame, failure: Failure, by: str = "layer") -> pd.DataFrame:
    """The bytes ``breakdown`` (``Profile.breakdown_at`` the failure's moment) gives
    each ``by`` value (``layer``, ``op``, ``holder``, ...) on the failing allocator,
    largest first; NA groups as ``(none)``. Columns ``name``, ``bytes``, ``share``
    (of the bytes in use). Rows summing to nothing are left out."""
    rows = breakdown
    if failure.allocator is not None:
        rows = rows[(rows["allocator"].astype(object) == failure.allocator).to_numpy(dtype=bool)]
    rows = rows[(rows["host"].astype(object) == failure.host).to_numpy(dtype=bool)]
    # A row without a name says what kind of holder it is ("(variable)", "(padding)").
    kinds = "(" + rows["holder"].astype(str).str.replace("_", " ") + ")"
    names = rows[by].astype(object).where(rows[by].notna(), kinds).astype(str)
    sizes = rows["bytes"].to_numpy(dtype=np.int64, na_value=0)
    table = (
        pd.DataFrame({"name": names.to_numpy(), "bytes": sizes})
        .groupby("name", sort=False)["bytes"]
        .sum()
        .reset_index()
    )
    table = table[table["bytes"] != 0]
    table = table.sort_values(["bytes", "name"], ascending=[False, True], kind="stable")
    total = int(sizes.sum())
    table["share"] = table["bytes"] / total if total > 0 else np.nan
    return table.reset_index(drop=True)
