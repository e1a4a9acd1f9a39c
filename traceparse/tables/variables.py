"""``Profile.variables``: the inventoried variables of every host, with their allocator.

A variable's memory comes from the allocator of its device, named as the
capture names allocators:

- ``/device:GPU:N`` -> ``GPU_N_bfc`` (TensorFlow's BFC allocator per GPU);
- ``/device:CPU:N`` -> the host's CPU allocator that the capture recorded:
  ``mklcpu`` (oneDNN on) or ``cpu``; ``mklcpu`` when the capture recorded
  neither (TensorFlow's plain CPU allocator records no events at all);
- any other device (a TPU) -> NA: its memory is not in the capture's events.

``traced`` says whether the allocator records the variable's buffer at all:
False with no allocator, and on a CPU allocator for a variable under 256 KiB
(``CPU_POOL_BYTES``): oneDNN serves those from a small-size pool that emits no
memory events, so such a variable is in no counter of the capture and adds 0
bytes anywhere. False also when the size is unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import pandas as pd

from traceparse.decode.trace import MemoryTrace
from traceparse.decode.variables import INVENTORY_COLUMNS
from traceparse.tables.contracts import VARIABLES, conform

# Profile.variables: the inventory's columns with the host and the allocator
# (its declaration is tables.contracts.VARIABLES).
VARIABLE_COLUMNS = VARIABLES.dtypes

CPU_ALLOCATORS = ("mklcpu", "cpu")
# mklcpu serves requests under this from a pool that emits no memory events.
CPU_POOL_BYTES = 256 * 1024
_DEVICE = re.compile(r"/device:([A-Za-z_]+):(\d+)$")


def device_allocator(device: str, recorded: Iterable[str] = ()) -> str | None:
    """The allocator holding ``device``'s memory (see the module docstring)."""
    found = _DEVICE.search(device)
    if found is None:
        return None
    kind, index = found.group(1).upper(), found.group(2)
    if kind == "GPU":
        return f"GPU_{index}_bfc"
    if kind == "CPU":
        names = set(recorded)
        return next((name for name in CPU_ALLOCATORS if name in names), CPU_ALLOCATORS[0])
    return None


def traced(allocator: pd.Series, estimated_bytes: pd.Series) -> pd.Series:
    """Per variable: does its allocator record its buffer (the module docstring)?"""
    size = estimated_bytes.astype("Int64")
    cpu = allocator.astype(object).isin(CPU_ALLOCATORS)
    small = cpu & (size.fillna(0) < CPU_POOL_BYTES)
    return (allocator.notna() & size.notna() & ~small).astype(bool)


def variables_table(traces: Sequence[MemoryTrace], timeline: pd.DataFrame) -> pd.DataFrame:
    """One row per inventoried variable and host; empty with the columns when none."""
    frames = []
    for trace in traces:
        if trace.inventory is None or trace.inventory.variables.empty:
            continue
        frame = trace.inventory.variables[list(INVENTORY_COLUMNS)].copy()
        mine = timeline["host"].astype(object) == trace.host if len(timeline) else []
        recorded = timeline.loc[mine, "allocator"].dropna().unique() if len(timeline) else []
        by_device = {
            d: device_allocator(str(d), [str(a) for a in recorded])
            for d in frame["device"].astype(object).unique()
        }
        frame["allocator"] = frame["device"].astype(object).map(by_device)
        frame["traced"] = traced(frame["allocator"], frame["estimated_bytes"])
        frame["host"] = trace.host
        frames.append(frame)
    if not frames:
        return VARIABLES.empty()
    return conform(pd.concat(frames, ignore_index=True), VARIABLES)
