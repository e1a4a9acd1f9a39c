"""XLA programs: our hlo.proto against TensorFlow's, the tables against TF's own
reading of the same bytes, the links, and what fills a slab at the peak."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, MANIFEST, REPO, xplane_files
from google.protobuf.descriptor import Descriptor
from helpers.trace import alloc as alloc_event
from helpers.xla import _profile, _program, xla_programs

import traceparse
from traceparse._proto import hlo_pb2
from traceparse.analysis.attribution import PARTS
from traceparse.analysis.xla_live import NO_TF_OP
from traceparse.decode.runs import RunRecords
from traceparse.tables.xla import allocation_kind, made_per_run

XLA_FIXTURES = ["xla_function", "xla_keras"]
# Every fixture that holds XLA programs (the checks against TensorFlow's reading).
ALL_XLA = [*XLA_FIXTURES, "xla_tensorboard", "layers_cnn_xla"]
# Our message -> TensorFlow's (nested messages are compared through their fields).
UPSTREAM = {
    "HloProto": "HloProto",
    "HloModuleProto": "HloModuleProto",
    "HloComputationProto": "HloComputationProto",
    "HloInstructionProto": "HloInstructionProto",
    "HloScheduleProto": "HloScheduleProto",
    "BufferAssignmentProto": "BufferAssignmentProto",
    "LogicalBufferProto": "LogicalBufferProto",
    "BufferAllocationProto": "BufferAllocationProto",
    "HeapSimulatorTrace": "HeapSimulatorTrace",
}
_TF_NAMES = {
    "PRED": "bool",
    "F32": "float32",
    "S32": "int32",
    "BF16": "bfloat16",
    "F16": "float16",
    "S64": "int64",
    "U8": "uint8",
    "F64": "float64",
    "S8": "int8",
    "U32": "uint32",
    "U64": "uint64",
    "U16": "uint16",
    "S16": "int16",
}


@pytest.fixture(scope="module")
def tf_hlo() -> ModuleType:
    return pytest.importorskip("tensorflow.compiler.xla.service.hlo_pb2")


@pytest.fixture(scope="module")
def tf_xplane() -> ModuleType:
    return pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")


def _repeated(field: Any) -> bool:
    """Whether a field is repeated, on protobuf 7 (is_repeated) and before it (label)."""
    if hasattr(field, "is_repeated"):
        return bool(field.is_repeated)
    return bool(field.label == field.LABEL_REPEATED)


def _same_fields(
    ours: Descriptor, theirs: Descriptor, where: str, seen: set[str] | None = None
) -> None:
    seen = set() if seen is None else seen
    if ours.full_name in seen:  # ShapeProto nests itself
        return
    seen.add(ours.full_name)
    for f in ours.fields:
        up = theirs.fields_by_name.get(f.name)
        assert up is not None, f"{where}.{f.name} is not upstream"
        assert (f.number, f.type, _repeated(f)) == (up.number, up.type, _repeated(up)), (
            f"{where}.{f.name}"
        )
        if f.message_type is not None and not f.message_type.GetOptions().map_entry:
            _same_fields(f.message_type, up.message_type, f"{where}.{f.name}", seen)
        if f.enum_type is not None:
            upstream = up.enum_type.values_by_name
            for value in f.enum_type.values:
                # An older TensorFlow's enum lacks the newest types (S2, F4E2M1FN...).
                if value.name in upstream:
                    assert upstream[value.name].number == value.number


def test_hlo_descriptors_match_tensorflow(tf_hlo: ModuleType) -> None:
    assert hlo_pb2.DESCRIPTOR.package == "traceparse.proto"
    for ours, theirs in UPSTREAM.items():
        _same_fields(
            hlo_pb2.DESCRIPTOR.message_types_by_name[ours],
            tf_hlo.DESCRIPTOR.message_types_by_name[theirs],
            ours,
        )


def _tf_programs(path: Path, tf_xplane: ModuleType, tf_hlo: ModuleType) -> dict[str, Any]:
    space = tf_xplane.XSpace.FromString(path.read_bytes())
    found = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        stat_ids = {k for k, m in plane.stat_metadata.items() if m.name == "Hlo Proto"}
        for meta in plane.event_metadata.values():
            for stat in meta.stats:
                if stat.metadata_id in stat_ids and stat.bytes_value:
                    found[meta.name] = tf_hlo.HloProto.FromString(stat.bytes_value)
    return found


def _tf_buffer_rows(hlo: Any, tf_hlo: ModuleType) -> list[tuple[Any, ...]]:
    """(allocation index, offset, size, instruction, dtype, shape) read with TF's protos."""
    xla_data = pytest.importorskip("tensorflow.compiler.xla.xla_data_pb2")
    names = {v.number: v.name for v in xla_data.PrimitiveType.DESCRIPTOR.values}
    insts = {i.id: i for c in hlo.hlo_module.computations for i in c.instructions}
    logical = {b.id: b for b in hlo.buffer_assignment.logical_buffers}
    rows = []
    for alloc in hlo.buffer_assignment.buffer_allocations:
        for a in alloc.assigned:
            at = logical[a.logical_buffer_id].defined_at
            inst = insts[at.instruction_id]
            shape = inst.shape
            for i in at.shape_index:
                shape = shape.tuple_shapes[i]
            name = names[shape.element_type]
            dtype = _TF_NAMES.get(name)
            text = "[" + ",".join(map(str, shape.dimensions)) + "]" if dtype else None
            rows.append((alloc.index, a.offset, a.size, inst.name, dtype, text))
    return rows


