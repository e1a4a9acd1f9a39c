"""Read a variable inventory (``<host>.variables.json``) without TensorFlow.

``traceparse.profile()``, ``traceparse run`` and ``traceparse.keras.MemoryCallback``
write the file beside the capture (``traceparse.inventory`` describes its
format). The reader turns it into one row per variable. A file that cannot be
used is not a reason to refuse the capture: the reader says what is wrong in a
diagnostic and the capture loads without an inventory.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from traceparse.decode.limits import MAX_BYTES

FORMAT = "traceparse.variables"
VERSION = 1
ROLES = ("weight", "optimizer", "other")

# One row per variable, as read (Profile.variables adds host and allocator).
INVENTORY_COLUMNS: dict[str, str] = {
    "device": "category",
    "name": "object",
    "path": "object",
    "role": "category",
    "belongs_to": "object",
    "layer": "object",
    "model": "category",
    "dtype": "category",
    "shape": "object",
    "estimated_bytes": "Int64",
    "at_start": "bool",
    "at_stop": "bool",
}

# A model's variable list: a large Keras model has a few thousand variables
# with its optimizer's slots. More than this is damaged or made up, and every
# variable costs time in the analyses (about 0.3 ms each), so such a file is
# ignored with a diagnostic before any row is built. The file's size has its
# own limit (core.sidecars.INVENTORY.limit).
MAX_INVENTORY_VARIABLES = 25_000
# How much of a bad value a diagnostic quotes.
_QUOTE = 40

_DEVICE = re.compile(r"/device:([A-Za-z_]+):(\d+)$")


@dataclass
class VariableInventory:
    """The variables alive while the capture was made, and the devices' memory counters."""

    path: str
    tensorflow: str | None
    variables: pd.DataFrame
    # moment ("start", "stop") -> device -> {"current": bytes, "peak": bytes}
    memory_info: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


class InventoryProblem(ValueError):
    """The file is not a usable inventory; the message says why."""


def short_device(device: str) -> str:
    """``/job:localhost/replica:0/task:0/device:CPU:0`` -> ``/device:CPU:0`` (the host
    column says which machine); a device name in another form is kept."""
    found = _DEVICE.search(device)
    return f"/device:{found.group(1).upper()}:{found.group(2)}" if found else device


def decode_inventory(data: bytes, path: str) -> VariableInventory:
    """Parse the file's bytes; ``InventoryProblem`` when they are not an inventory."""
    try:
        document = json.loads(data)
    except RecursionError as exc:
        raise InventoryProblem("nested too deeply to be an inventory") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise InventoryProblem(f"not JSON ({quote(str(exc), 80)})") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise InventoryProblem(f'its "format" is not "{FORMAT}"')
    if document.get("version") != VERSION:
        raise InventoryProblem(
            f"version {quote(document.get('version'))}; this traceparse reads version {VERSION}"
        )
    rows = document.get("variables")
    if not isinstance(rows, list):
        raise InventoryProblem('"variables" is not a list')
    if len(rows) > MAX_INVENTORY_VARIABLES:
        raise InventoryProblem(
            f"it lists {len(rows):,} variables, more than the {MAX_INVENTORY_VARIABLES:,} "
            "traceparse reads (a model has a few thousand)"
        )
    records = [_record(row, i) for i, row in enumerate(rows)]
    # Each size is at most MAX_BYTES; so is their total, so no sum of them wraps.
    total = sum(r["estimated_bytes"] or 0 for r in records)
    if total > MAX_BYTES:
        raise InventoryProblem(
            f"its variables add up to {total:,} bytes, more than the "
            f"{MAX_BYTES // 2**40} TiB any device holds"
        )
    frame = pd.DataFrame(
        {
            column: pd.Series([r[column] for r in records], dtype=dtype)
            for column, dtype in INVENTORY_COLUMNS.items()
        }
    )
    version = document.get("tensorflow")
    return VariableInventory(
        path=path,
        tensorflow=version if isinstance(version, str) else None,
        variables=frame,
        memory_info=_memory_info(document.get("memory_info")),
    )


def quote(value: Any, width: int = _QUOTE) -> str:
    """``repr(value)`` cut to ``width`` characters, for a diagnostic about a bad value.

    A crafted file can put megabytes in one field; the sentence stays short."""
    if isinstance(value, (list, dict)):
        text = f"a {type(value).__name__} of {len(value):,}"
    else:
        text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _record(row: Any, index: int) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise InventoryProblem(f"variable {index} is not an object")
    role = row.get("role")
    if role not in ROLES:
        raise InventoryProblem(f"variable {index} has role {quote(role)}, not one of {ROLES}")
    shape = row.get("shape")
    if not isinstance(shape, list) or not all(d is None or _is_size(d) for d in shape):
        raise InventoryProblem(f"variable {index} has shape {quote(shape)}, not a list of sizes")
    size = row.get("estimated_bytes")
    if size is not None and not (_is_size(size) and size <= MAX_BYTES):
        raise InventoryProblem(
            f"variable {index} has estimated_bytes {quote(size)}, not a size from 0 to "
            f"{MAX_BYTES // 2**40} TiB"
        )
    text = {key: _text(row.get(key)) for key in ("name", "path", "belongs_to", "layer", "model")}
    device = _text(row.get("device")) or ""
    return {
        **text,
        "device": short_device(device),
        "role": role,
        "dtype": _text(row.get("dtype")),
        # The profiler's spelling of a shape, as in the allocations table.
        "shape": "[" + ",".join("?" if d is None else str(d) for d in shape) + "]",
        "estimated_bytes": size,
        # Files without these flags name variables alive throughout.
        "at_start": bool(row.get("at_start", True)),
        "at_stop": bool(row.get("at_stop", True)),
    }


def _text(value: Any) -> str | None:
    # A lone surrogate (json.dumps' spelling of a name from a non-UTF-8 path, PEP 383)
    # becomes its backslash escape: no UTF-8 writer (pyarrow, a page) can encode it.
    if not isinstance(value, str):
        return None
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _memory_info(value: Any) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    if not isinstance(value, dict):
        return out
    for moment, devices in value.items():
        if not isinstance(devices, dict):
            continue
        out[str(moment)] = {
            short_device(str(device)): {
                k: int(v)
                for k, v in counters.items()
                # Counters outside what a device holds are dropped, not summed.
                if _is_size(v) and v <= MAX_BYTES and k in ("current", "peak")
            }
            for device, counters in devices.items()
            if isinstance(counters, dict)
        }
    return out
