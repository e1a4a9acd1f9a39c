"""When an allocator's peak repeats: every instant it reaches (nearly) its maximum.

A training loop reaches the same peak once per step (a GPU runs a step's
kernels on one stream in the same order every time; on CPU the inter-op
threads move it by a few percent). ``Profile.peak`` keeps one instant, the
latest event at the maximum (xprof's rule, ``analysis/peak.py``), and which of
the repeated instants is the latest is chance: two runs of one program then
describe two different instants. This module lists them all and what holds
memory at every one, so a summary can say one thing for both runs.

An allocator's bytes in use come *near its peak* at an event when they are at
least ``(1 - NEAR) x`` the maximum (``NEAR`` = 1%). Consecutive events near the
peak (in the allocator's own order) are one visit; each visit's instant is its
highest event (the latest of equal ones). ``peak_instants`` gives one row per
instant; ``held_at_every`` folds the breakdowns at the instants into one row
per name (layer or op): its smallest and largest bytes over the instants, and
at how many of them it held any, those held at every instant first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import group_codes
from traceparse.analysis.peak import in_use
from traceparse.tables.contracts import declare

# How close to the maximum an instant counts as reaching it again (a fraction).
NEAR = 0.01
# Instants a summary opens into breakdowns at most (the highest first): a loop of
# thousands of steps would otherwise cost a breakdown each.
MOST_INSTANTS = 16

PEAK_INSTANTS = declare(
    "peak_instants",
    ["host", "allocator", "instant", "event", "time_ps", "in_use_bytes", "step"],
    nullable=["allocator", "step"],
)


def peak_instants(timeline: pd.DataFrame, near: float = NEAR) -> pd.DataFrame:
    """One row per (host, allocator, visit near its peak): the visit's highest event.

    ``instant`` numbers an allocator's instants 0, 1, ... in time order; rows are
    sorted by host, allocator and instant.
    """
    if timeline.empty:
        return PEAK_INSTANTS.empty()
    keys = group_codes(timeline, ["host", "allocator"])
    groups = int(keys.max()) + 1
    values = in_use(timeline)
    top = np.full(groups, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(top, keys, values)
    # Integer arithmetic: at or above (1 - near) of the maximum.
    scale = 10_000
    floor = top - (top * round(near * scale)) // scale
    near_peak = values >= floor[keys]
    # Each allocator's events in its own order (rows are in time order within one).
    order = np.argsort(keys, kind="stable")
    k, hit = keys[order], near_peak[order]
    previous = np.concatenate([[False], hit[:-1] & (k[1:] == k[:-1])])
    starts = hit & ~previous
    visit = np.cumsum(starts) - 1
    rows = order[hit]
    visits = visit[hit]
    # Per visit the highest event, the latest of equal ones: sort by visit, value, row.
    ranked = np.lexsort((rows, values[rows], visits))
    last = np.r_[visits[ranked][1:] != visits[ranked][:-1], True]
    event = rows[ranked][last]
    found = timeline.iloc[event]
    table = pd.DataFrame(
        {
            "host": found["host"].to_numpy(),
            "allocator": found["allocator"].to_numpy(),
            "instant": np.zeros(len(event), dtype=np.int64),
            "event": event.astype(np.int64),
            "time_ps": found["time_ps"].to_numpy(dtype=np.int64),
            "in_use_bytes": values[event],
            "step": found["step"].astype("Int64").to_numpy(),
        }
    )
    table = table.sort_values(["host", "allocator", "time_ps", "event"], kind="stable")
    table = table.reset_index(drop=True)
    owner = group_codes(table, ["host", "allocator"])
    table["instant"] = table.groupby(owner).cumcount().to_numpy(dtype=np.int64)
    return table.astype(PEAK_INSTANTS.dtypes)


def chosen_instant(instants: pd.DataFrame, at: str | int) -> pd.DataFrame:
    """Per allocator the instant ``at`` picks: ``"first"``, ``"last"`` (the peak's own
    rule) or a step number (that step's highest instant, the latest of equal ones);
    allocators with no instant in that step have no row."""
    if at == "first":
        return instants.groupby(["host", "allocator"], observed=True, sort=False).head(1)
    if at == "last":
        return instants.groupby(["host", "allocator"], observed=True, sort=False).tail(1)
    mine = instants[(instants["step"] == int(at)).to_numpy(dtype=bool, na_value=False)]
    ranked = mine.sort_values(["in_use_bytes", "time_ps"], kind="stable")
    return ranked.groupby(["host", "allocator"], observed=True, sort=False).tail(1)


def held_at_every(breakdowns: Sequence[pd.DataFrame], by: str) -> pd.DataFrame:
    """Per value of ``by`` (``layer``, ``op``): bytes at each of the instants'
    ``breakdowns`` (one allocator's rows each), as ``low_bytes``/``high_bytes``
    over the instants and ``instants`` (at how many it held any bytes).

    Rows held at every instant come first, each part by its smallest bytes, so
    the order does not depend on which instant came last.
    """
    columns = [by, "low_bytes", "high_bytes", "instants"]
    if not breakdowns:
        return pd.DataFrame(columns=columns)
    sums = [
        b[b[by].notna().to_numpy(dtype=bool)]
        .astype({by: object})
        .groupby(by, sort=False)["bytes"]
        .sum()
        for b in breakdowns
    ]
    frame = pd.concat(sums, axis=1).fillna(0).astype(np.int64)
    held = frame > 0
    table = pd.DataFrame(
        {
            by: frame.index.astype(object),
            "low_bytes": frame.min(axis=1).to_numpy(dtype=np.int64),
            "high_bytes": frame.max(axis=1).to_numpy(dtype=np.int64),
            "instants": held.sum(axis=1).to_numpy(dtype=np.int64),
        }
    )
    table = table[table["instants"] > 0]
    table["_every"] = table["instants"] == len(breakdowns)
    table = table.sort_values(
        ["_every", "low_bytes", "high_bytes", by], ascending=[False, False, False, True]
    )
    return table.drop(columns="_every").reset_index(drop=True)
