"""``Profile.breakdown``: one row per holder of the bytes at each peak, and every view
(attribution, the live-at-peak columns of ops and scopes, layers, the summary's split of
what was allocated before the capture) a group-by of it, on every real capture."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, run_traceparse
from helpers.trace import GPU, alloc, free, profile_of

import traceparse
from traceparse.analysis.attribution import PARTS
from traceparse.analysis.breakdown import HOLDERS, INSIDE
from traceparse.analysis.naming.layers import ROLES
from traceparse.analysis.rollups import scope_of
from traceparse.core.profile import Profile

# Every fixture directory that holds a readable capture (bad ones are tested elsewhere).
CAPTURES = sorted(
    d.name for d in FIXTURES.iterdir() if d.is_dir() and d.name not in {"corrupt", "not_a_capture"}
)
KEYS = ["host", "allocator"]


def load(name: str) -> Profile:
    return traceparse.load(FIXTURES / name)


def _by(frame: pd.DataFrame, keys: list[str], column: str) -> dict[tuple[object, ...], int]:
    """``column`` summed per ``keys`` (NA a key of its own), zero sums left out. A dict,
    not a Series: pandas 2.1's ``sort_index`` leaves a filtered MultiIndex in group
    order, so two equal sums could compare unequal by their order alone."""
    work = frame.astype({k: object for k in keys})
    sums = work.groupby(keys, dropna=False)[column].sum().astype("int64")

    def plain(key: tuple[object, ...]) -> tuple[object, ...]:
        # NA as None: NaN keys from two frames are distinct objects that never compare equal.
        return tuple(None if pd.isna(k) else k for k in key)

    return {plain(key): int(value) for key, value in sums.items() if value != 0}


@pytest.mark.parametrize("name", CAPTURES)
def test_rows_sum_to_each_peak_and_every_view_is_a_group_by(name: str) -> None:
    prof = load(name)
    rows = prof.breakdown
    # Every row has exactly one part and one holder.
    assert rows["part"].notna().all() and rows["part"].isin(PARTS).all()
    assert rows["holder"].isin(HOLDERS).all()
    # Per allocator the bytes sum exactly to its in-use bytes at its peak.
    sums = rows.groupby(KEYS, observed=True, dropna=False)["bytes"].sum()
    for peak in prof.peak.itertuples():
        assert sums[(peak.host, peak.allocator)] == peak.in_use_bytes
    # attribution = pivot of bytes by part.
    att = prof.attribution.set_index(KEYS)
    for part in PARTS:
        got = rows[rows["part"] == part].groupby(KEYS, observed=True)["bytes"].sum()
        for key, value in att[part].items():
            # A part not measured (NA) has no rows.
            expected = 0 if pd.isna(value) else int(value)
            assert int(got.get(key, 0)) == expected, (part, key)
    # ops and scopes: their live-at-peak bytes group the rows made in the capture.
    inside = rows[rows["holder"].isin(INSIDE)]
    ops = prof.ops
    assert _by(ops, [*KEYS, "op"], "live_at_peak_bytes") == _by(inside, [*KEYS, "op"], "bytes")
    for depth in (1, 2):
        scoped = inside.assign(
            scope=[
                None
                if not isinstance(op, str)
                else scope_of(op, depth, known=prof._naming.op_known)
                if op != "(XLA buffer, no TF op)"
                else op
                for op in inside["op"].astype(object)
            ]
        )
        assert _by(prof.scopes(depth), [*KEYS, "scope"], "live_at_peak_bytes") == _by(
            scoped, [*KEYS, "scope"], "bytes"
        )
    # layers = group-by on layer x role.
    layers = prof.layers()
    for role in ROLES:
        mine = rows[rows["role"] == role]
        assert _by(layers, [*KEYS, "layer"], f"{role}_bytes") == _by(
            mine, [*KEYS, "layer"], "bytes"
        ), role
    # Counts: each live allocation once.
    assert int(att["live_allocations"].sum()) == len(prof.live_at_peak())
    assert inside["allocation"].notna().all()


INVENTORIED = sorted(
    d.name for d in FIXTURES.iterdir() if d.is_dir() and any(d.rglob("*.variables.json"))
)


@pytest.mark.parametrize("name", INVENTORIED)
def test_the_summary_header_attribution_and_layers_give_one_answer(name: str) -> None:
    """Issue 23's disagreement: the header's variable split, attribution's
    variable part and layers' named weights and slots are the same bytes,
    whether the variables were made before the capture or during it."""
    prof = load(name)
    rows = prof.breakdown
    before = rows[rows["holder"] == "variable"]
    named = rows[rows["variable"].notna()]
    att = prof.attribution
    assert int(att["variable_bytes"].sum()) == int(before["bytes"].sum())
    # Every named variable is one the inventory lists, on the allocator that traced it.
    listed = prof.variables
    assert set(named["variable"]) <= set(listed.loc[listed["traced"], "path"].astype(str))
    layers = prof.layers()
    assert int(layers["weight_bytes"].sum()) == int(named[named["role"] == "weight"]["bytes"].sum())
    for summary in prof.summary():
        split = summary.before_capture
        assert split is not None
        total = sum(split[f"{role}_bytes"] for role in ("weight", "optimizer", "other"))
        mine = named[named["allocator"] == summary.allocator]
        assert total == int(mine["bytes"].sum())
        assert split["variable_bytes"] == summary.attribution["variable_bytes"]
        assert split["unnamed_bytes"] == summary.attribution["before_capture_bytes"]
        weights = layers[layers["allocator"] == summary.allocator]["weight_bytes"].sum()
        assert split["weight_bytes"] == int(weights)
    before = prof.layers().set_index("layer")["live_at_peak_bytes"]
    unnamed = int(before.get("(before the capture, not named)", 0))
    assert unnamed == int(att["before_capture_bytes"].sum())


def test_xla_slabs_become_buffers_named_by_the_hlo() -> None:
    prof = load("xla_keras")
    rows = prof.breakdown
    buffers = rows[rows["holder"] == "xla_buffer"]
    assert len(buffers) and buffers["xla_buffer"].notna().all()
    # Named from the HLO: its metadata, a fusion or copy it comes from, or its reader.
    assert buffers["named_by"].dropna().astype(str).str.startswith("hlo ").all()
    assert (buffers["named_by"] == "hlo consumer").any()  # max pooling's index buffers
    assert buffers["dtype"].notna().mean() > 0.9  # tuples and tokens have none
    # A slab's buffers and its slack share the slab's allocation; the buffers are
    # items of their own, the slack is the slab's.
    slab = buffers["allocation"].iloc[0]
    mine = rows[rows["allocation"] == slab]
    assert mine["bytes"].sum() == prof.allocations.loc[slab, "allocated_bytes"]
    assert mine["item"].nunique() == len(mine[mine["holder"] == "xla_buffer"]) + 1
    # The expanded live_at_peak is the same rows, one per item, with a clean index.
    expanded = prof.live_at_peak(expand_xla=True)
    assert expanded.index.equals(pd.RangeIndex(len(expanded)))
    assert len(expanded) == rows[rows["holder"].isin(INSIDE)]["item"].nunique()


def test_hand_built_capture_with_lost_frees_keeps_the_sum() -> None:
    """Frees the capture lost leave the before-capture row negative, never a wrong sum."""
    MiB = 1 << 20
    prof = profile_of([alloc(10, 1, 4 * MiB), alloc(20, 2, 2 * MiB), free(30, 1, 4 * MiB)])
    rows = prof.breakdown
    assert set(rows["allocator"].astype(str)) == {GPU}
    assert rows["bytes"].sum() == int(prof.peak["in_use_bytes"].iloc[0])
    assert rows.groupby("part", observed=True)["bytes"].sum().index.isin(PARTS).all()


def test_no_memory_events_give_an_empty_breakdown() -> None:
    rows = load("no_memory").breakdown
    assert rows.empty and list(rows.columns)[:5] == ["host", "allocator", "holder", "part", "bytes"]


def test_breakdown_command(tmp_path: Path) -> None:
    capture = FIXTURES / "xla_keras"
    done = run_traceparse("breakdown", str(capture), "--by", "named_by")
    assert done.returncode == 0, done.stderr
    assert "hlo metadata" in done.stdout
    out = tmp_path / "rows.csv"
    done = run_traceparse("breakdown", str(capture), "--format", "csv", "--output", str(out))
    assert done.returncode == 0, done.stderr
    frame = pd.read_csv(out)
    assert int(frame["bytes"].sum()) == int(load("xla_keras").peak["in_use_bytes"].sum())
    done = run_traceparse("breakdown", str(capture), "--allocator", "nope")
    assert done.returncode != 0 and "nope" in done.stderr
    assert np.all(frame["part"].isin(PARTS))


def test_a_compiled_cnn_leaves_little_in_no_layer() -> None:
    """Issue 24: buffers without a TF op take their reader's; a slab's slack and
    padding have their own row. What no layer holds stays under a tenth of the peak."""
    prof = load("layers_cnn_xla")
    layers = prof.layers().set_index("layer")["live_at_peak_bytes"]
    in_use = int(prof.peak["in_use_bytes"].sum())
    assert int(layers.get("(no layer)", 0)) <= 0.10 * in_use
    assert int(layers.sum()) == in_use
