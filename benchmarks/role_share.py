"""Bytes at each allocator's peak by role: how much of a peak traceparse can say the
part of training of (issue 48).

For every capture given (default: every fixture with memory events), per
allocator at its peak, from ``Profile.breakdown``: the bytes of each role
(weight, optimizer state, optimizer update, activation, gradient, other,
unknown), in MiB, and the share of the bytes made during the capture whose
role is other or unknown (``unplaced``).

    python benchmarks/role_share.py [PATH ...]

Run it with an older checkout first on PYTHONPATH to compare versions: roles an
older traceparse lacks show as their own column.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from named_share import rows_over

import traceparse
from traceparse.analysis.breakdown import in_capture

UNPLACED = ("other", "unknown")


def roles(path: Path) -> list[dict[str, object]]:
    """One row per allocator of the capture at ``path``."""
    table = traceparse.load(path).breakdown
    rows = []
    keys = ["host", "allocator"]
    frame = table.astype({"host": object, "allocator": object, "role": object})
    for (_, allocator), mine in frame.groupby(keys, dropna=False, sort=True):
        made = in_capture(mine)
        by_role = mine.groupby("role")["bytes"].sum()
        row: dict[str, object] = {"capture": path.name, "allocator": allocator}
        row |= {str(k): round(int(v) / 2**20, 1) for k, v in by_role.items()}
        total = int(made["bytes"].sum())
        unplaced = int(made.loc[made["role"].isin(UNPLACED), "bytes"].sum())
        row["unplaced"] = f"{100 * unplaced / total:.1f}%" if total else "-"
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    frame = pd.DataFrame(rows_over(args.paths, roles)).fillna(0.0)
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
