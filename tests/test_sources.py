"""Source lines (issue 38, docs/sources.md) on the real captures of
``fixtures/sources_model.py`` (made by ``fixtures/make_sources.py``).

Ground truth is the model's own file: the lines of ``Net.call`` that call a
layer or an op carry a ``# layer`` comment, and the line of each Keras layer
is found by its attribute (``self.wide(``). Which bytes are activations and
gradients comes from the profiler's op names (graph captures) and op types
(the eager capture), not from the source record.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse.analysis.breakdown import INSIDE
from traceparse.core.profile import NO_SOURCES

MODEL = FIXTURES / "sources_model.py"
SHOWN = "fixtures/sources_model.py"
TEXT = MODEL.read_text().splitlines()
LAYER_LINES = {i + 1 for i, line in enumerate(TEXT) if line.rstrip().endswith("# layer")}
# The line calling each Keras layer, by the layer's name.
LAYER_LINE = {
    name: next(i + 1 for i, line in enumerate(TEXT) if f"self.{name}(" in line)
    for name in ("wide", "narrow", "head")
}
# What the model's forward and backward passes run eagerly (oneDNN renames MatMul).
EAGER_TYPES = {
    "MatMul",
    "_MklMatMul",
    "BiasAdd",
    "BiasAddGrad",
    "Softplus",
    "Sigmoid",
    "Relu",
    "ReluGrad",
}
WRAPPER = re.compile(r"^(?:StatefulPartitionedCall/|PartitionedCall/)+")


def load(name: str) -> traceparse.Profile:
    return traceparse.load(FIXTURES / name)


def line_of(source: object) -> int | None:
    """The line number of a ``fixtures/sources_model.py:N function`` source, else None."""
    if not isinstance(source, str):
        return None
    found = re.match(rf"^{re.escape(SHOWN)}:(\d+) ", source)
    return int(found.group(1)) if found else None


def model_op(op: object) -> str | None:
    """The op's name without call wrappers when it is the model's forward or
    backward op (``net_1/...`` or ``gradient_tape/net_1/...``), else None."""
    if not isinstance(op, str):
        return None
    name = WRAPPER.sub("", op)
    return name if name.startswith(("net_1/", "gradient_tape/net_1/")) else None


def expected_line(name: str) -> set[int]:
    """The lines an op of the model may come from: its layer's line when the
    name says the layer, else any line of ``call`` that calls an op."""
    for layer, line in LAYER_LINE.items():
        if f"/{layer}_1/" in name:
            return {line}
    return LAYER_LINES


def share_on_lines(rows: pd.DataFrame, names: pd.Series, size: str) -> tuple[float, int]:
    """The share of ``rows``' bytes whose source is the line their op expects."""
    total = int(rows[size].sum())
    good = sum(
        int(b)
        for b, name, source in zip(rows[size], names, rows["source"], strict=True)
        if line_of(source) in expected_line(name)
    )
    return good / total if total else 0.0, total


def test_the_model_file_marks_its_lines() -> None:
    assert len(LAYER_LINES) == 5
    assert set(LAYER_LINE.values()) <= LAYER_LINES


@pytest.mark.parametrize("name", ["sources_fit", "sources_callback", "sources_run"])
def test_fit_activations_and_gradients_at_the_peak_name_the_calls(name: str) -> None:
    prof = load(name)
    live = prof.breakdown
    live = live[live["holder"].astype(object).isin(INSIDE).to_numpy(dtype=bool)]
    names = live["op"].map(model_op)
    mine = live[names.notna().to_numpy(dtype=bool)]
    share, total = share_on_lines(mine, names.dropna(), "bytes")
    assert total >= 2**20  # a megabyte of activations and gradients at the peak
    assert share >= 0.9, (name, share)
    # Over the whole capture too, every allocation the model's ops made.
    made = prof.allocations
    names = made["op"].map(model_op)
    mine = made[names.notna().to_numpy(dtype=bool)]
    share, total = share_on_lines(mine, names.dropna(), "requested_bytes")
    assert total > 0 and share >= 0.9, (name, share)


@pytest.mark.parametrize("name", ["sources_jit", "sources_jit_tf216"])
def test_jit_compile_buffers_name_the_calls(name: str) -> None:
    prof = load(name)
    values = prof.breakdown
    values = values[values["holder"].astype(object).isin(["xla_buffer", "xla_value"])]
    names = values["op"].map(model_op)
    mine = values[names.notna().to_numpy(dtype=bool)]
    share, total = share_on_lines(mine, names.dropna(), "bytes")
    assert total >= 2**20
    assert share >= 0.9, share
    # The largest tensors of the summary carry those lines.
    (summary,) = prof.summary()
    top = summary.top_tensors
    assert "source" in top
    # wide's output: its MatMul (TensorFlow 2.21), or the BiasAdd it is fused into (2.16).
    wide = [
        source
        for op, source in zip(top["op"].astype(object), top["source"].astype(object), strict=True)
        if op in ("net_1/wide_1/MatMul", "net_1/wide_1/BiasAdd")
    ]
    assert wide and {line_of(source) for source in wide} == {LAYER_LINE["wide"]}


