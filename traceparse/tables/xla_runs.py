"""Which run made each allocation: the run records (``decode/runs.py``) joined to
the allocation rows, and the program allocations a run can make.

An allocation event is found among the run records by its time and address
(both come from the same event). ``covering_runs`` gives the run covering a
row on its thread and the run a row is an argument of; ``windows`` every
run of a module on any thread, for links by size alone.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate

import numpy as np
import pandas as pd

from traceparse.decode.runs import RunRecords

_PROGRAM_ID = re.compile(r"\((\d+)\)")


@dataclass(frozen=True)
class Candidate:
    program: str
    index: int
    function: str | None
    module: str
    pid: int | None


def program_id(name: str, module: str) -> int | None:
    """The id in a program's metadata name, ``<module>(<id>)``."""
    match = _PROGRAM_ID.fullmatch(name[len(module) :]) if name.startswith(module) else None
    return int(match.group(1)) if match else None


Run = tuple[str, int | None, int]  # (module, program id, end ps) of a run


def covering_runs(
    allocations: pd.DataFrame, records: Mapping[str, RunRecords | None]
) -> tuple[dict[int, Run], dict[int, Run]]:
    """Row -> the run covering it on its thread; row -> the run it is an argument of."""
    found: dict[int, Run] = {}
    arguments: dict[int, Run] = {}
    hosts = allocations["host"].astype(object).to_numpy()
    all_times = allocations["alloc_ps"].to_numpy(dtype=np.int64)
    all_addresses = allocations["address"].to_numpy(dtype=np.int64, na_value=0)
    for host, record in records.items():
        if record is None or record.allocation_runs.empty or record.runs.empty:
            continue
        runs = record.runs
        tied = record.allocation_runs
        key = dict(
            zip(
                zip(tied["time_ps"].tolist(), tied["address"].tolist(), strict=True),
                zip(tied["run"].tolist(), tied["argument_of"].tolist(), strict=True),
                strict=True,
            )
        )
        modules, ends = runs["module"].tolist(), runs["end_ps"].tolist()
        pids = [None if pd.isna(p) else int(p) for p in runs["program_id"].tolist()]
        mine = np.flatnonzero(hosts == host)
        for row, t, a in zip(
            mine.tolist(), all_times[mine].tolist(), all_addresses[mine].tolist(), strict=True
        ):
            run, argument = key.get((t, a), (-1, -1))
            if run >= 0:
                found[row] = (modules[run], pids[run], ends[run])
            elif argument >= 0:
                arguments[row] = (modules[argument], pids[argument], ends[argument])
    return found, arguments


def argument_links(
    allocations: pd.DataFrame,
    arguments: dict[int, Run],
    parameters: dict[tuple[str, int], list[Candidate]],
) -> dict[int, tuple[str, str, tuple[int, ...]]]:
    """Rows made for a run's arguments (JAX's ``DevicePut`` in a call) -> (host,
    program, parameter indices) of that run's program with their size, when
    they are all of one program."""
    found: dict[int, tuple[str, str, tuple[int, ...]]] = {}
    if not arguments:
        return found
    hosts = allocations["host"].astype(object).to_numpy()
    requested = allocations["requested_bytes"].to_numpy(dtype=np.int64, na_value=-1)
    for row, (module, pid, _) in arguments.items():
        fits = [
            c
            for c in parameters.get((hosts[row], int(requested[row])), [])
            if c.module == module and (pid is None or c.pid in (pid, None))
        ]
        if len({c.program for c in fits}) == 1:
            found[row] = (hosts[row], fits[0].program, tuple(c.index for c in fits))
    return found


class Windows:
    """A module's run windows, for "is one of them under way at ``time``" in
    log n: per program id (and for any id) the windows sorted by start with
    the latest end so far, so the answer is one binary search (a scan of every
    window per allocation made long captures quadratic)."""

    def __init__(self, windows: list[tuple[int, int, int | None]]) -> None:
        groups: dict[object, list[tuple[int, int]]] = {}
        for start, end, pid in windows:
            groups.setdefault(_ANY, []).append((start, end))
            groups.setdefault(pid, []).append((start, end))
        self._groups: dict[object, tuple[list[int], list[int]]] = {}
        for key, spans in groups.items():
            spans.sort()
            self._groups[key] = (
                [s for s, _ in spans],
                list(accumulate((e for _, e in spans), max)),
            )

    def covers(self, time: int, pid: int | None) -> bool:
        """Whether a window covers ``time`` whose id is ``pid``, unknown, or any
        when ``pid`` is None."""
        keys = (_ANY,) if pid is None else (pid, None)
        return any(self._covers(key, time) for key in keys)

    def _covers(self, key: object, time: int) -> bool:
        found = self._groups.get(key)
        if found is None:
            return False
        starts, latest = found
        at = bisect_right(starts, time)
        return at > 0 and latest[at - 1] >= time


_ANY = object()  # every window of the module, whatever its id


def windows(record: RunRecords) -> dict[str, Windows]:
    """Module -> its run windows (start, end, program id) on any thread."""
    found: dict[str, list[tuple[int, int, int | None]]] = {}
    runs = record.runs
    for module, start, end, pid in zip(
        runs["module"].tolist(),
        runs["start_ps"].tolist(),
        runs["end_ps"].tolist(),
        runs["program_id"].tolist(),
        strict=True,
    ):
        found.setdefault(module, []).append((start, end, None if pid is pd.NA else int(pid)))
    return {module: Windows(spans) for module, spans in found.items()}


def within(windows: Windows | None, time: int, pid: int | None) -> bool:
    return windows is not None and windows.covers(time, pid)
