"""Roles of JAX ops from the names JAX writes into a jitted program's HLO metadata.

JAX records each HLO instruction's ``op_name`` as the stack of transformations and
name scopes the primitive was traced under (``jax._src.source_info_util``:
``NameStack``), e.g. from a flax/optax training step captured with JAX 0.10:

- ``jit(train_step)/jvp(Net)/conv1/conv_general_dilated``: the forward pass.
  ``jax.value_and_grad``/``jax.grad`` linearize the function with ``jvp``
  (``jax._src.interpreters.ad``), and flax ``linen`` runs each module's method
  under a name scope of the module's name (``flax.linen.module``, the
  ``flax_profile`` config, on by default), so the scope after ``jvp(...)`` is the
  layer: an activation of ``conv1``.
- ``jit(train_step)/transpose(jvp(Net))/big/dot_general``: the backward pass.
  Reverse mode transposes the linearized forward (``ad.backward_pass`` pushes a
  ``transpose`` frame on the name stack), so everything under ``transpose(...)``
  is a gradient, of the layer whose scope follows.
- Nested ``jit(relu)``-style scopes are calls of jitted helpers, no layer.

Only names with a ``jvp``/``transpose`` transformation are read here: a plain
``jit(f)/add`` says nothing about training (optax's update runs unscoped, and so
does a forward-only program), so those keep the general rules.
"""

from __future__ import annotations

import re

# One name-stack frame that is a transformation: ``jvp(Net)``, ``transpose(jvp(Net))``.
_TRANSFORM = re.compile(r"^(?P<kind>jvp|transpose|vjp|jit|pjit|vmap|remat|checkpoint)\(")


def jax_scopes(op: str) -> list[str] | None:
    """The frames of a JAX ``op_name`` (its last part, the primitive, dropped), or
    None when the name is not one JAX wrote (no ``jit(...)`` first frame)."""
    parts = op.split("/")
    if len(parts) < 2 or not parts[0].startswith(("jit(", "pjit(")) or not parts[0].endswith(")"):
        return None
    return parts[:-1]


def jax_role(op: str) -> tuple[str, str | None] | None:
    """(``gradient`` or ``activation``, the layer scope or None) for a JAX op under
    a differentiation transformation; None when the name says neither."""
    scopes = jax_scopes(op)
    if scopes is None:
        return None
    kind: str | None = None
    layer: str | None = None
    for scope in scopes[1:]:
        found = _TRANSFORM.match(scope)
        if found:
            if found.group("kind") in ("transpose", "vjp"):
                kind = "gradient"
            elif found.group("kind") == "jvp" and kind is None:
                kind = "activation"
            continue
        if kind is not None and layer is None:
            layer = scope
    return (kind, layer) if kind is not None else None
