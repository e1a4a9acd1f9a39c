"""How much of each peak traceparse can name: the project's measure of success.

For every capture given (default: every fixture with memory events), per
allocator at its peak, from ``Profile.attribution``:

- named: bytes tied to a tensor, HLO buffer or variable by shape x dtype
  (``shape_explained_bytes + xla_buffer_bytes + variable_bytes +
  xla_parameter_bytes``);
- of in-use: named / ``in_use_bytes`` (everything the allocator holds);
- of requested-live: (tensors + HLO buffers) / the bytes requested and live at
  the peak that were allocated inside the capture (in use minus padding, XLA
  slack, reserved bytes and every part from before the capture), the figure
  issue 13 sets at 80% or more on a jit-compiled Keras model;
- before named: (variables + XLA parameters) / all bytes from before the
  capture, the figure issue 14 sets at 80% or more with an inventory.

    python benchmarks/named_share.py [PATH ...]

To compare with an older version, run this file with that version's checkout
first on PYTHONPATH (e.g. a ``git worktree`` of it), giving the paths of the
fixtures to read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

import traceparse
from traceparse.errors import TraceparseError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BEFORE = ["variable_bytes", "xla_parameter_bytes", "before_capture_bytes"]


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def shares(path: Path) -> list[dict[str, object]]:
    """One row per allocator of the capture at ``path``."""
    table = traceparse.load(path).attribution
    rows = []
    for row in table.itertuples(index=False):
        # Parts an older traceparse lacks count as 0, so versions can be compared.
        parts = dict.fromkeys([*BEFORE, "xla_buffer_bytes", "xla_slack_bytes"], 0)
        # A part not measured (NA) names nothing.
        parts |= {
            k: 0 if pd.isna(v) else int(v) for k, v in row._asdict().items() if k.endswith("_bytes")
        }
        inside = parts["shape_explained_bytes"] + parts["xla_buffer_bytes"]
        before = sum(parts[k] for k in BEFORE)
        named = inside + parts["variable_bytes"] + parts["xla_parameter_bytes"]
        requested_live = (
            parts["in_use_bytes"]
            - parts["padding_bytes"]
            - parts["xla_slack_bytes"]
            - parts["reserved_bytes"]
            - before
        )
        rows.append(
            {
                "capture": path.name,
                "allocator": row.allocator,
                "in_use_MiB": round(parts["in_use_bytes"] / 2**20, 1),
                "named_MiB": round(named / 2**20, 1),
                "of_in_use": _share(named, parts["in_use_bytes"]),
                "of_requested_live": _share(inside, requested_live),
                "before_named": _share(before - parts["before_capture_bytes"], before),
            }
        )
    return rows


def rows_over(
    paths: list[Path], per_capture: Callable[[Path], list[dict[str, object]]]
) -> list[dict[str, object]]:
    """``per_capture``'s rows for each path (every fixture when none is given),
    skipping with a line on stderr what is not a capture with memory events."""
    rows: list[dict[str, object]] = []
    for path in paths or sorted(d for d in FIXTURES.iterdir() if d.is_dir()):
        try:
            rows.extend(per_capture(path))
        except TraceparseError as exc:  # no memory events, not a capture...
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    frame = pd.DataFrame(rows_over(args.paths, shares))
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
