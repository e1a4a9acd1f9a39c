"""What the source recorder reads from a function graph (``capture/sources.py``):
which functions a node calls, and which forward op a gradient op differentiates.

Operates on TensorFlow ``Operation`` objects it is given; imports nothing of
TensorFlow itself.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["GRADIENT_SCOPES", "GRAD_FUNCTION", "callees", "forward_ops"]

_CALL_ATTRS = ("f", "then_branch", "else_branch", "body", "cond", "branches")

GRADIENT_SCOPES = ("gradient_tape/", "gradients/")
GRAD_FUNCTION = re.compile(r"^_([A-Z][A-Za-z0-9]*?)Grad")


def forward_ops(operations: list[Any], grad_types: dict[str, str]) -> dict[str, str]:
    """Gradient op name -> its forward op's name, within one graph.

    TensorFlow puts a gradient op under ``gradient_tape/<the forward op's
    scope>/``; the forward op is the op of the type its gradient function names
    in that scope, and where several are, the one whose tensors the gradient op
    reads."""
    by_scope: dict[tuple[str, str], list[Any]] = {}
    for op in operations:
        scope = op.name.rsplit("/", 1)[0] if "/" in op.name else ""
        by_scope.setdefault((scope, op.type), []).append(op)
    found: dict[str, str] = {}
    for op in operations:
        kind = grad_types.get(op.name)
        if kind is None:
            continue
        inner = op.name.split("/", 1)[1]
        scope = inner.rsplit("/", 1)[0] if "/" in inner else ""
        candidates = by_scope.get((scope, kind), [])
        while not candidates and scope:
            # The gradient may sit in a scope of its own under the forward op's.
            scope = scope.rsplit("/", 1)[0] if "/" in scope else ""
            candidates = by_scope.get((scope, kind), [])
        if len(candidates) > 1:
            read = {t.op.name for t in op.inputs}
            candidates = [c for c in candidates if c.name in read] or [
                c for c in candidates if read & {t.op.name for t in c.inputs}
            ]
        if len(candidates) == 1:
            found[op.name] = candidates[0].name
    return found


def callees(op: Any) -> list[str]:
    """Names of the functions a call or control-flow node runs."""
    names: list[str] = []
    try:
        attrs = op.node_def.attr
    except Exception:  # a node whose definition cannot be read
        return names
    for attr in _CALL_ATTRS:
        if attr not in attrs:
            continue
        value = attrs[attr]
        if value.HasField("func"):
            names.append(value.func.name)
        elif value.HasField("list"):
            names.extend(f.name for f in value.list.func)
    return names