@pytest.mark.parametrize("name", ["sources_tape", "sources_tape_tf216"])
def test_eager_tape_activations_and_gradients_name_the_calls(name: str) -> None:
    prof = load(name)
    at_peak = (prof.live_at_peak(), "allocated_bytes")
    for table, size in (at_peak, (prof.allocations, "requested_bytes")):
        mine = table[table["op"].astype(object).isin(EAGER_TYPES).to_numpy(dtype=bool)]
        total = int(mine[size].sum())
        on_lines = mine["source"].map(line_of).isin(LAYER_LINES).to_numpy(dtype=bool)
        assert total >= 2**20
        assert int(mine[size][on_lines].sum()) / total >= 0.9
    # A [256,1024] tensor is wide's or softplus' output or its gradient (made by
    # their backward ops, or by narrow's, which reads it); a gradient of wide's
    # kernel ([512,1024]) comes from the wide line alone.
    made = prof.allocations
    wide = LAYER_LINE["wide"]
    for shape, lines in (
        ("[256,1024]", {wide, wide + 1, LAYER_LINE["narrow"]}),
        ("[512,1024]", {LAYER_LINE["wide"]}),
    ):
        rows = made[
            (made["shape"].astype(object) == shape).to_numpy(dtype=bool)
            & made["op"].astype(object).isin(EAGER_TYPES).to_numpy(dtype=bool)
        ]
        assert len(rows)
        assert set(rows["source"].map(line_of)) <= lines, shape


def test_every_capture_way_gives_the_same_lines() -> None:
    """profile(), the Keras callback and `traceparse run` of one model: each line
    of ``call`` holds the same bytes at the peak and asked for the same over the
    three steps. (The ``fit`` line's do differ: it holds what no line of the
    model made, the input pipeline's and the optimizer's buffers, and each way
    captures a different stretch of ``fit``; `run` also the weights' creation.)"""
    tables = {}
    for name in ("sources_fit", "sources_callback", "sources_run"):
        lines = load(name).lines()
        lines = lines[lines["source"].map(line_of).isin(LAYER_LINES).to_numpy(dtype=bool)]
        tables[name] = lines.set_index(lines["source"].astype(str))[
            ["live_at_peak_bytes", "requested_bytes", "allocations"]
        ].sort_index()
    assert len(tables["sources_fit"]) == len(LAYER_LINES)
    pd.testing.assert_frame_equal(tables["sources_fit"], tables["sources_callback"])
    pd.testing.assert_frame_equal(tables["sources_fit"], tables["sources_run"])


def test_lines_sum_to_what_the_capture_made() -> None:
    prof = load("sources_fit")
    lines = prof.lines()
    inside = prof.breakdown[prof.breakdown["holder"].astype(object).isin(INSIDE).to_numpy(bool)]
    assert int(lines["live_at_peak_bytes"].sum()) == int(inside["bytes"].sum())
    assert int(lines["requested_bytes"].sum()) == int(prof.allocations["requested_bytes"].sum())
    assert int(lines["allocations"].sum()) == len(prof.allocations)
    by_stack = prof.lines(by_stack=True)
    assert int(by_stack["live_at_peak_bytes"].sum()) == int(inside["bytes"].sum())
    assert by_stack["stack"].notna().all()
    # Every stack named is in Profile.stacks, its user frame among its frames.
    stacks = prof.stacks
    for stack, source in zip(by_stack["stack"], by_stack["source"], strict=True):
        frames = stacks[(stacks["stack"] == stack).to_numpy(dtype=bool)]
        assert len(frames) and frames["depth"].tolist() == list(range(len(frames)))
        user = frames[frames["user"].to_numpy(dtype=bool)]["frame"].tolist()
        assert source is None or source is pd.NA or source == user[-1]


def test_largest_first() -> None:
    lines = load("sources_tape").lines()
    peak = lines["live_at_peak_bytes"].to_numpy(dtype=np.int64)
    assert (np.diff(peak) <= 0).all()


def test_no_record_no_source_and_a_note() -> None:
    prof = load("keras_train")
    assert prof.allocations["source"].isna().all()
    assert prof.breakdown["source"].isna().all() and prof.breakdown["stack"].isna().all()
    assert prof.stacks.empty
    assert not prof.has_sources
    assert "traceparse.profile()" in prof.lines().attrs["diagnostic"]
    # Captures made elsewhere say how to get source lines, once.
    assert [note for note in prof.diagnostics() if "source" in note] == [NO_SOURCES + "."]


