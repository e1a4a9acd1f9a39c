"""The record sections renderers used to compute themselves (issue 46): each is
built in traceparse/records/ and checked here against the profile's own tables,
computed another way."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from conftest import FIXTURES

import traceparse
from traceparse.analysis.breakdown import INSIDE
from traceparse.output.cells import NO_OP
from traceparse.records import fullest, owned
from traceparse.records.flame import flame_allocators, flame_tree
from traceparse.records.gate import op_requests, padding_rows
from traceparse.records.timeline import timeline_section


def test_the_timeline_section_is_the_allocators_series() -> None:
    prof = traceparse.load(FIXTURES / "gpu_chess_32")
    for record in prof.summary():
        section = timeline_section(prof.timeline, prof.step_markers, record.host, record.allocator)
        rows = prof.timeline[
            (prof.timeline["host"].astype(str) == record.host)
            & (prof.timeline["allocator"].astype(str) == record.allocator)
        ]
        assert list(section.time_ps) == list(rows["time_ps"])
        assert section.time_ps.dtype == np.int64 and section.in_use_bytes.dtype == np.float64
        # The counter before the first event, then each event's change, gives the series.
        changes = rows["delta_bytes"].fillna(0).to_numpy(dtype=np.int64)
        assert section.start_bytes is not None
        assert int(rows["in_use_bytes"].iloc[-1]) == section.start_bytes + int(changes.sum())
        # The peak the record names is a point of the series.
        assert record.peak_bytes in set(section.in_use_bytes.astype(np.int64))


def test_the_step_spans_cover_each_marked_step_once() -> None:
    prof = traceparse.load(FIXTURES / "keras_train")
    (record,) = prof.summary()
    section = timeline_section(prof.timeline, prof.step_markers, record.host, record.allocator)
    markers = prof.step_markers
    assert [s for s, _a, _b in section.steps] == sorted(set(markers["step"].astype(int)))
    for step, start, end in section.steps:
        mine = markers[markers["step"] == step]
        assert (start, end) == (int(mine["start_ps"].min()), int(mine["end_ps"].max()))
    none = timeline_section(prof.timeline, None, record.host, record.allocator)
    assert none.steps == ()


def test_the_fullest_is_by_use_then_peak() -> None:
    (record,) = traceparse.load(FIXTURES / "keras_train").summary()
    low = replace(record, utilisation=0.2, peak_bytes=900)
    high = replace(record, utilisation=0.5, peak_bytes=10)
    unknown = replace(record, utilisation=None, peak_bytes=10**12)
    assert fullest([low, high, unknown]) is high
    assert fullest([unknown, replace(unknown, peak_bytes=1)]) is unknown
    tie = replace(high)
    assert fullest([high, tie]) is high  # the first on a tie
    assert fullest([]) is None


def test_the_before_capture_share() -> None:
    for name in ("vars_run", "keras_train"):
        for record in traceparse.load(FIXTURES / name).summary():
            before = record.attribution.get("before_capture_bytes", 0)
            assert record.before_capture_share == before / record.peak_bytes
    (record,) = traceparse.load(FIXTURES / "keras_train").summary()
    assert replace(record, peak_bytes=0).before_capture_share is None


def test_op_requests_sum_to_the_allocators_requests() -> None:
    prof = traceparse.load(FIXTURES / "keras_train")
    asked = op_requests(prof, NO_OP)
    allocations = prof.allocations
    # A request TensorFlow did not record counts as what was handed out.
    requested = allocations["requested_bytes"].fillna(allocations["allocated_bytes"]).fillna(0)
    for record in prof.summary():
        mine = owned(allocations, record.host, record.allocator)
        total = sum(v[0] for k, v in asked.items() if k[:2] == (record.host, record.allocator))
        assert total == int(requested.loc[mine.index].sum())
        live = prof.live_at_peak(allocator=record.allocator, host=record.host)
        at_peak = sum(v[1] for k, v in asked.items() if k[:2] == (record.host, record.allocator))
        assert at_peak == int(requested.loc[live.index].sum())
    assert all(len(v[2]) <= 3 for v in asked.values())


def test_padding_rows_are_the_padded_allocations_most_first() -> None:
    prof = traceparse.load(FIXTURES / "gpu_chess_32")
    (record, *_rest) = prof.summary()
    live = prof.live_at_peak(allocator=record.allocator, host=record.host)
    rows = padding_rows(live)
    assert len(rows) and (rows["padding_bytes"] > 0).all()
    assert list(rows["padding_bytes"]) == sorted(rows["padding_bytes"], reverse=True)
    assert int(rows["padding_bytes"].sum()) == record.attribution["padding_bytes"]
    assert padding_rows(live.iloc[:0]).empty


def test_the_flame_tree_holds_the_bytes_made_during_the_capture() -> None:
    prof = traceparse.load(FIXTURES / "sources_fit")
    pairs = flame_allocators(prof)
    assert pairs
    for host, allocator in pairs:
        root = flame_tree(prof, host, allocator, no_source="?", no_op="-")
        rows = owned(prof.breakdown, host, allocator)
        made = rows[rows["holder"].astype(object).isin(INSIDE).to_numpy(dtype=bool)]
        sizes = pd.to_numeric(made["bytes"]).fillna(0)
        assert root.size == int(sizes[sizes > 0].sum())
        # Every level's children add up to their parent.
        stack = [root]
        while stack:
            node = stack.pop()
            if node.children:
                assert sum(c.size for c in node.children.values()) == node.size
                stack.extend(node.children.values())
            else:
                assert node.kind == "op"
        assert root.has_user_frames


def test_every_profile_section_has_its_views_and_they_use_its_builder() -> None:
    """The registry names real functions, and each view's module reads the section's
    builder (so no renderer computes the section itself)."""
    import ast
    import importlib
    import inspect

    from traceparse.records.sections import PROFILE_SECTIONS

    for section in PROFILE_SECTIONS.values():
        assert section.views, section.name
        builder = section.build.__name__
        for view in section.views:
            module_name, function = view.split(":")
            module = importlib.import_module(module_name)
            assert callable(getattr(module, function)), view
            tree = ast.parse(inspect.getsource(module))
            named = {
                alias.asname or alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("traceparse.records")
                for alias in node.names
            }
            assert builder in named, f"{view} does not read {builder}"
