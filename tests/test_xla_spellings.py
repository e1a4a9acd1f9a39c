"""Program runs recognised however the XLA runtime spells them (issue 41, 3).

The JAX fixtures (JAX 0.8 on MI300X GPUs) are rewritten into the spellings
other versions write, event by event, keeping their allocations and programs:

- ``xla_gpu_module``: an older JAX, as in a public 8-GPU capture (issue 41):
  ``PjRtStreamExecutorLoadedExecutable::ExecuteHelper`` around a child
  ``<module>:XLA GPU module`` (the TraceMe of XLA's
  ``xla/service/gpu/gpu_executable.cc``, in every XLA version), and no
  ``hlo_module``, ``module_name`` or ``program_id`` stat on any host event;
- ``execute_named``: the window names the module itself,
  ``CommonPjRtLoadedExecutable::Execute (<module>)`` (the PJRT C API dispatch
  stack of newer JAX, as a public JAX GPU trace-analysis script lists it), with
  no child naming it;
- ``program_id``: ``GpuExecutable::ExecuteThunks`` carrying only a
  ``program_id`` stat (XLA's ``XlaModule:#hlo_module=...,program_id=...#``
  annotation split, the id alone), no module name on the allocating thread;
- ``unrecognised``: nothing on the host names a program: no run can be
  found, and ``diagnostics`` says how many bytes that leaves unnamed.

Each recognised spelling links the allocations as the original capture does,
finds runs of the programs, and names at least 90% of the bytes requested at
each GPU allocator's peak.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse._proto import xplane_pb2

JAX = ["jax08_attention", "jax08_conv", "jax08_elementwise", "jax08_gemm"]
_NAMING_STATS = {"hlo_module", "module_name", "program_id"}
_GPU_MODULE = re.compile(r"^(.+):XLA GPU module$")
_HELPER = "PjRtStreamExecutorLoadedExecutable::ExecuteHelper"
_THUNKS = "GpuExecutable::ExecuteThunks"


def _event_id(plane: xplane_pb2.XPlane, name: str) -> int:
    for key, meta in plane.event_metadata.items():
        if meta.name == name:
            return key
    key = max([0, *plane.event_metadata]) + 1
    plane.event_metadata[key].id = key
    plane.event_metadata[key].name = name
    return key


def _stat_id(plane: xplane_pb2.XPlane, name: str) -> int:
    for key, meta in plane.stat_metadata.items():
        if meta.name == name:
            return key
    key = max([0, *plane.stat_metadata]) + 1
    plane.stat_metadata[key].id = key
    plane.stat_metadata[key].name = name
    return key


def _text(plane: xplane_pb2.XPlane, stat: xplane_pb2.XStat) -> str:
    kind = stat.WhichOneof("value")
    return plane.stat_metadata[stat.ref_value].name if kind == "ref_value" else stat.str_value


def _launch_ids(space: xplane_pb2.XSpace) -> list[tuple[int, str, int]]:
    """(start ps, module, program id) of every host event with ``hlo_module`` and
    ``program_id`` stats (the kernel launches), in time order."""
    found = []
    for plane in space.planes:
        if plane.name != "/host:CPU":  # device planes keep another clock
            continue
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                stats = {names.get(s.metadata_id): s for s in event.stats}
                if "hlo_module" in stats and "program_id" in stats:
                    start = line.timestamp_ns * 1000 + event.offset_ps
                    module = _text(plane, stats["hlo_module"])
                    found.append((start, module, stats["program_id"].int64_value))
    return sorted(found)


def _respell_line(
    plane: xplane_pb2.XPlane,
    line: xplane_pb2.XLine,
    how: str,
    launches: list[tuple[int, str, int]],
) -> None:
    names = {k: m.name for k, m in plane.event_metadata.items()}
    naming = {k for k, m in plane.stat_metadata.items() if m.name in _NAMING_STATS}
    events = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
    kept: list[xplane_pb2.XEvent] = []
    helper: xplane_pb2.XEvent | None = None
    for event in events:
        name = names.get(event.metadata_id, "")
        ran = [_text(plane, s) for s in event.stats if s.metadata_id in naming]
        stats = [s for s in event.stats if s.metadata_id not in naming]
        del event.stats[:]
        event.stats.extend(stats)
        module = _GPU_MODULE.match(name)
        if name == "MemoryAllocation" and how == "xla_gpu_module":
            # As that JAX's allocator events read: an op, named "(null)".
            event.stats.add(metadata_id=_stat_id(plane, "tf_op"), str_value="(null)")
        if name == _HELPER:
            helper = event
        if name == _THUNKS and how == "program_id":
            # The id the runtime ran: its launches' during the window (as the
            # original capture's runs are told apart).
            around = helper if helper is not None else event
            start = line.timestamp_ns * 1000 + around.offset_ps
            end = start + around.duration_ps
            during = [p for t, m, p in launches if start <= t <= end and m in ran]
            event.stats.add(metadata_id=_stat_id(plane, "program_id"), int64_value=during[0])
        elif name == _THUNKS:
            continue
        elif module and how != "xla_gpu_module":
            if how == "execute_named" and helper is not None:
                helper.metadata_id = _event_id(
                    plane, f"CommonPjRtLoadedExecutable::Execute ({module.group(1)})"
                )
            continue
        kept.append(event)
    del line.events[:]
    line.events.extend(kept)


def respell(fixture: str, how: str, out: Path) -> Path:
    """``fixture`` with the events of its allocating threads (the lines with
    ``MemoryAllocation`` events) written the ``how`` way (module docstring);
    the kernel launches' lines keep their ``hlo_module`` and ``program_id``
    (XLA's annotation writes them), except when ``unrecognised``."""
    source = next((FIXTURES / fixture).rglob("*.xplane.pb"))
    space = xplane_pb2.XSpace()
    space.ParseFromString(source.read_bytes())
    launches = _launch_ids(space)
    for plane in space.planes:
        if not plane.name.startswith("/host:") or plane.name == "/host:metadata":
            continue
        allocation = _event_id(plane, "MemoryAllocation")
        for line in plane.lines:
            if how == "unrecognised" or any(e.metadata_id == allocation for e in line.events):
                _respell_line(plane, line, how, launches)
    run = out / f"{fixture}_{how}" / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / source.name).write_bytes(space.SerializeToString())
    return out / f"{fixture}_{how}"


