"""JAX captures (public MI300X traces, JAX 0.8, fixtures/jax08_*): read like
TensorFlow's, peaks agree with xprof, and the bytes at each peak are named."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from conftest import FIXTURES, REPO
from test_analysis_xprof import our_key, xprof_profile, xprof_rows
from test_analysis_xprof import test_peak_and_breakdown_agree_with_xprof as agree_with_xprof
from test_xla import test_buffers_match_tensorflow_reading as buffers_match
from test_xla import tf_hlo, tf_xplane  # noqa: F401 (fixtures)

import traceparse
from traceparse._proto import xplane_pb2

JAX_FIXTURES = ["jax08_attention", "jax08_conv", "jax08_elementwise", "jax08_gemm"]
JAX_FILES = sorted(f for n in JAX_FIXTURES for f in (FIXTURES / n).rglob("*.xplane.pb"))


@pytest.mark.parametrize(
    "path", [p for p in JAX_FILES if "attention" not in str(p)], ids=lambda p: p.parts[-5]
)
def test_jax_peaks_agree_with_xprof(path: Path) -> None:
    """As on every TensorFlow capture: peak bytes, capacity and the rows live there."""
    agree_with_xprof(path)


def test_xprof_orders_events_by_their_offset_in_their_line() -> None:
    """jax08_attention: xprof agrees on the peak (bytes, instant) but lists one
    more allocation live there, a 4-byte argument buffer. Its free is on the
    ``py_xla_callback`` line, which starts 821 us after the ``python`` line that
    allocated it: xprof orders a plane's memory events by ``offset_ps`` alone,
    not counting each line's ``timestamp_ns``, so it applies that free before
    the allocation, cannot pair it, and keeps the buffer live. On the capture's
    clock it was freed 249 us before the peak: traceparse's peak is right."""
    (path,) = [p for p in JAX_FILES if "attention" in str(p)]
    prof = traceparse.load(path)
    per = xprof_profile(path)["memoryProfilePerAllocator"]["GPU_0_bfc"]
    peak = prof.peak.set_index("allocator").loc["GPU_0_bfc"]
    assert peak["in_use_bytes"] == int(per["profileSummary"]["peakStats"]["peakBytesInUse"])
    listed, _ = xprof_rows(per)
    ours = Counter(our_key(row) for _, row in prof.live_at_peak("GPU_0_bfc").iterrows())
    assert listed - ours == Counter({("", "", 0, "", 4, 256): 1})
    # The event times as xprof sees them: each line's offsets, without its start.
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    (plane,) = [p for p in space.planes if p.name == "/host:CPU"]
    names = {k: m.name for k, m in plane.event_metadata.items()}
    addr = next(k for k, m in plane.stat_metadata.items() if m.name == "addr")
    seen: dict[int, list[tuple[str, int, int]]] = {}
    for line in plane.lines:
        for event in line.events:
            name = names[event.metadata_id]
            address = [
                s.uint64_value or s.int64_value for s in event.stats if s.metadata_id == addr
            ]
            if name.startswith("Memory") and address:
                absolute = line.timestamp_ns * 1000 + event.offset_ps
                seen.setdefault(address[0], []).append((name, absolute, event.offset_ps))
    allocations = prof.allocations
    at_peak = int(peak["time_ps"])
    swapped = []
    for row in allocations[(allocations["allocator"] == "GPU_0_bfc")].itertuples():
        if pd.isna(row.free_ps) or not row.free_ps < at_peak:
            continue
        events = {
            kind: offset
            for kind, t, offset in seen[int(row.address) % 2**64]
            if t in (row.alloc_ps, row.free_ps)
        }
        later = allocations[
            (allocations["address"] == row.address)
            & (allocations["alloc_ps"] > row.alloc_ps)
            & (allocations["alloc_ps"] < at_peak)
        ]
        # Freed later on the clock but earlier by offset, and the address not
        # taken again before the peak (xprof keys live allocations by address).
        if events["MemoryDeallocation"] < events["MemoryAllocation"] and later.empty:
            swapped.append(int(row.requested_bytes))
    assert swapped == [4]


