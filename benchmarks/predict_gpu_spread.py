"""Why the real GPU peaks of one model at one batch size differ run to run (issue 47).

Reads the development set's public GPU captures (``benchmarks/predict_protocol.py``
``DEV_GPU``; never the held-out test set) and splits each run's peak (the
allocator's in-use bytes at its maximum, xprof's rule) into what decides it:

- **held before**: bytes in use when the capture started (the variables and
  optimizer slots of this model, and whatever earlier work in the process still
  holds: in a notebook, every earlier model a Python name still refers to). The
  model's Keras name says how many of its class the process built before it:
  Keras names the k-th instance ``<class>_k``
  (keras/engine/base_layer.py ``_init_set_name`` -> ``backend.unique_object_name``).
- **requested at the peak**: the bytes the live tensors and scratch asked for.
- **slack at the peak**: chunk bytes beyond the rounded requests: TF's GPU BFC
  allocator hands out a best-fitting free chunk whole when it is under twice the
  request (tensorflow/core/common_runtime/bfc_allocator.cc, ``FindChunkPtr``:
  split only when ``chunk_size >= 2 * rounded_bytes`` or the remainder is at
  least ``kMaxInternalFragmentation``, 128 MiB), so the slack depends on which
  free chunks the process's history left, not on the step.
- **workspace at the peak**: the cuDNN workspace of the op at the peak (a
  rank-1 ``uint8`` request), and whether every run at this batch size asked for
  the same workspaces: TF's autotuner times the candidate algorithms once per
  shape and keeps the fastest (``AutotuneConv``, tensorflow/core/kernels/
  conv_ops_gpu.cc), so a workspace differs between runs only when timing picks
  another algorithm.

    python benchmarks/predict_gpu_spread.py [--out FILE.md]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from predict_protocol import DEV_GPU, GPU_ALLOCATOR, fixture_runs, load  # noqa: E402

from traceparse.analysis.liveness import held_bytes, requested_or_held  # noqa: E402
from traceparse.analysis.predict.replay import live_at, rounded  # noqa: E402

MIB = 2**20
_KNOWN_MODELS = ("alex_net", "model")


def model_index(ops: pd.Series) -> str:
    """The model's Keras name as the ops' scopes show it, and how many earlier
    instances of its class that name implies."""
    for name in _KNOWN_MODELS:
        found = ops.dropna().astype(str).str.extract(rf"(?:^|/){name}(?:_(\d+))?/", expand=False)
        seen = ops.dropna().astype(str).str.contains(rf"(?:^|/){name}(?:_\d+)?/")
        if seen.any():
            k = found[seen].dropna()
            index = int(k.iloc[0]) if len(k) else 0
            return f"`{name}{'_' + str(index) if index else ''}` ({index} earlier)"
    return "-"


def _scratch(a: pd.DataFrame) -> np.ndarray:
    shape = a["shape"].astype(object).astype(str)
    return (shape.str.fullmatch(r"\[\d+\]") & a["dtype"].astype(str).eq("uint8")).to_numpy()


def run_row(path: Path) -> dict[str, object]:
    prof = load(path)
    a, t = prof.allocations, prof.timeline
    rows = t[t["allocator"].astype(str) == GPU_ALLOCATOR]
    first = rows.iloc[0]
    before = int(first["in_use_bytes"]) - (
        0 if pd.isna(first["delta_bytes"]) else int(first["delta_bytes"])
    )
    values = rows["in_use_bytes"].to_numpy(dtype=np.float64)
    event = int(rows.index[int(np.argmax(values))])
    mine = (a["allocator"].astype(str) == GPU_ALLOCATOR).to_numpy()
    live = mine & live_at(a, prof._ends, event)
    held = held_bytes(a)[live].astype(np.float64)
    asked = requested_or_held(a)[live].astype(np.float64)
    scratch = _scratch(a) & live
    slack = float((held - rounded(asked)).sum())
    op = str(t["op"].iloc[event])
    return {
        "run": path.parent.name,
        "model": model_index(a["op"]),
        "peak": float(values.max()),
        "before": before,
        "requested": float(rounded(asked).sum()),
        "slack": slack,
        "workspace": float(requested_or_held(a)[scratch].sum()),
        "op": re.sub(r"^gradient_tape/[^/]+/", "", op),
        "workspaces": tuple(sorted(requested_or_held(a)[_scratch(a) & mine].tolist())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "PREDICT_GPU_SPREAD.md")
    args = parser.parse_args(argv)
    lines = [
        "# Why the real GPU peaks differ run to run (development set)",
        "",
        "Made by `python benchmarks/predict_gpu_spread.py` (its docstring names each "
        "mechanism). Per run of the development set's public GPU captures: the peak "
        "(GPU_0_bfc in use) = held before the capture + rounded requests live at the "
        "peak + their chunks' slack. Workspaces: the cuDNN workspace live at the peak; "
        "same as run 1: whether the run asked for the same multiset of workspace sizes "
        "over its step as the first run at this batch size.",
        "",
        "| model | batch | run | Keras name | peak (MiB) | held before | requested at peak "
        "| slack at peak | workspace at peak | peak op | workspaces same as run 1 |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | :---: |",
    ]
    for group, sizes in DEV_GPU.items():
        for batch, name in sorted(sizes.items()):
            found = [run_row(p) for p in fixture_runs(name)]
            for r in found:
                same = "yes" if r["workspaces"] == found[0]["workspaces"] else "no"
                lines.append(
                    f"| {group} | {batch} | `{r['run']}` | {r['model']} "
                    f"| {r['peak'] / MIB:.1f} | {r['before'] / MIB:.1f} "  # type: ignore[operator]
                    f"| {r['requested'] / MIB:.1f} | {r['slack'] / MIB:.1f} "  # type: ignore[operator]
                    f"| {r['workspace'] / MIB:.1f} | `{r['op']}` | {same} |"  # type: ignore[operator]
                )
    lines.append("")
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines))
    tmp.replace(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
