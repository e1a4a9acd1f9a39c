"""Crafted XLA programs for the hostile-input tests: a fixture capture whose
``Hlo Proto`` stats are edited in the test, and a bounded run of the CLI on it
(as docs/robustness.md promises: within 30 s of CPU time and 4 GB of address
space, exit 0 or 3, at most one line per problem on stderr)."""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from conftest import FIXTURES, REPO, xplane_files

from traceparse._proto import hlo_pb2, xplane_pb2

# CPU seconds: a busy machine stretches wall time, not the work a command does
# (each command here takes 1 to 2 s of CPU, so the bound holds at 5x slower).
TIME_BOUND = 30
# Wall-clock seconds, only against a hang that uses no CPU (a run waits its
# turn for a core on a loaded machine: 2 cores under a load of 5 is 3x slower).
WAIT_S = 300
MEMORY_BOUND = 4 * 2**30
RUN = "plugins/profile/2026_01_01_00_00_00"
# The commands each crafted capture goes through: the peak, the layers, and the
# report (which reads every table: ops, scopes, attribution, diagnostics).
COMMANDS = (["summary"], ["layers"], ["report", "--format", "md"])

Edit = Callable[[hlo_pb2.HloProto, xplane_pb2.XEventMetadata], None]


def craft(tmp_path: Path, edit: Edit, fixture: str = "xla_keras", name: str = "crafted") -> Path:
    """A copy of ``fixture``'s capture with every program passed through ``edit``
    (the HloProto and the event metadata that holds it); returns the capture file."""
    space = xplane_pb2.XSpace.FromString(xplane_files(FIXTURES / fixture)[0].read_bytes())
    edited = 0
    for plane in space.planes:
        ids = {k for k, m in plane.stat_metadata.items() if m.name == "Hlo Proto"}
        for meta in list(plane.event_metadata.values()):
            for stat in meta.stats:
                if stat.metadata_id in ids and stat.WhichOneof("value") == "bytes_value":
                    hlo = hlo_pb2.HloProto.FromString(stat.bytes_value)
                    edit(hlo, meta)
                    stat.bytes_value = hlo.SerializeToString()
                    edited += 1
    assert edited
    target = tmp_path / name / RUN / "localhost.xplane.pb"
    target.parent.mkdir(parents=True)
    target.write_bytes(space.SerializeToString())
    return target


def temp_slab(hlo: hlo_pb2.HloProto) -> hlo_pb2.BufferAllocationProto:
    """The program's largest temp allocation (the slab the runtime links)."""
    temps = [
        a
        for a in hlo.buffer_assignment.buffer_allocations
        if not (a.is_entry_computation_parameter or a.is_constant or a.is_thread_local)
        and not a.maybe_live_out
    ]
    return max(temps, key=lambda a: a.size)


def entry(hlo: hlo_pb2.HloProto) -> hlo_pb2.HloComputationProto:
    module = hlo.hlo_module
    return next(c for c in module.computations if c.id == module.entry_computation_id)


def defining(hlo: hlo_pb2.HloProto, alloc: hlo_pb2.BufferAllocationProto) -> int:
    """The instruction id defining the largest buffer of ``alloc``."""
    logical = {b.id: b for b in hlo.buffer_assignment.logical_buffers}
    largest = max(alloc.assigned, key=lambda a: a.size)
    return int(logical[largest.logical_buffer_id].defined_at.instruction_id)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BOUND, MEMORY_BOUND))
    # Past TIME_BOUND CPU seconds the kernel ends the process (SIGXCPU): the
    # exit code is then negative and the test fails.
    resource.setrlimit(resource.RLIMIT_CPU, (TIME_BOUND, TIME_BOUND + 1))


def run_bounded(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``traceparse --quiet ARGS`` in a process with 4 GB of address space and
    ``TIME_BOUND`` seconds of CPU time (a hang past ``WAIT_S`` wall-clock seconds
    raises subprocess.TimeoutExpired, which fails the test)."""
    return subprocess.run(
        [sys.executable, "-m", "traceparse", "--quiet", *args],
        cwd=cwd,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        preexec_fn=_limits,
    )


def check_commands(capture: Path, max_stderr_lines: int = 4) -> list[str]:
    """Runs COMMANDS on ``capture``; each ends in time with exit 0 or 3 and short
    stderr lines. Returns the stdout of each."""
    outputs = []
    for command in COMMANDS:
        done = run_bounded([*command, str(capture)], capture.parent)
        assert done.returncode in (0, 3), (command, done.returncode, done.stderr[-2000:])
        lines = done.stderr.splitlines()
        assert len(lines) <= max_stderr_lines, (command, lines[:10])
        assert all(len(line) < 2000 for line in lines), (command, [x[:200] for x in lines])
        # No raw warnings (numpy's overflow warning is two lines) or tracebacks.
        assert "Warning" not in done.stderr and "Traceback" not in done.stderr, done.stderr
        outputs.append(done.stdout)
    return outputs
