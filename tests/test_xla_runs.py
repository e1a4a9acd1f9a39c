"""Linking allocations to XLA programs through run records, on XSpaces built here:
PJRT execute windows with a module marker, programs that never ran, outputs
named by the value the program left in them, Python frames as sources."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import traceparse
from traceparse._proto import hlo_pb2, xplane_pb2
from traceparse.tables.sources import user_frame

MiB = 1 << 20


def _program(module: str, out_dims: list[int], op_name: str, source: str) -> bytes:
    """A program whose entry returns one float32 ``out_dims`` value (a fusion)
    in its own output allocation, and reads one parameter of the same size."""
    hlo = hlo_pb2.HloProto()
    mod = hlo.hlo_module
    mod.name = module
    mod.entry_computation_id = 1
    entry = mod.computations.add(name="main", id=1, root_id=11)
    param = entry.instructions.add(name="x.1", opcode="parameter", parameter_number=0, id=10)
    param.shape.element_type = 11
    param.shape.dimensions.extend(out_dims)
    fusion = entry.instructions.add(name="loop_sine_fusion", opcode="fusion", id=11)
    fusion.shape.element_type = 11
    fusion.shape.dimensions.extend(out_dims)
    fusion.operand_ids.append(10)
    fusion.metadata.op_name = op_name
    fusion.metadata.source_file, line = source.split(":")
    fusion.metadata.source_line = int(line)
    size = int(np.prod(out_dims)) * 4
    assignment = hlo.buffer_assignment
    assignment.logical_buffers.add(id=0, size=size).defined_at.instruction_id = 10
    assignment.logical_buffers.add(id=1, size=size).defined_at.instruction_id = 11
    alloc = assignment.buffer_allocations.add(
        index=0, size=size, is_entry_computation_parameter=True, parameter_number=0
    )
    alloc.assigned.add(logical_buffer_id=0, offset=0, size=size)
    out = assignment.buffer_allocations.add(index=1, size=size, maybe_live_out=True)
    out.assigned.add(logical_buffer_id=1, offset=0, size=size)
    return hlo.SerializeToString()


class _Plane:
    """Builds one XPlane, interning event and stat names."""

    def __init__(self, plane: xplane_pb2.XPlane) -> None:
        self.plane = plane
        self.events: dict[str, int] = {}
        self.stats: dict[str, int] = {}

    def event_id(self, name: str) -> int:
        if name not in self.events:
            self.events[name] = len(self.events) + 1
            self.plane.event_metadata[self.events[name]].name = name
            self.plane.event_metadata[self.events[name]].id = self.events[name]
        return self.events[name]

    def stat_id(self, name: str) -> int:
        if name not in self.stats:
            self.stats[name] = len(self.stats) + 1
            self.plane.stat_metadata[self.stats[name]].name = name
            self.plane.stat_metadata[self.stats[name]].id = self.stats[name]
        return self.stats[name]

    def event(
        self, line: xplane_pb2.XLine, name: str, start: int, duration: int, **stats: object
    ) -> None:
        event = line.events.add(
            metadata_id=self.event_id(name), offset_ps=start, duration_ps=duration
        )
        for key, value in stats.items():
            stat = event.stats.add(metadata_id=self.stat_id(key))
            if isinstance(value, str):
                stat.ref_value = self.stat_id(value)
            elif isinstance(value, float):
                stat.double_value = value
            else:
                stat.int64_value = int(value)  # type: ignore[call-overload]


def _capture(
    tmp_path: Path,
    programs: dict[str, bytes],
    runs: list[tuple[str, int]],
    tensorflow: bool = False,
) -> Path:
    """A capture where each (module, program id) of ``runs`` is executed once on
    the python line (PJRT's windows, ``GpuExecutable::ExecuteThunks`` naming
    the module) and allocates one 4 MiB output in it, freed at the end; plus a
    4 MiB allocation with no run around it at the end. With ``tensorflow`` the
    run is TF autoclustering's instead: a ``cluster_0/xla_run:_XlaRun`` op event
    around the allocation and an HLO op event with ``hlo_module`` and
    ``program_id`` in it."""
    space = xplane_pb2.XSpace()
    meta = _Plane(space.planes.add(id=0, name="/host:metadata"))
    for name, data in programs.items():
        meta.plane.event_metadata[meta.event_id(name)].stats.add(
            metadata_id=meta.stat_id("Hlo Proto"), bytes_value=data
        )
    host = _Plane(space.planes.add(id=1, name="/host:CPU"))
    python = host.plane.lines.add(id=1, name="python", timestamp_ns=0)
    launches = host.plane.lines.add(id=2, name="Host Threads/2", timestamp_ns=0)
    in_use = 0
    t = 1_000_000
    size = 4 * MiB

    def memory(name: str, when: int, address: int) -> None:
        host.event(
            python,
            name,
            when,
            0,
            allocator_name="GPU_0_bfc",
            addr=address,
            requested_bytes=size,
            allocation_bytes=size,
            bytes_allocated=in_use,
            bytes_reserved=0,
            bytes_available=1 << 34,
            peak_bytes_in_use=in_use,
        )

    host.event(python, "$train.py:12 step", 0, 10**9)
    for i, (module, pid) in enumerate(runs):
        fn = module.removeprefix("jit_")
        if tensorflow:
            host.event(python, "cluster_0/xla_run:_XlaRun", t + 1000, 80_000)
            in_use += size
            memory("MemoryAllocation", t + 2000, 0x1000 * (i + 1))
            host.event(python, "fusion.3", t + 3000, 5000, hlo_module=module, program_id=pid)
        else:
            host.event(python, f"PjitFunction({fn})", t, 90_000)
            host.event(
                python, "PjRtStreamExecutorLoadedExecutable::ExecuteHelper", t + 1000, 80_000
            )
            in_use += size
            memory("MemoryAllocation", t + 2000, 0x1000 * (i + 1))
            host.event(python, "GpuExecutable::ExecuteThunks", t + 3000, 50_000, module_name=module)
            host.event(
                launches, "hipModuleLaunchKernel", t + 4000, 1000, hlo_module=module, program_id=pid
            )
        t += 100_000
    in_use += size
    memory("MemoryAllocation", t, 0xF000)  # no run covers it
    for i in range(len(runs) + 1):
        in_use -= size
        memory(
            "MemoryDeallocation",
            t + 10_000 * (i + 1),
            0x1000 * (i + 1) if i < len(runs) else 0xF000,
        )
    env = space.planes.add(id=2, name="Task Environment")
    _Plane(env).stat_id("profile_start_time")
    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / "host0.xplane.pb").write_bytes(space.SerializeToString())
    return tmp_path


def _linked(prof: traceparse.Profile) -> list[str | None]:
    """Each allocation's program, in time order (None: not linked)."""
    column = prof.allocations.sort_values("alloc_ps")["xla_program"].astype(object)
    return [None if pd.isna(v) else str(v) for v in column]


