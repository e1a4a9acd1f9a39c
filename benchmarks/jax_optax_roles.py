"""Issue 48's JAX check: the roles of a jitted optax training step's bytes at the
program's own peak, as traceparse reads them (``Profile.xla_program_roles``,
``traceparse xla PATH --program jit_train_step --roles``; docs/xla.md).

JAX on CPU records no allocator events at all (its CPU client allocates with
plain aligned malloc, no BFC allocator; ``--events`` counts them), so there is
no measured peak: the step's memory is what XLA assigned it.

    python benchmarks/jax_optax_roles.py [CAPTURE_DIR] [--events]

The capture: ``fixtures/jax_optax_cpu`` by default, made by
``benchmarks/make_jax_optax.py`` (run it with a Python that has JAX).
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from pathlib import Path

import traceparse
from traceparse._proto import xplane_pb2

DEFAULT = Path(__file__).resolve().parent.parent / "fixtures" / "jax_optax_cpu"


def memory_events(root: Path) -> Counter[str]:
    """Allocator events per name over every plane of every capture under ``root``."""
    found: Counter[str] = Counter()
    for path in root.rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace.FromString(path.read_bytes())
        for plane in space.planes:
            for line in plane.lines:
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    if name in ("MemoryAllocation", "MemoryDeallocation"):
                        found[name] += 1
    return found


def main(argv: list[str]) -> int:
    paths = [a for a in argv if not a.startswith("--")]
    root = Path(paths[0]) if paths else DEFAULT
    if "--events" in argv:
        print("allocator events:", dict(memory_events(root)) or "none")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        profile = traceparse.load(root)
    names = profile.xla_programs["program"].astype(str)
    (program,) = names[names.str.startswith("jit_train_step")]
    table = profile.xla_program_roles(program)
    by_role = table.groupby("role")["size_bytes"].sum().sort_values(ascending=False)
    total = int(by_role.sum())
    for role, size in by_role.items():
        print(f"{role:18} {size / 2**20:8.2f} MiB")
    unplaced = int(by_role.drop(["other", "unknown"], errors="ignore").sum())
    print(f"other or unknown: {100 * (total - unplaced) / total:.1f}% of {total / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
