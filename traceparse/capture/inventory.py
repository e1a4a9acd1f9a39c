"""The variable inventory: which ``tf.Variable`` objects were alive when the profiler ran.

The profiler records only allocations made while it runs; weights and optimizer
state are usually allocated before, so a capture alone cannot name them.
TensorFlow can, while the capture is being made: :func:`take_inventory` lists
every live variable (the Keras models' and optimizers' first, then any other
``tf.Variable`` the garbage collector knows), and :func:`write_inventory` stores
it beside the capture as ``<host>.variables.json``::

    {"format": "traceparse.variables", "version": 1, "tensorflow": "2.21.0",
     "variables": [{"name", "path", "shape", "dtype", "device", "estimated_bytes",
                    "role", "belongs_to", "layer", "model", "at_start", "at_stop"}],
     "memory_info": {"start": {"/device:CPU:0": {"current": .., "peak": ..}},
                     "stop": {...}}}

``role`` is ``weight`` (a Keras model's variable), ``optimizer`` (a Keras
optimizer's slot or state; ``belongs_to`` is the weight's path where the
optimizer keeps the slot per weight) or ``other``. ``at_start`` / ``at_stop``
say in which of the two inventories (profiler start, profiler stop) the
variable was alive: only one alive at the start was allocated before the
capture. ``estimated_bytes`` is shape x dtype (``traceparse.tables.dtypes``).

Like ``capture``, this module imports TensorFlow only inside its functions, and
Keras only when the program has already imported it.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from traceparse.core.sidecars import INVENTORY
from traceparse.decode.variables import FORMAT, VERSION

# The reader's names for the file, so that writer and reader cannot disagree.
from traceparse.tables.dtypes import estimate_bytes

__all__ = [
    "FORMAT",
    "VERSION",
    "Inventory",
    "take_inventory",
    "try_take_inventory",
    "write_inventory",
]


@dataclass
class Inventory:
    """Variables (as JSON-able dicts, keyed by identity) and memory counters."""

    tensorflow: str
    variables: dict[int, dict[str, Any]] = field(default_factory=dict)
    memory_info: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        rows = sorted(
            self.variables.values(),
            key=lambda v: (_ROLE_ORDER.get(v["role"], 9), v["model"] or "", v["path"]),
        )
        return {
            "format": FORMAT,
            "version": VERSION,
            "tensorflow": self.tensorflow,
            "variables": rows,
            "memory_info": self.memory_info,
        }


_ROLE_ORDER = {"weight": 0, "optimizer": 1, "other": 2}
_IDENTITY = ("name", "path", "shape", "dtype", "device")


def take_inventory(
    inventory: Inventory | None, moment: str, models: Sequence[Any] = ()
) -> Inventory:
    """Add the variables alive now to ``inventory`` (a new one when None).

    ``moment`` is ``"start"`` or ``"stop"``: a variable seen now gets
    ``at_<moment> = True``. ``models`` are Keras models to name first; any other
    live Keras model and optimizer is found through the garbage collector.
    """
    import tensorflow as tf

    if inventory is None:
        inventory = Inventory(tensorflow=str(tf.__version__))
    seen: set[int] = set()
    live_models, live_variables = _live_objects(tf)
    for model, optimizers in _keras_owners(models, live_models):
        for weight in _safe_list(model, "variables"):
            _note(inventory, seen, moment, weight, role="weight", model=model.name)
        for optimizer in optimizers:
            slots = _slot_owners(optimizer)
            for var in _safe_list(optimizer, "variables"):
                owner = slots.get(id(var))
                owner_path = None if owner is None else str(getattr(owner, "path", owner.name))
                _note(
                    inventory,
                    seen,
                    moment,
                    var,
                    role="optimizer",
                    model=model.name,
                    belongs_to=owner_path,
                )
    for var in live_variables:
        _note(inventory, seen, moment, var, role="other", model=None)
    inventory.memory_info[moment] = _memory_info(tf)
    return inventory


def try_take_inventory(
    inventory: Inventory | None, moment: str, models: Sequence[Any] = ()
) -> Inventory | None:
    """:func:`take_inventory`, or None and a line on stderr when it fails: the
    capture matters more than the names of its variables."""
    try:
        return take_inventory(inventory, moment, models)
    except Exception as exc:  # a program's object that breaks the walk
        print(
            f"traceparse: the variable inventory failed ({type(exc).__name__}: {exc}); "
            "the capture is kept without it",
            file=sys.stderr,
        )
        return None


def write_inventory(inventory: Inventory, run_dir: str | os.PathLike[str], host: str) -> str:
    """Write the inventory beside ``<run_dir>/<host>.xplane.pb``; return its path."""
    return INVENTORY.write(inventory.to_json(), run_dir, host)


# -- finding variables ---------------------------------------------------------------


def _keras_owners(models: Sequence[Any], live_models: list[Any]) -> list[tuple[Any, list[Any]]]:
    """(model, its optimizers) for the given models, then every other live Keras model.

    Larger models come first, so a model nested in another gives its variables
    to the outer one.
    """
    known = {id(m) for m in models}
    others = [m for m in live_models if id(m) not in known]
    others.sort(key=lambda m: -len(_safe_list(m, "variables")))
    owners = []
    for model in [*models, *others]:
        optimizer = getattr(model, "optimizer", None)
        optimizers = [] if optimizer is None else _unwrap_optimizer(optimizer)
        owners.append((model, optimizers))
    return owners


def _live_objects(tf: Any) -> tuple[list[Any], list[Any]]:
    """Every live Keras model and ``tf.Variable`` the garbage collector tracks, in one pass.

    Resource variables and models are objects with a ``__dict__``, so the
    collector tracks them all. Types are checked once each (a cache by type):
    an isinstance check per object costs seconds in a large program. Keras is
    looked at only if the program imported it. A class that only registers as
    a virtual subclass of ``tf.Variable`` is not found (TensorFlow's own
    variables inherit from it).
    """
    keras = sys.modules.get("keras")
    model_type = getattr(keras, "Model", None) if keras is not None else None
    variable_type = tf.Variable
    kinds: dict[type, int] = {}  # 0 neither, 1 variable, 2 model
    models: list[Any] = []
    variables: list[Any] = []
    for obj in gc.get_objects():
        cls = type(obj)
        kind = kinds.get(cls)
        if kind is None:
            # The MRO, not issubclass: the ABC machinery behind issubclass is
            # slow on first use for each of the thousands of types a program has.
            mro = getattr(cls, "__mro__", ())
            kind = 1 if variable_type in mro else 2 if model_type in mro else 0
            kinds[cls] = kind
        if kind == 1:
            variables.append(obj)
        elif kind == 2:
            models.append(obj)
    return models, variables


def _unwrap_optimizer(optimizer: Any) -> list[Any]:
    """The optimizer and the one it wraps (a LossScaleOptimizer's inner_optimizer)."""
    out = [optimizer]
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is not None and inner is not optimizer:
        out.extend(_unwrap_optimizer(inner))
    return out


def _safe_list(obj: Any, attribute: str) -> list[Any]:
    """``obj.<attribute>`` as a list; empty when it is missing or fails (unbuilt models)."""
    try:
        value = getattr(obj, attribute)
        if callable(value):
            value = value()
        return list(value)
    except Exception:  # an unbuilt model or a half-made optimizer: nothing to list
        return []


def _slot_owners(optimizer: Any) -> dict[int, Any]:
    """id(slot variable) -> the weight it belongs to, as a Keras 3 optimizer keeps them.

    Keras 3 optimizers hold their trainable variables in ``_trainable_variables``
    and each kind of slot as a list in the same order (``_momentums``,
    ``_velocities``, ...); a slot's path is also the weight's path with ``/``
    as ``_`` plus the slot's name (``adam/dense_kernel_momentum``).
    """
    weights = _safe_list(optimizer, "_trainable_variables")
    owners: dict[int, Any] = {}
    if not weights:
        return owners
    for value in vars(optimizer).values():
        if isinstance(value, list) and len(value) == len(weights) and value is not weights:
            for slot, weight in zip(value, weights, strict=True):
                if slot is not None and hasattr(slot, "shape") and hasattr(slot, "path"):
                    owners.setdefault(id(slot), weight)
    prefixes = {str(getattr(w, "path", w.name)).replace("/", "_") + "_": w for w in weights}
    for var in _safe_list(optimizer, "variables"):
        if id(var) in owners:
            continue
        name = str(getattr(var, "name", ""))
        matches = [w for prefix, w in prefixes.items() if name.startswith(prefix)]
        if len(matches) == 1:
            owners[id(var)] = matches[0]
    return owners


def _tf_components(var: Any, tf: Any) -> list[Any]:
    """The TensorFlow variables holding ``var``'s memory: a Keras variable's backing
    ``tf.Variable``; each replica of a distributed variable."""
    inner = getattr(var, "_value", None)
    if inner is not None and isinstance(inner, tf.Variable):
        var = inner
    values = getattr(var, "_values", None)
    if isinstance(values, (list, tuple)) and values and all(hasattr(v, "device") for v in values):
        return list(values)
    return [var]


def _note(
    inventory: Inventory,
    seen: set[int],
    moment: str,
    var: Any,
    *,
    role: str,
    model: str | None,
    belongs_to: str | None = None,
) -> None:
    import tensorflow as tf

    for component in _tf_components(var, tf):
        key = id(component)
        if key in seen:
            continue
        seen.add(key)
        row = _describe(var, component, role=role, model=model, belongs_to=belongs_to)
        # No reference is kept between start and stop (that would keep variables
        # alive): an id seen again is the same variable if it still looks the same.
        earlier = inventory.variables.get(key)
        if earlier is not None and all(earlier[k] == row[k] for k in _IDENTITY):
            earlier[f"at_{moment}"] = True
            if earlier["role"] == "other" and row["role"] != "other":  # named only now
                earlier.update({k: row[k] for k in ("role", "belongs_to", "layer", "model")})
            continue
        if earlier is not None:  # the id was reused by another variable
            inventory.variables[-len(inventory.variables) - 1] = earlier
        row[f"at_{moment}"] = True
        inventory.variables[key] = row


def _describe(
    var: Any, component: Any, *, role: str, model: str | None, belongs_to: str | None
) -> dict[str, Any]:
    name = str(getattr(var, "name", "") or getattr(component, "name", ""))
    path = getattr(var, "path", None)
    if not isinstance(path, str) or not path:
        path = name.removesuffix(":0")
    shape = [int(d) if d is not None else None for d in tuple(component.shape)]
    dtype = getattr(component.dtype, "name", str(component.dtype))
    estimate = estimate_bytes((shape, dtype))
    if role == "optimizer" and belongs_to is not None:
        layer = belongs_to.rsplit("/", 1)[0] if "/" in belongs_to else None
    elif role == "weight":
        layer = path.rsplit("/", 1)[0] if "/" in path else None
    else:
        layer = None
    return {
        "name": name,
        "path": path,
        "shape": shape,
        "dtype": dtype,
        "device": str(getattr(component, "device", "") or ""),
        "estimated_bytes": estimate.bytes,
        "role": role,
        "belongs_to": belongs_to,
        "layer": layer,
        "model": model,
        "at_start": False,
        "at_stop": False,
    }


def _memory_info(tf: Any) -> dict[str, dict[str, int]]:
    """``tf.config.experimental.get_memory_info`` for each local device that reports it."""
    out: dict[str, dict[str, int]] = {}
    try:
        devices = tf.config.list_logical_devices()
    except Exception:  # no runtime yet
        return out
    for device in devices:
        if device.device_type not in ("CPU", "GPU", "TPU"):
            continue
        try:
            info = tf.config.experimental.get_memory_info(device.name)
        except (ValueError, tf.errors.OpError):  # this device's allocator keeps no stats
            continue
        out[device.name] = {"current": int(info["current"]), "peak": int(info["peak"])}
    return out