SIN = _program("jit_sin", [1024, 1024], "jit(sin)/sin", "/work/model.py:7")
COS = _program("jit_cos", [1024, 1024], "jit(cos)/cos", "/work/model.py:8")


def test_a_program_that_never_ran_gets_no_allocation(tmp_path: Path) -> None:
    """Two programs whose outputs have the same size; only jit_sin runs. Its
    allocation goes to it (the run covers it on its thread); jit_cos, which
    never ran, gets nothing, and neither does the allocation outside any run."""
    prof = traceparse.load(
        _capture(tmp_path, {"jit_sin(3)": SIN, "jit_cos(5)": COS}, [("jit_sin", 3)])
    )
    assert _linked(prof) == ["jit_sin(3)", None]
    assert prof.allocations.sort_values("alloc_ps")["xla_allocation_index"].tolist()[0] == 1
    runs = dict(zip(prof.xla_programs["program"], prof.xla_programs["runs"], strict=True))
    assert runs == {"jit_sin(3)": 1, "jit_cos(5)": 0}
    assert any("no run of that program covers them" in note for note in prof.diagnostics())


def test_same_module_twice_is_told_apart_by_program_id(tmp_path: Path) -> None:
    """Two compilations of one function (``jit_sin(3)`` and ``jit_sin(9)``): the
    kernel launches' ``program_id`` during the window says which one ran."""
    other = _program("jit_sin", [1024, 1024], "jit(sin)/sin", "/work/model.py:9")
    path = _capture(
        tmp_path, {"jit_sin(3)": SIN, "jit_sin(9)": other}, [("jit_sin", 9), ("jit_sin", 3)]
    )
    prof = traceparse.load(path)
    assert _linked(prof) == ["jit_sin(9)", "jit_sin(3)", None]


