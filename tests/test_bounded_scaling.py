"""Long JAX captures and one-shape inventories run every command within the bounds
of ``bounded.py`` (issue 37, 3 and 4), as do the crafted run records of
``test_run_records.py``. Built at test time by the benchmarks' own builders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bounded import check_bounds, every_command, run_bounded
from conftest import REPO
from test_run_records import ATTENTION, _encode, _field, _find, _space

from traceparse._proto import xplane_pb2

sys.path.insert(0, str(REPO / "benchmarks"))
from make_inventory_capture import write_capture as inventory_capture
from make_long_jax import write_capture as jax_capture


def _crafted(out: Path) -> list[Path]:
    """jax08_attention with num_occurrences after an execute window's offset, and with
    a non-UTF-8 string on its kernel launches' line."""
    found = []
    space = _space()
    window = _find(space, "python", "PjRtStreamExecutorLoadedExecutable::ExecuteHelper")
    launch = _find(space, "Host Threads/2356", "hipModuleLaunchKernel")
    bad = xplane_pb2.XStat(metadata_id=9999).SerializeToString() + _field(5, b"\xff\xfe")
    tails = {
        "oneof": {window: xplane_pb2.XEvent(num_occurrences=3).SerializeToString()},
        "utf8": {launch: _field(4, bad)},
    }
    for name, tail in tails.items():
        run = out / name / "plugins" / "profile" / "run1"
        run.mkdir(parents=True)
        (run / ATTENTION.name).write_bytes(_encode(space, tail))
        found.append(out / name)
    return found


@pytest.mark.slow
def test_long_captures_and_large_inventories_are_bounded(tmp_path: Path) -> None:
    paths = [
        jax_capture(tmp_path, 32),  # 32 copies of the steps: 3.6 MB
        inventory_capture(tmp_path, 10_000),  # 10,000 variables and allocations of one shape
        *_crafted(tmp_path),
    ]
    results = run_bounded(every_command(paths, tmp_path), tmp_path)
    check_bounds(results, problems=2)
    layers = [r for r in results if r.argv[:1] == ["peak"]]
    assert len(layers) == len(paths) and all(r.code == 0 for r in layers)
