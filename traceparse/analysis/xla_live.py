"""Linked XLA slabs at the allocator's peak, opened up into their HLO buffers.

``slab_frame`` lists, per linked temp slab live at a peak, the HLO buffers live
at the program's peak (with their TF op, dtype and shape) and one slack row;
``analysis/breakdown.py`` turns them into the breakdown's ``xla_buffer``,
``xla_value`` and ``xla_slack`` rows. The tables here are a few rows per
slab, so they are built in plain Python, not with pandas joins. ``slabs_at``
puts them together for the allocations live at an instant (moved from
``core/xla.py``'s ``XlaParts.slabs``, issue 46).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd

from traceparse.analysis.naming import NO_TF_OP
from traceparse.analysis.xla import peak_fill
from traceparse.decode.xla import XlaProgram
from traceparse.tables.xla import buffer_info, buffer_naming

# The op of an HLO buffer (or agreed value) live in a linked slab whose TF op the
# module does not say (tables/xla.py: no metadata, and not a fusion or copy of
# an op that has one) is NO_TF_OP in every view.

# One row per live buffer of a slab, then its slack row (buffer False). An
# allocation named by the value all its candidate allocations hold (index NA,
# ``held_rows``) has one value row with logical_buffer and instruction NA.
SLAB_COLUMNS: dict[str, str] = {
    "row": "int64",  # the slab's row in live_at_peak (= allocations)
    "host": "object",
    "program": "object",
    "allocation_index": "Int64",  # NA for a value named by agreement
    "logical_buffer": "Int64",
    "buffer": "bool",  # a value's row (not the slack row)
    "held_bytes": "int64",
    "instruction": "object",
    "tf_op": "object",
    "tf_op_type": "object",
    "dtype": "object",
    "shape": "object",
    "estimated_bytes": "Int64",
    "named_by": "object",  # how the buffer's tf_op was found (tables/xla.py NAMED_BY)
}

# (host, program, allocation index) -> ([(logical buffer, bytes it covers)], slack)
PeakFill = dict[tuple[str, str, int], tuple[list[tuple[int, int]], int]]
# (host, program, logical buffer) -> (instruction, tf_op, tf_op_type, dtype, shape, estimated)
BufferInfo = Callable[[str, str, int], tuple[Any, ...]]


def linked_slabs(live: pd.DataFrame) -> list[tuple[int, str, str, int]]:
    """(row, host, program, allocation index) of each linked allocation in ``live``."""
    if live.empty or "xla_allocation_index" not in live:
        return []
    linked = live[live["xla_allocation_index"].notna()]
    return list(
        zip(
            linked.index.tolist(),
            linked["host"].astype(object).tolist(),
            linked["xla_program"].astype(object).tolist(),
            linked["xla_allocation_index"].astype("int64").tolist(),
            strict=True,
        )
    )


def slab_rows(
    slabs: Iterable[tuple[int, str, str, int]], fill: PeakFill, info: BufferInfo
) -> list[tuple[Any, ...]]:
    """``SLAB_COLUMNS`` rows for the slabs whose allocation ``fill`` describes (temp ones)."""
    rows: list[tuple[Any, ...]] = []
    for row, host, program, index in slabs:
        found = fill.get((host, program, index))
        if found is None:
            continue
        covered, slack = found
        for buffer, held in covered:
            rows.append(
                (row, host, program, index, buffer, True, held, *info(host, program, buffer))
            )
        rows.append((row, host, program, index, None, False, slack, *[None] * 6))
    return rows


def held_rows(live: pd.DataFrame, held: dict[Any, tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``SLAB_COLUMNS`` rows for the allocations in ``live`` named by an agreed value
    ((dtype, shape, estimated_bytes, tf_op, tf_op_type), see tables/xla_link.py):
    the value covers up to its shape x dtype bytes, the rest is slack."""
    rows: list[tuple[Any, ...]] = []
    if held and "xla_program" in live:
        found = live[live.index.isin(list(held))]
        for row, host, program, requested in zip(
            found.index.tolist(),
            found["host"].astype(object).tolist(),
            found["xla_program"].astype(object).tolist(),
            found["requested_bytes"].fillna(0).astype("int64").tolist(),
            strict=True,
        ):
            dtype, shape, estimated, tf_op, tf_op_type = held[row]
            covered = min(int(estimated), int(requested))
            head = (row, host, program, None, None)
            rows.append((*head, True, covered, None, tf_op, tf_op_type, dtype, shape, estimated))
            rows.append((*head, False, int(requested) - covered, *[None] * 6))
    return rows