def _requested_named(prof: traceparse.Profile) -> dict[str, float]:
    """Per GPU allocator at its peak: the share of the bytes requested and live
    (allocated inside the capture) that tensors and HLO buffers name, as
    ``benchmarks/named_share.py`` counts it."""
    found = {}
    for row in prof.attribution.itertuples(index=False):
        parts = {k: 0 if pd.isna(v) else int(v) for k, v in row._asdict().items() if "_bytes" in k}
        parts.setdefault("xla_buffer_bytes", 0)
        before = sum(
            parts.get(k, 0)
            for k in ("variable_bytes", "xla_parameter_bytes", "before_capture_bytes")
        )
        live = (
            parts["in_use_bytes"]
            - parts["padding_bytes"]
            - parts.get("xla_slack_bytes", 0)
            - parts["reserved_bytes"]
            - before
        )
        if str(row.allocator).startswith("GPU_") and live > 0:
            found[str(row.allocator)] = (
                parts["shape_explained_bytes"] + parts["xla_buffer_bytes"]
            ) / live
    return found


def _linked(prof: traceparse.Profile) -> list[object]:
    return (
        prof.allocations["xla_program"]
        .astype(object)
        .where(prof.allocations["xla_program"].notna(), None)
        .tolist()
    )


@pytest.mark.parametrize("fixture", JAX)
@pytest.mark.parametrize("how", ["xla_gpu_module", "execute_named", "program_id"])
def test_every_spelling_finds_the_runs(tmp_path: Path, fixture: str, how: str) -> None:
    original = traceparse.load(FIXTURES / fixture)
    prof = traceparse.load(respell(fixture, how, tmp_path))
    assert _linked(prof) == _linked(original)
    ran = prof.xla_programs[prof.xla_programs["runs"] > 0]["program"].tolist()
    assert (
        ran and ran == original.xla_programs[original.xla_programs["runs"] > 0]["program"].tolist()
    )
    shares = _requested_named(prof)
    assert shares and all(share >= 0.9 for share in shares.values()), shares


def test_unrecognised_runs_are_said_with_the_bytes_they_leave(tmp_path: Path) -> None:
    prof = traceparse.load(respell("jax08_conv", "unrecognised", tmp_path))
    assert prof.allocations["xla_program"].notna().sum() == 0
    notes = [n for n in prof.diagnostics() if "no run of any program" in n]
    assert len(notes) == 1, prof.diagnostics()
    found = re.search(r"^(\d+) allocator events \(([\d,]+) bytes requested\)", notes[0])
    assert found, notes[0]
    # The bytes the runs link in the capture as recorded are among them.
    original = traceparse.load(FIXTURES / "jax08_conv").allocations
    linked = original[original["xla_program"].notna()]
    assert int(found.group(1)) >= len(linked) > 0
    assert int(found.group(2).replace(",", "")) >= int(linked["requested_bytes"].sum())


def test_a_run_id_leads_to_the_program_on_another_thread(tmp_path: Path) -> None:
    """A window with no marker of its own and no flow, whose ``run_id`` an event on
    another thread shares, and that event's name names the program: the
    allocation in the window is that program's. A program that never ran
    (same output size) gets nothing."""
    from test_xla_runs import COS, SIN, _Plane

    space = xplane_pb2.XSpace()
    meta = _Plane(space.planes.add(id=0, name="/host:metadata"))
    for name, data in {"jit_sin(3)": SIN, "jit_cos(5)": COS}.items():
        meta.plane.event_metadata[meta.event_id(name)].stats.add(
            metadata_id=meta.stat_id("Hlo Proto"), bytes_value=data
        )
    host = _Plane(space.planes.add(id=1, name="/host:CPU"))
    python = host.plane.lines.add(id=1, name="python", timestamp_ns=0)
    worker = host.plane.lines.add(id=2, name="tpu_execute/7", timestamp_ns=0)
    size = 4 << 20
    host.event(python, "TpuLoadedExecutable::Execute", 1000, 80_000, run_id=42)
    host.event(worker, "jit_sin:XLA TPU module", 5000, 50_000, run_id=42)
    for when, name, in_use in ((2000, "MemoryAllocation", size), (90_000, "MemoryDeallocation", 0)):
        host.event(
            python,
            name,
            when,
            0,
            allocator_name="TPU_0_bfc",
            addr=0x1000,
            requested_bytes=size,
            allocation_bytes=size,
            bytes_allocated=in_use,
            bytes_reserved=0,
            bytes_available=1 << 34,
            peak_bytes_in_use=size,
        )
    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / "host0.xplane.pb").write_bytes(space.SerializeToString())
    prof = traceparse.load(tmp_path)
    assert prof.allocations["xla_program"].astype(object).tolist() == ["jit_sin(3)"]
    runs = dict(zip(prof.xla_programs["program"], prof.xla_programs["runs"], strict=True))
    assert runs == {"jit_sin(3)": 1, "jit_cos(5)": 0}