def test_an_output_is_named_by_the_value_left_in_it(tmp_path: Path) -> None:
    prof = traceparse.load(
        _capture(tmp_path, {"jit_sin(3)": SIN, "jit_cos(5)": COS}, [("jit_sin", 3), ("jit_cos", 5)])
    )
    _ = prof.allocations
    links = prof._xla.links
    assert links is not None
    held = links.held()
    rows = prof.allocations.reset_index(drop=True)
    by_program = {rows.loc[row, "xla_program"]: value for row, value in held.items()}
    assert by_program["jit_sin(3)"] == ("float32", "[1024,1024]", 4 * MiB, "jit(sin)/sin", None)
    assert by_program["jit_cos(5)"][3] == "jit(cos)/cos"
    # Each linked row knows when its run ended (for "live after its run").
    assert len(links.ends) == 2


def test_allocations_carry_their_source(tmp_path: Path) -> None:
    """The Python frames around an allocation on its thread give its source; a
    linked output's value has the HLO source line of its instruction."""
    prof = traceparse.load(_capture(tmp_path, {"jit_sin(3)": SIN}, [("jit_sin", 3)]))
    rows = prof.allocations.sort_values("alloc_ps")
    assert isinstance(rows["source"].dtype, pd.CategoricalDtype)
    assert rows["source"].astype(object).tolist() == ["train.py:12 step"] * 2
    links = prof._xla.links
    assert links is not None
    assert list(links.sources().values()) == ["/work/model.py:7"]


def test_the_users_frame_is_picked() -> None:
    lib = "/usr/lib/python3.11/site-packages/jax/_src/numpy/ufunc_api.py:176 __call__"
    stdlib = "/usr/lib/python3.11/functools.py:12 wrapper"
    assert user_frame(["/home/me/train.py:3 main", "/home/me/model.py:9 step", lib, stdlib]) == (
        "/home/me/model.py:9 step"
    )
    assert user_frame([lib, stdlib]) is None
    assert user_frame(["builtins len", "<unknown> get"]) is None
    # Base names only (JAX): the outermost located frame, the user's call.
    assert (
        user_frame(["run.py:20 f", "array_methods.py:599 op", "builtins isinstance"])
        == "run.py:20 f"
    )


def test_jax_arguments_sent_in_a_call_take_the_parameters_value() -> None:
    """In jax08_elementwise ``x + 1.0``-style calls send a Python scalar: a 4-byte
    ``DevicePut`` inside ``PjitFunction(add)`` before its run, on the GPU and on
    the pinned host allocator. It is named by the parameter of the program that
    call runs (a float32 or int32 scalar) and is not counted as a run's allocation."""
    from conftest import FIXTURES

    prof = traceparse.load(FIXTURES / "jax08_elementwise")
    rows = prof.allocations.reset_index(drop=True)
    links = prof._xla.links
    assert links is not None and links.arguments
    held = links.held(list(links.arguments))
    for row in links.arguments:
        assert pd.isna(rows.loc[row, "xla_program"])
        assert held[row][1:3] == ("[]", 4) and held[row][0] in ("float32", "int32")
    allocators = {str(rows.loc[row, "allocator"]) for row in links.arguments}
    assert allocators == {"GPU_0_bfc", "xla_gpu_host_bfc"}


def test_tensorflow_autoclustering_runs_link_their_allocations(tmp_path: Path) -> None:
    """A TF ``_XlaRun`` op runs a cluster's program: its HLO op events name the
    module and program id, so the allocation inside is that program's."""
    module = "cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_0"
    other = "cluster_1__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_0"
    programs = {
        f"{module}.7(4)": _program(module + ".7", [1024, 1024], "mul", "ops.py:1"),
        f"{other}.9(6)": _program(other + ".9", [1024, 1024], "add", "ops.py:2"),
    }
    prof = traceparse.load(_capture(tmp_path, programs, [(module + ".7", 4)], tensorflow=True))
    assert _linked(prof) == [f"{module}.7(4)", None]
