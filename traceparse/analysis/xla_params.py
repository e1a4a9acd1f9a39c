"""Which bytes allocated before the capture XLA programs read as parameters.

Without a variable inventory, the parameters of the programs that ran during
the capture are the one record of buffers that existed before it: a compiled
step reads its weights and optimizer slots as entry parameters. A parameter
is counted (``counted``; otherwise ``reason`` says why not) when

- its program ran during the capture (``ran``: allocator events linked to it,
  its TF function on the op line, or its module named by an event);
- its allocator is known: the one its program's linked allocations are on,
  else the host's only allocator;
- on a CPU allocator it is at least 256 KiB (smaller requests are never
  recorded, so they are not in the allocator's counter either);
- no allocation made during the capture on that allocator may be it: none
  has its size, except allocations linked to another program allocation
  (a linked output twin of the parameter, an input batch copied in, a
  variable made inside the capture all rule it out).

Parameters hold no identity across programs, so the same buffer passed to
two programs (or to one program run many times) would count twice if summed.
Per (host, allocator) the bytes are therefore, for each (dtype, shape, size),
the largest number of counted parameters of that kind in any one program,
times the size: a program's distinct parameters are distinct buffers, and
what two programs share is counted once. ``attribution`` caps the total at
the bytes allocated before the capture and live at the peak.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
import pandas as pd

from traceparse.tables.contracts import XLA_PARAMETERS
from traceparse.tables.variables import CPU_ALLOCATORS, CPU_POOL_BYTES

NOT_RUN = "did not run during the capture"
NO_ALLOCATOR = "allocator unknown"
SMALL = "under the allocator's recording threshold"
MADE_INSIDE = "an allocation of its size was made during the capture"


def judged_parameters(
    parameters: pd.DataFrame,
    ran: Set[tuple[str, str]],
    allocations: pd.DataFrame,
    allocators: Set[tuple[str, str]],
) -> pd.DataFrame:
    """``parameters`` (``tables.xla_params``) with ``allocator``, ``ran``,
    ``counted`` and ``reason``. ``allocators``: the (host, allocator) pairs
    with a peak."""
    out = parameters.copy()
    keys = list(zip(out["host"].astype(object), out["program"].astype(object), strict=True))
    out["ran"] = np.array([k in ran for k in keys], dtype=bool)
    where = _program_allocators(allocations, allocators, keys)
    out["allocator"] = pd.Series(where, index=out.index, dtype=object)
    sizes = out["size_bytes"].to_numpy(dtype=np.int64, na_value=-1)
    made = _made_inside(allocations, sizes)
    reasons: list[str | None] = []
    for row, (host, program) in enumerate(keys):
        allocator = out["allocator"].iat[row]
        size = out["size_bytes"].iat[row]
        index = int(out["allocation_index"].iat[row])
        if not out["ran"].iat[row]:
            reasons.append(NOT_RUN)
        elif allocator is None:
            reasons.append(NO_ALLOCATOR)
        elif allocator in CPU_ALLOCATORS and int(size) < CPU_POOL_BYTES:
            reasons.append(SMALL)
        elif _may_be(made.get((host, allocator, int(size)), []), program, index):
            reasons.append(MADE_INSIDE)
        else:
            reasons.append(None)
    out["reason"] = pd.Series(reasons, index=out.index, dtype=object)
    out["counted"] = out["reason"].isna().to_numpy(dtype=bool)
    return out[list(XLA_PARAMETERS.columns)]


def representatives(judged: pd.DataFrame) -> pd.DataFrame:
    """The counted parameters that stand for distinct buffers: per (host, allocator,
    dtype, shape, size), the rows of the one program that reads the most of that
    kind (ties: the first program by name). Other programs' rows of that kind may
    be the same buffers, so they are left out (the module docstring)."""
    mine = judged[judged["counted"].to_numpy(dtype=bool)]
    if mine.empty:
        return mine
    keys = pd.DataFrame(
        {
            "host": mine["host"].astype(object),
            "allocator": mine["allocator"].astype(object),
            "dtype": mine["dtype"].astype(object).fillna(""),
            "shape": mine["shape"].astype(object).fillna(""),
            "size": mine["size_bytes"].astype("int64"),
            "program": mine["program"].astype(object),
        },
        index=mine.index,
    )
    kind = ["host", "allocator", "dtype", "shape", "size"]
    counts = keys.groupby([*kind, "program"], sort=True).size().rename("n").reset_index()
    counts = counts.sort_values(["n", "program"], ascending=[False, True], kind="stable")
    chosen = counts.drop_duplicates(kind)[[*kind, "program"]]
    picked = set(chosen.itertuples(index=False, name=None))
    keep = [row in picked for row in keys[[*kind, "program"]].itertuples(index=False, name=None)]
    return mine[np.array(keep, dtype=bool)]


def _program_allocators(
    allocations: pd.DataFrame, allocators: Set[tuple[str, str]], keys: list[tuple[str, str]]
) -> list[str | None]:
    """Per (host, program) key: its allocator, the one its linked allocations are
    on, else the host's only allocator with a peak (None when neither is one)."""
    by_host: dict[str, set[str]] = {}
    for host, allocator in allocators:
        by_host.setdefault(host, set()).add(allocator)
    linked = allocations[allocations["xla_program"].notna().to_numpy(dtype=bool)]
    seen: dict[tuple[str, str], set[str]] = {}
    columns = [linked[c].astype(object).tolist() for c in ("host", "xla_program", "allocator")]
    for host, program, allocator in zip(*columns, strict=True):
        seen.setdefault((host, program), set()).add(allocator)
    out: list[str | None] = []
    for host, program in keys:
        names = seen.get((host, program)) or by_host.get(host, set())
        out.append(next(iter(names)) if len(names) == 1 else None)
    return out


Linked = list[tuple[object, object]]


def _made_inside(
    allocations: pd.DataFrame, sizes: np.ndarray
) -> dict[tuple[str, str, int], Linked]:
    """(host, allocator, requested bytes) -> the (program, index) each allocation of
    one of ``sizes`` made during the capture is linked to (None, None when it is not)."""
    out: dict[tuple[str, str, int], Linked] = {}
    requested = allocations["requested_bytes"].to_numpy(dtype=np.int64, na_value=-1)
    allocations = allocations[np.isin(requested, sizes[sizes >= 0])]
    requested = allocations["requested_bytes"].to_numpy(dtype=np.int64, na_value=-1)
    columns = [allocations[c].astype(object).tolist() for c in ("host", "allocator")]
    program = allocations["xla_program"].astype(object).tolist()
    index = allocations["xla_allocation_index"].astype(object).tolist()
    for row, size in enumerate(requested.tolist()):
        if size < 0:
            continue
        p = program[row] if isinstance(program[row], str) else None
        i = None if index[row] is pd.NA or index[row] is None else int(index[row])
        out.setdefault((columns[0][row], columns[1][row], size), []).append((p, i))
    return out


def _may_be(made: Linked, program: str, index: int) -> bool:
    """Whether any of these allocations may hold the parameter: all but those
    linked to a definite other allocation."""
    return any(p is None or i is None or (p, i) == (program, index) for p, i in made)