@pytest.mark.parametrize("name", JAX_FIXTURES)
def test_bytes_at_each_gpu_peak_are_named(name: str) -> None:
    """At least 90% of the bytes requested, live at each GPU allocator's peak and
    allocated inside the capture are named by a shape x dtype."""
    table = traceparse.load(FIXTURES / name).attribution
    gpu = table[table["allocator"].astype(str).str.startswith("GPU_")]
    assert not gpu.empty
    for row in gpu.itertuples(index=False):
        named = row.shape_explained_bytes + row.xla_buffer_bytes
        # A part not measured (NA) names nothing.
        optional = (row.variable_bytes, row.xla_parameter_bytes)
        before = sum(0 if pd.isna(v) else v for v in optional) + row.before_capture_bytes
        live = (
            row.in_use_bytes - row.padding_bytes - row.xla_slack_bytes - row.reserved_bytes - before
        )
        assert named >= 0.9 * live, (row.allocator, named, live)


def test_programs_are_named_by_their_function_and_ops_by_jax_paths() -> None:
    prof = traceparse.load(FIXTURES / "jax08_elementwise")
    programs = prof.xla_programs
    assert set(programs["module"]) >= {"jit_add", "jit_sin", "jit_cos", "jit_multiply"}
    ran = programs[programs["runs"] > 0]
    assert set(ran["module"]) >= {"jit_add", "jit_sin", "jit_cos", "jit_multiply"}
    buffers = prof.xla_buffers
    ops = set(buffers["tf_op"].dropna())
    assert {"jit(add)/add", "jit(sin)/sin"} <= ops
    # Each linked output is the program's own: the module the run names.
    linked = prof.allocations.dropna(subset=["xla_program"])
    assert len(linked) >= 4
    assert linked["source"].notna().all()
    assert (linked["source"].astype(str).str.startswith("generate_elementwise_trace.py:")).all()


def test_conv_outputs_are_named_by_their_values() -> None:
    """The 3-D convolution's two 545 MiB outputs hold the values its root returns."""
    prof = traceparse.load(FIXTURES / "jax08_conv")
    rows = prof.allocations.reset_index(drop=True)
    links = prof._xla.links
    assert links is not None
    held = links.held()
    conv = [
        value
        for row, value in held.items()
        if str(rows.loc[row, "xla_program"]).startswith("jit_forward_3d_conv")
    ]
    assert conv and all(pd.notna(v[0]) and v[1].startswith("[") for v in conv)


@pytest.mark.parametrize("name", [*JAX_FIXTURES, "xla_eager"])
def test_jax_buffers_match_tensorflow_reading(
    name: str,
    tf_xplane: ModuleType,  # noqa: F811
    tf_hlo: ModuleType,  # noqa: F811
) -> None:
    buffers_match(name, tf_xplane, tf_hlo)


def test_reading_a_jax_capture_keeps_tensorflow_out() -> None:
    code = (
        "import sys, traceparse\n"
        f"p = traceparse.load({str(FIXTURES / 'jax08_elementwise')!r})\n"
        "p.xla_buffers, p.attribution, p.live_at_peak(expand_xla=True), p.allocations\n"
        "assert not any(m == 'tensorflow' or m.startswith('tensorflow.') for m in sys.modules)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_compiled_output_read_by_eager_ops_is_named() -> None:
    """xla_eager: the jit_compile function's 4 MiB output, live at the peak while
    eager ops read it, is linked by its run and named float32 [1024,1024]."""
    prof = traceparse.load(FIXTURES / "xla_eager")
    live = prof.live_at_peak()
    output = live[live["xla_program"].notna()]
    assert len(output) == 1
    links = prof._xla.links
    assert links is not None
    held = links.held()
    (row,) = [r for r in held if prof.allocations.index[r] == output.index[0]]
    assert held[row][:3] == ("float32", "[1024,1024]", 4 * 1024 * 1024)
    part = prof.attribution.iloc[0]
    assert part["xla_buffer_bytes"] == 4 * 1024 * 1024
