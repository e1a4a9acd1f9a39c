"""Two captures of one program at two batch sizes: each request fitted in the batch.

Allocations are matched by (host, allocator, step, op, occurrence of that op
in that step), the op named as ``program_names`` renumbers it and the host as
``same_host`` reads it, and each one's request ``r`` fitted as ``r(N) = a + b
N`` through its two points: exact for a program whose sizes are affine in the
batch. An allocation found in one capture only keeps its one-capture sizing.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import requested_or_held
from traceparse.analysis.predict.batch import FITTED, Sizing
from traceparse.errors import UsageError

_KEY = ["host", "allocator", "step", "op", "occurrence"]
# A name-scope component with a uniquifying suffix: ``alex_net_3``, ``conv2d_13``, ``Relu_1``.
_NUMBERED = re.compile(r"^(.+?)_(\d+)$")


def program_names(ops: pd.Series) -> pd.Series:
    """Op names with every numbered scope component renumbered by its rank among
    the capture's components of the same base name, so that two runs of one
    program name their ops alike.

    Keras numbers a layer's (and a model's) default name by how many objects of
    that class the process has named before (``conv2d``, ``conv2d_1``, ...:
    ``backend.unique_object_name`` in tf.keras / tf_keras, ``auto_name`` +
    ``uniquify`` in keras/src/utils/naming.py), and TensorFlow's
    op names are nested in those scopes (``alex_net_3/conv2d_13/Relu``). A second
    model built in the same process (two runs in one notebook) so gets higher
    numbers for the same layers (``alex_net_5/conv2d_21/Relu``), in the same
    order: the rank of a number among its base's numbers in one capture is the
    layer's position, alike in both. Graph-level uniquifying (``Relu_1``, TF's
    ``Graph.unique_name``) is the same in both runs and keeps its rank too."""
    names = ops.astype(object).fillna("")
    unique = pd.unique(names.to_numpy())
    split: dict[object, list[tuple[str, int]]] = {}
    numbers: dict[str, set[int]] = {}
    for name in unique:  # once per distinct op name, not per event
        parts = []
        for part in str(name).split("/"):
            found = _NUMBERED.match(part)
            base, number = (found.group(1), int(found.group(2))) if found else (part, 0)
            numbers.setdefault(base, set()).add(number)
            parts.append((base, number))
        split[name] = parts
    rank = {base: {n: i for i, n in enumerate(sorted(found))} for base, found in numbers.items()}
    renamed = {
        name: "/".join(f"{b}_{rank[b][n]}" if rank[b][n] else b for b, n in parts)
        for name, parts in split.items()
    }
    return names.map(renamed)


def match_keys(allocations: pd.DataFrame) -> pd.DataFrame:
    """The matching key of every allocation (its row order kept)."""
    keys = pd.DataFrame(
        {
            "host": allocations["host"].astype(object).to_numpy(),
            "allocator": allocations["allocator"].astype(object).to_numpy(),
            "step": allocations["step"].to_numpy(dtype=np.float64, na_value=-1.0),
            "op": program_names(allocations["op"]).to_numpy(),
        }
    )
    keys["occurrence"] = keys.groupby(["host", "allocator", "step", "op"], sort=False).cumcount()
    return keys


def same_host(mine: pd.Series, theirs: pd.Series) -> pd.Series:
    """``theirs`` hosts named as ``mine`` where each capture is of one host: the
    host name is the machine's (``XSpace.hostnames``, the run directory's
    ``<host>.xplane.pb``), and a run of the same program on another machine (a
    fresh Colab VM, another job's node) has another one. With several hosts on
    either side they are matched by name."""
    found, other = pd.unique(mine.to_numpy()), pd.unique(theirs.to_numpy())
    if len(found) == 1 and len(other) == 1:
        return pd.Series(found[0], index=theirs.index, dtype=object)
    return theirs


def fit_two(
    sizing: Sizing,
    base: object,
    base_batch: int,
    other: object,
    other_batch: int,
    requested: np.ndarray,
) -> None:
    """Fit every allocation of ``base`` found in ``other`` (in place)."""
    if other_batch == base_batch:
        raise UsageError(
            f"both captures are at batch {base_batch} (read off their shapes or given), and "
            "a fit needs two batch sizes: give --with a capture at another batch size, or "
            "correct --from-batch / --with-batch"
        )
    mine = match_keys(base.allocations)  # type: ignore[attr-defined]
    mine["row"] = np.arange(len(mine))
    theirs = match_keys(other.allocations)  # type: ignore[attr-defined]
    theirs["host"] = same_host(mine["host"], theirs["host"])
    theirs["other_requested"] = requested_or_held(other.allocations).astype(np.float64)  # type: ignore[attr-defined]
    both = mine.merge(theirs, on=_KEY, how="inner")
    rows = both["row"].to_numpy(dtype=np.int64)
    r1 = requested[rows]
    r2 = both["other_requested"].to_numpy(dtype=np.float64)
    slope = (r2 - r1) / (other_batch - base_batch)
    fixed = r1 - slope * base_batch
    sizing.assign(rows, fixed, slope, fixed, slope, FITTED)