@pytest.mark.parametrize("name", [*ALL_XLA, "keras_train", "eager_ops"])
def test_buffers_match_tensorflow_reading(
    name: str, tf_xplane: ModuleType, tf_hlo: ModuleType
) -> None:
    (path,) = xplane_files(name)
    expected = _tf_programs(path, tf_xplane, tf_hlo)
    prof = traceparse.load(path)
    assert sorted(prof.xla_programs["program"]) == sorted(expected)
    if name in ALL_XLA:
        assert expected, "the XLA fixtures hold programs"
    for program, hlo in expected.items():
        ours = prof.xla_buffers[prof.xla_buffers["program"] == program]
        got = [
            tuple(None if pd.isna(v) else v for v in row)
            for row in ours[
                ["allocation_index", "offset", "size_bytes", "instruction", "dtype", "shape"]
            ].itertuples(index=False)
        ]
        assert got == _tf_buffer_rows(hlo, tf_hlo)
        kinds = {a.index: allocation_kind(a) for a in hlo.buffer_assignment.buffer_allocations}
        assert ours["allocation_kind"].astype(str).tolist() == [
            kinds[i] for i in ours["allocation_index"]
        ]
        row = prof.xla_programs.set_index("program").loc[program]
        assert row["temp_bytes"] == sum(
            a.size for a in hlo.buffer_assignment.buffer_allocations if kinds[a.index] == "temp"
        )