def test_without_the_record_every_other_table_is_the_same(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(FIXTURES / "sources_fit", copy)
    (record,) = copy.rglob("*.sources.json.gz")
    record.unlink()
    with_record, without = load("sources_fit"), traceparse.load(copy)
    assert without.allocations["source"].isna().all()
    assert with_record.allocations["source"].notna().all()
    dropped = ["source"]
    pd.testing.assert_frame_equal(
        with_record.allocations.drop(columns=dropped), without.allocations.drop(columns=dropped)
    )
    pd.testing.assert_frame_equal(
        with_record.breakdown.drop(columns=["source", "stack"]),
        without.breakdown.drop(columns=["source", "stack"]),
    )
    for table in ("ops", "peak", "attribution", "steps", "timeline"):
        pd.testing.assert_frame_equal(getattr(with_record, table), getattr(without, table))
    pd.testing.assert_frame_equal(with_record.layers(), without.layers())
    assert [*with_record.diagnostics(), NO_SOURCES + "."] == without.diagnostics()


def test_the_lines_command(tmp_path: Path) -> None:
    from conftest import run_traceparse

    flame = tmp_path / "flame.html"
    done = run_traceparse("lines", "fixtures/sources_jit", "--flame", str(flame))
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[3]  # title, header, rule, then the largest line
    assert first.startswith(f"{SHOWN}:")
    assert f"{SHOWN}:{LAYER_LINE['wide']} call" in done.stdout
    page = flame.read_text()
    assert "<script" not in page and f"{SHOWN}:{LAYER_LINE['narrow']} call" in page
    done = run_traceparse("lines", "fixtures/sources_tape", "--stack", "--format", "json")
    assert done.returncode == 0, done.stderr
    import json

    rows = json.loads(done.stdout)
    assert rows and all(isinstance(r["stack"], int) for r in rows)
    done = run_traceparse("lines", "fixtures/keras_train")
    assert done.returncode == 0 and "traceparse.profile()" in done.stdout + done.stderr


def test_the_html_report_draws_the_stacks() -> None:
    from traceparse.report import render_html

    page = render_html([load("sources_fit")])
    assert "tp-flame" in page and f"{SHOWN}:{LAYER_LINE['wide']} call" in page
    assert "tp-flame" not in render_html([load("keras_train")])


@pytest.mark.parametrize("name", ["sources_jit_tf216", "sources_tape_tf216"])
def test_tensorflow_216_captures_are_put_on_the_wall_clock_by_the_clock_mark(name: str) -> None:
    # TensorFlow 2.16 writes no capture start; the clock mark gives one, inside
    # the source record's window (else the record would be ignored as stale).
    prof = load(name)
    (trace,) = prof.traces
    assert trace.start_ns is not None and trace.sources is not None
    assert trace.sources.started_ns <= trace.start_ns <= trace.sources.stopped_ns
    assert not any("when it started" in note for note in prof.diagnostics())


def test_tensorflow_216_program_runs_are_linked_by_size_alone() -> None:
    # TensorFlow 2.16 on the CPU records no run of the jit-compiled step: its
    # temp slabs are linked by their size, which one program alone has.
    prof = load("sources_jit_tf216")
    linked = prof.allocations[prof.allocations["xla_program"].notna().to_numpy(dtype=bool)]
    assert len(linked) == 3  # one slab per step
    assert linked["xla_program"].astype(str).str.contains("one_step_on_data").all()
    assert any("size alone: the capture records no run" in n for n in prof.diagnostics())
    held = prof.breakdown[prof.breakdown["holder"].astype(object) == "xla_buffer"]
    assert int(held["bytes"].sum()) >= 2**22


@pytest.mark.parametrize(
    ("name", "forward"),
    [
        # A while loop's gradient body: the forward op in the loop's body.
        (
            "gradient_tape/net/lstm/while/gradients/net/lstm/while/cell/MatMul_grad/MatMul_1",
            "net/lstm/while/cell/MatMul",
        ),
        # An aggregation there: under the loop.
        ("gradient_tape/net/lstm/while/gradients/AddN_3", "net/lstm/while/AddN_3"),
        ("gradient_tape/net/wide/MatMul/MatMul_1", "net/wide/MatMul/MatMul_1"),
        # An accumulator the gradient adds to the forward body: itself (then its loop).
        ("net/lstm/while/TensorListPushBack_6", "net/lstm/while/TensorListPushBack_6"),
        ("gradients/_grad", "_grad"),
    ],
)
def test_a_backward_ops_name_points_to_its_forward_op(name: str, forward: str) -> None:
    from traceparse.capture.sources import forward_name

    assert forward_name(name) == forward