def slab_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """The ``SLAB_COLUMNS`` frame of ``slab_rows`` and ``held_rows``; a value
    row (buffer) with no TF op gets NO_TF_OP. Trailing columns a row lacks are NA."""
    columns = list(SLAB_COLUMNS)
    tf_op, buffer = columns.index("tf_op"), columns.index("buffer")
    rows = [(*r, *[None] * (len(columns) - len(r))) for r in rows]
    named = [
        (*r[:tf_op], NO_TF_OP, *r[tf_op + 1 :]) if r[buffer] and r[tf_op] is None else r
        for r in rows
    ]
    return pd.DataFrame(named, columns=columns).astype(SLAB_COLUMNS)


def programs_at_peak(expanded: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From ``breakdown.expanded_live``'s rows: per (host, allocator, program) the bytes its
    allocations hold at the peak, and its values (HLO buffers, agreed values)
    live there, largest first. Both empty when nothing linked is live."""
    linked = expanded[expanded["xla_program"].notna()] if "xla_program" in expanded else expanded
    keys = ["host", "allocator", "xla_program"]
    if linked.empty:
        return pd.DataFrame(columns=[*keys, "allocations", "allocated_bytes"]), pd.DataFrame(
            columns=[*keys, "xla_buffer", "op", "dtype", "shape", "allocated_bytes"]
        )
    frame = linked.astype({c: object for c in keys})
    programs = (
        frame.groupby(keys, sort=False)
        .agg(allocations=("allocation", "nunique"), allocated_bytes=("allocated_bytes", "sum"))
        .reset_index()
        .sort_values("allocated_bytes", ascending=False, kind="stable")
    )
    values = frame[frame["xla_buffer"].notna() | frame["dtype"].notna()]
    buffers = values[[*keys, "xla_buffer", "op", "dtype", "shape", "allocated_bytes"]]
    buffers = buffers.sort_values("allocated_bytes", ascending=False, kind="stable")
    return programs.reset_index(drop=True), buffers.reset_index(drop=True)


def slabs_at(
    live: pd.DataFrame,
    held: dict[Any, tuple[Any, ...]],
    programs: Sequence[tuple[str, XlaProgram]],
) -> pd.DataFrame:
    """Per linked temp slab in ``live``: its buffers at the program's peak
    (``SLAB_COLUMNS``; a value with no TF op has ``tf_op`` NO_TF_OP), and the
    rows named by an agreed value (``held``: label -> value, ``held_rows``).
    ``programs`` are the run's (host, program), empty when nothing is linked;
    only the programs of the slabs found are indexed."""
    if not programs:  # nothing linked (or no programs): no parsing, no rows
        return slab_frame([])
    found = linked_slabs(live)
    rows = held_rows(live, held)
    if found:
        wanted = {(host, program, index) for _, host, program, index in found}
        names = {(host, program) for host, program, _ in wanted}
        used = [(h, p) for h, p in programs if (h, p.name) in names]
        by_name = {(h, p.name): p for h, p in used}

        def info(host: str, program: str, buffer: int) -> tuple[object, ...]:
            named = by_name[(host, program)]
            return (*buffer_info(named, buffer), buffer_naming(named, buffer))

        rows = slab_rows(found, peak_fill(used, wanted), info) + rows
    return slab_frame(rows)