def test_load_keeps_tensorflow_out() -> None:
    code = (
        "import sys, traceparse\n"
        f"p = traceparse.load({str(FIXTURES / 'xla_keras')!r})\n"
        "p.xla_buffers, p.attribution, p.live_at_peak(expand_xla=True), p.scopes(2)\n"
        "assert not any(m == 'tensorflow' or m.startswith('tensorflow.') for m in sys.modules)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_load_leaves_programs_unparsed() -> None:
    prof = traceparse.load(FIXTURES / "xla_keras")
    source = prof.traces[0].xla
    assert source is not None and source._programs is None
    assert len(source.data) > 100_000  # the plane's bytes, kept for later


@pytest.mark.parametrize("name", ALL_XLA)
def test_unique_sizes_are_linked(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    allocations = prof.allocations
    runs = prof.traces[0].function_runs
    sizes: dict[int, list[tuple[str, int, str]]] = {}
    for _, program in xla_programs(prof):
        function = prof.xla_programs.set_index("program").loc[program.name, "function"]
        for alloc in program.hlo.buffer_assignment.buffer_allocations:
            if made_per_run(alloc):
                sizes.setdefault(alloc.size, []).append((program.name, alloc.index, function))
    checked = 0
    for row in allocations.itertuples():
        fits = sizes.get(int(row.requested_bytes), [])
        running = runs[(runs.start_ps <= row.alloc_ps) & (row.alloc_ps <= runs.end_ps)]
        seen = [f for f in fits if f[2] == row.op or f[2] in set(running.function)]
        # With no TF op recorded, the size alone links (docs/xla.md).
        fits = seen or (fits if pd.isna(row.op) else [])
        if len(fits) == 1:
            assert (row.xla_program, row.xla_allocation_index) == fits[0][:2]
            checked += 1
        elif not fits:
            assert pd.isna(row.xla_program)
        if pd.notna(row.xla_allocation_index):
            program = xla_programs(prof)[0][1]
            sizes_by_index = {
                a.index: a.size for a in program.hlo.buffer_assignment.buffer_allocations
            }
            assert sizes_by_index[int(row.xla_allocation_index)] == row.requested_bytes
    assert checked >= 2  # every run's temp slab (two profiled batches in xla_tensorboard)
    assert prof.xla_programs["runs"].sum() == allocations["xla_program"].notna().sum()


@pytest.mark.parametrize("name", XLA_FIXTURES)
def test_parts_sum_and_slabs_expand(name: str) -> None:
    prof = traceparse.load(FIXTURES / name)
    att = prof.attribution
    assert (att[PARTS].sum(axis=1) == att["in_use_bytes"]).all()
    assert att["xla_buffer_bytes"].sum() > 0
    live = prof.live_at_peak()
    expanded = prof.live_at_peak(expand_xla=True)
    # Per allocation the expanded rows hold exactly what the allocation holds.
    before = live["allocated_bytes"].groupby(level=0).sum()
    after = expanded.groupby("allocation")["allocated_bytes"].sum()
    pd.testing.assert_series_equal(before.sort_index(), after.sort_index(), check_names=False)
    # Value rows: an HLO buffer of a slab, or an allocation named by the value
    # all its candidate allocations hold (index NA, shape from the module).
    agreed = expanded["xla_program"].notna() & expanded["xla_allocation_index"].isna()
    values = expanded[expanded["xla_buffer"].notna() | (agreed & expanded["dtype"].notna())]
    assert values["allocated_bytes"].sum() == att["xla_buffer_bytes"].sum()
    buffers = expanded[expanded["xla_buffer"].notna()]
    # A buffer row names its TF op where the module gives one, else NO_TF_OP (the
    # elements of a tuple can differ: the key is the instruction, dtype and shape).
    key = ["instruction", "dtype", "shape"]
    table = prof.xla_buffers[[*key, "tf_op"]].astype({"dtype": object, "shape": object})
    joined = buffers.astype({"dtype": object, "shape": object}).merge(
        table.drop_duplicates(key),
        left_on=["xla_buffer", "dtype", "shape"],
        right_on=key,
    )
    assert len(joined) == len(buffers)
    assert (joined["op"].astype(object) == joined["tf_op"].fillna(NO_TF_OP)).all()
    # Bytes at the peak per op still add up to what is live.
    ops = prof.ops
    assert ops["live_at_peak_bytes"].sum() == int(np.sum(live["allocated_bytes"].fillna(0)))


def test_keras_layers_get_their_buffers() -> None:
    prof = traceparse.load(FIXTURES / "xla_keras")
    scopes = prof.scopes(2, as_written=True).set_index("scope")["live_at_peak_bytes"]
    # Keras 3 names ops "<model>_1/<layer>_1/...": as written, depth 2 is the layer.
    for layer in ("conv1", "conv2", "pool"):
        assert scopes.get(f"cnn_1/{layer}_1", 0) > 0, scopes
    manifest_layers = {"conv1", "conv2", "pool", "flatten", "hidden", "logits"}
    names = {
        s.split("/")[1].rsplit("_", 1)[0]
        for s in scopes.index
        if isinstance(s, str) and s.startswith("cnn_1/")
    }
    assert names <= manifest_layers
    # Gradients are named by layer too ("gradient_tape/cnn_1/<layer>_1/..."): the
    # slab's buffers hold them, though at this program's peak only activations
    # are live (docs/xla.md); scopes(3) would put them under their layer.
    temp = prof.xla_buffers[prof.xla_buffers["allocation_kind"] == "temp"]
    grads = temp["tf_op"].dropna()
    grads = grads[grads.str.startswith("gradient_tape/cnn_1/")]
    layers = {op.split("/")[2].rsplit("_", 1)[0] for op in grads}
    assert {"conv1", "conv2", "hidden", "logits"} <= layers <= manifest_layers


@pytest.mark.parametrize(("name", "model"), [("xla_keras", "cnn"), ("layers_cnn_xla", "mycnn")])
def test_depth_one_scopes_of_a_jit_compiled_model_are_its_layers(name: str, model: str) -> None:
    """Issue 13 must-show: scopes(depth=1) gives the model's layers the bytes of their
    activations and gradients, which a linked slab's HLO buffers hold. Checked
    against the expanded rows whose TF op is under ``<model>_N/<layer>_N/``
    (forward or ``gradient_tape/``), matched here with a pattern of our own."""
    prof = traceparse.load(FIXTURES / name)
    scopes = prof.scopes(1)
    by_scope = dict(zip(scopes["scope"].astype(object), scopes["live_at_peak_bytes"], strict=True))
    table = prof.layers().set_index("layer")
    held = table["activation_bytes"] + table["gradient_bytes"]
    held = held[held > 0]
    layers = set(MANIFEST["fixtures"][name]["layers"])
    assert len(held) >= 2 and set(held.index) <= layers
    live = prof.live_at_peak(expand_xla=True)
    ops = live["op"].astype(object).fillna("")
    # Copies of the step's arguments made for a layer's ops are in its scope, and
    # in its other bytes in ``layers``.
    copies = live["op_type"].astype(object) == "XLA_Args"
    for layer, size in held.items():
        under = ops.str.contains(rf"(?:^|/){model}_\d+/{layer}_\d+/", regex=True)
        assert by_scope.get(layer) == int(live.loc[under, "allocated_bytes"].sum()), layer
        assert int(live.loc[under & ~copies, "allocated_bytes"].sum()) == size, layer
    # No scope at depth 1 is the model's own (the model root is dropped).
    assert not any(str(s).startswith(f"{model}_") for s in by_scope)


def test_fused_and_copied_buffers_take_their_origin() -> None:
    prof = traceparse.load(FIXTURES / "xla_keras")
    buffers = prof.xla_buffers
    program = xla_programs(prof)[0][1]
    insts = {i.name: i for c in program.hlo.hlo_module.computations for i in c.instructions}
    recovered = buffers[buffers["tf_op"].notna()]
    for row in recovered.itertuples():
        inst = insts[row.instruction]
        if inst.metadata.op_name:
            assert inst.metadata.op_name == row.tf_op
            assert row.named_by == "hlo metadata"
        elif row.named_by != "consumer":  # tests/test_xla_consumers.py
            assert inst.opcode in ("fusion", "copy", "copy-start", "copy-done", "bitcast")
            assert row.named_by == "fused/copied instruction"
    assert buffers["named_by"].isna().eq(buffers["tf_op"].isna()).all()
    assert (recovered["instruction"].map(lambda n: not insts[n].metadata.op_name)).any()


def test_a_layout_copy_fusion_takes_its_operands_op() -> None:
    """A fusion that only transposes or copies its one operand (XLA's
    transpose_copy_fusion) names the TF op of that operand, read here from the
    HLO proto itself: conv_a's softplus output transposed for conv_b's filter gradient."""
    prof = traceparse.load(FIXTURES / "layers_cnn_xla")
    buffers = prof.xla_buffers.set_index(["program", "instruction"])
    moved = []
    for _, program in xla_programs(prof):
        module = program.hlo.hlo_module
        comps = {c.id: c for c in module.computations}
        insts = {i.id: i for c in module.computations for i in c.instructions}
        for inst in insts.values():
            if inst.opcode != "fusion" or inst.metadata.op_name or len(inst.operand_ids) != 1:
                continue
            fused = comps[inst.called_computation_ids[0]].instructions
            operand = insts[inst.operand_ids[0]]
            if {i.opcode for i in fused} <= {"parameter", "transpose", "copy"} and (
                operand.metadata.op_name
            ):
                key = (program.name, inst.name)
                if key in buffers.index:
                    ops = set(buffers.loc[[key], "tf_op"])
                    assert ops == {operand.metadata.op_name}, (inst.name, ops)
                    moved.append(operand.metadata.op_name)
    assert "mycnn_1/conv_a_1/Softplus" in moved


def test_xla_command_lists_programs_and_buffers(tmp_path: Path) -> None:
    from conftest import run_traceparse

    done = run_traceparse("xla", str(FIXTURES / "xla_function"), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "__inference_dense_stack_15" in done.stdout
    out = tmp_path / "buffers.csv"
    done = run_traceparse(
        "xla", str(FIXTURES / "xla_keras"), "--program", "one_step", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out)
    assert len(table) == len(traceparse.load(FIXTURES / "xla_keras").xla_buffers)
    done = run_traceparse("xla", str(FIXTURES / "xla_keras"), "--program", "nope")
    assert done.returncode != 0 and "nope" in done.stderr


def test_keras_peak_bytes_are_named() -> None:
    """Must show: on the jit-compiled Keras model, tensors plus HLO buffers name
    at least 80% of the bytes requested and live at the peak."""
    prof = traceparse.load(FIXTURES / "xla_keras")
    att = prof.attribution.iloc[0]
    assert att[PARTS].sum() == att["in_use_bytes"]
    named = att["shape_explained_bytes"] + att["xla_buffer_bytes"]
    requested = (
        att["in_use_bytes"]
        - att["padding_bytes"]
        - att["reserved_bytes"]
        - att["before_capture_bytes"]
    )
    assert named >= 0.8 * requested, (named, requested)
    # Counted again from the rows: those with a shape x dtype in the expanded view
    # (a tuple's few bytes of pointers count as buffer bytes but have no dtype).
    expanded = prof.live_at_peak(expand_xla=True)
    shaped = expanded[expanded["dtype"].notna() & expanded["shape"].notna()]
    assert shaped["requested_bytes"].sum() >= 0.8 * requested


def test_agreeing_candidates_name_their_value() -> None:
    """Output twins of allocations 0, 1, 2 (same size) hold the same parameter
    shape x dtype: named by it, index left NA, and checked against the module."""
    prof = traceparse.load(FIXTURES / "xla_keras")
    allocations = prof.allocations
    agreed = allocations[
        allocations["xla_program"].notna() & allocations["xla_allocation_index"].isna()
    ]
    assert len(agreed) >= 2
    assert any("same shape x dtype" in d for d in prof.diagnostics())
    buffers = prof.xla_buffers
    expanded = prof.live_at_peak(expand_xla=True)
    rows = expanded.loc[expanded["allocation"].isin(agreed.index) & expanded["dtype"].notna()]
    assert len(rows) >= 2 and rows["xla_allocation_index"].isna().all()
    for row in rows.itertuples():
        # Each same-sized per-run allocation of that program has an entry
        # parameter of exactly this shape and dtype at offset 0.
        params = buffers[
            (buffers["program"] == row.xla_program)
            & (buffers["allocation_kind"] == "parameter")
            & (buffers["size_bytes"] == row.requested_bytes)
            & (buffers["opcode"] == "parameter")
        ]
        assert len(params) >= 2
        assert set(params["dtype"]) == {row.dtype}
        assert set(params["shape"]) == {row.shape}


def test_summary_and_reports_show_programs_at_the_peak() -> None:
    """summary and report list the programs live at the peak and their largest
    buffers, only for captures with linked programs."""
    import json

    from conftest import run_traceparse

    from traceparse.report import render_html, render_json, render_markdown

    prof = traceparse.load(FIXTURES / "xla_keras")
    programs, buffers = prof.xla_at_peak()
    expanded = prof.live_at_peak(expand_xla=True)
    linked = expanded[expanded["xla_program"].notna()]
    # Bytes per program agree with the expanded rows (and so with the slabs).
    assert programs["allocated_bytes"].sum() == linked["allocated_bytes"].sum()
    assert programs["allocations"].sum() == linked["allocation"].nunique()
    top = buffers.iloc[0]
    assert top["allocated_bytes"] == buffers["allocated_bytes"].max()
    markdown = render_markdown([prof])
    assert "XLA programs holding memory at the peak" in markdown
    assert "Largest XLA buffers live at the peak" in markdown
    assert f"`{top['xla_buffer']}`" in markdown
    assert "Largest XLA buffers live at the peak" in render_html([prof])
    tables = json.loads(render_json([prof]))["profiles"][0]["tables"]
    assert len(tables["xla_buffers"]) == len(buffers)
    assert tables["xla_programs"][0]["allocated_bytes"] == programs["allocated_bytes"].iloc[0]
    done = run_traceparse("summary", str(FIXTURES / "xla_keras"))
    assert done.returncode == 0, done.stderr
    assert "XLA programs holding memory at the peak" in done.stdout
    assert str(top["xla_buffer"]) in done.stdout
    # A capture without programs keeps its report as it was.
    eager = traceparse.load(FIXTURES / "eager_ops")
    assert eager.xla_at_peak()[0].empty
    assert "XLA programs" not in render_markdown([eager])
    assert "xla_programs" not in json.loads(render_json([eager]))["profiles"][0]["tables"]


def test_size_alone_links_only_allocations_with_no_op_inside_a_run() -> None:
    """``fit`` under XLA launches its step with no event on the op line: an
    allocation with no TF op and a program allocation's exact size is linked
    while a run of that program is under way (on another thread here); one
    that a TF op made (an eager tensor of the same size) is not. With no run of
    any program recorded (TensorFlow 2.16 on the CPU), a TF function's program
    is linked by size alone; a JAX program (its allocations have no op) is not."""
    slab = 3 * 1024 * 1024
    module = "a_inference_one_step_on_data_9__.1"
    events = [
        alloc_event(10, 1, slab, op=None, shape=None, dtype=None, allocator="mklcpu"),
        alloc_event(20, 2, slab, op="Fill", allocator="mklcpu"),
        alloc_event(30, 3, slab + 4, op=None, shape=None, dtype=None, allocator="mklcpu"),
    ]
    window = pd.DataFrame(
        {
            "line": [1],
            "start_ps": [5],
            "end_ps": [40],
            "module": pd.Series([module], dtype=object),
            "program_id": pd.array([None], dtype="Int64"),
        }
    )
    cases = (
        (module, window, [1], "while a run of that program was under way"),
        (module, window.iloc[:0], [1], "the capture records no run of any program"),
        ("jit_step.1", window.iloc[:0].assign(module="jit_step.1"), [0], None),
    )
    for name, runs, expected, note in cases:
        program = _program(name, [([512, 512], True)], temp=slab)
        prof = _profile([program], [], {"mklcpu": 0}, events)
        prof.traces[0].runs = RunRecords(runs=runs)
        linked = prof.allocations.set_index("alloc_ps")["xla_allocation_index"]
        if expected == [1]:
            assert linked.loc[10] == 1  # the temp allocation, after the one parameter
            assert any("by their size alone" in n and note in n for n in prof.diagnostics())
        else:
            assert pd.isna(linked.loc[10])
        assert pd.isna(linked.loc[20]) and pd.isna(linked.loc[30])
        assert prof.xla_programs["runs"].tolist() == expected


@pytest.mark.parametrize(
    "name", ["xla_keras", "layers_cnn_xla", "xla_function", "xla_tensorboard", "xla_eager"]
)
def test_without_run_records_tf_programs_are_linked_as_with_them(name: str) -> None:
    # TensorFlow 2.16 records no run of a program on the CPU, and its slabs'
    # events name no op ("(null)"): made so, these 2.21 captures must be linked
    # by size alone as their run records link them, not merely somehow.
    recorded = traceparse.load(FIXTURES / name)
    made = recorded.allocations
    programs_ops = set(made["op"][made["xla_program"].notna()].dropna().astype(str))
    erased = traceparse.load(FIXTURES / name)
    for trace in erased.traces:
        trace.runs = RunRecords()
        trace.function_runs = trace.function_runs.iloc[:0]
        op = trace.events["tf_op"]
        trace.events["tf_op"] = op.where(~op.astype(object).isin(programs_ops))
    columns = ["xla_program", "xla_allocation_index"]
    assert recorded.allocations["xla_program"].notna().sum() > 0
    pd.testing.assert_frame_equal(recorded.allocations[columns], erased.allocations[columns])
    assert any("the capture records no run of any program" in n for n in erased.diagnostics())


@pytest.mark.parametrize("name", ["layers_cnn_xla", "xla_keras"])
def test_an_arguments_copy_takes_the_op_that_reads_it(name: str, tf_hlo: ModuleType) -> None:
    """A copy of an entry argument is named after its first reader with a TF op,
    typed XLA_Args; checked on TensorFlow's own reading of the module: the op is
    one a reader of the buffer's instruction (or its fused root) carries."""
    tf_xplane = pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")
    (path,) = xplane_files(name)
    theirs = _tf_programs(path, tf_xplane, tf_hlo)
    prof = traceparse.load(path)
    buffers = prof.xla_buffers
    copies = buffers[buffers["tf_op_type"] == "XLA_Args"]
    assert len(copies) and not (copies["tf_op"] == "XLA_Args").any()
    for row in copies.itertuples():
        module = theirs[row.program].hlo_module
        comps = {c.id: c for c in module.computations}
        insts = {i.name: (c, i) for c in module.computations for i in c.instructions}
        comp, inst = insts[row.instruction]
        assert inst.opcode != "parameter" and not inst.metadata.op_name.replace("XLA_Args", "")
        readers = [i for i in comp.instructions if inst.id in i.operand_ids]
        names = {i.metadata.op_name for i in readers}
        for reader in readers:
            for called in reader.called_computation_ids:
                names |= {i.metadata.op_name for i in comps[called].instructions}
        assert row.tf_op in names
    # The Dense kernel's layout copy is the layer's, as other bytes, not an activation.
    if name == "layers_cnn_xla":
        kernel = copies[copies["shape"] == "[16384,512]"]
        assert set(kernel["tf_op"]) == {"mycnn_1/dense_1_1/MatMul"}
        dense = prof.layers().set_index("layer").loc["dense_1"]
        assert dense["other_bytes"] >= 16384 * 512 * 4 and dense["activation_bytes"] == 0
