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
does a forward-only program), so those keep the general rules, unless the
instruction's recorded stack says more (``stack_role``).

Entry parameters are named differently: JAX names each leaf of a jitted
function's arguments by the argument and the leaf's pytree key path
(``jax.tree_util.keystr``; the jit's debug info, ``jax._src.api_util``), e.g.
``params['params']['big']['kernel']`` or ``opt_state[0].mu['params']['big']['kernel']``
(``parameter_roles``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from traceparse.decode.xla import Frame

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


# One step of a keystr path: ``['key']``, ``[0]``, ``.field``.
_KEY_STEP = re.compile(
    r"\[(?:'(?P<key>[^']*)'|\"(?P<dkey>[^\"]*)\"|(?P<index>-?\d+))\]|\.(?P<attr>\w+)"
)
_ARGUMENT = re.compile(r"^[A-Za-z_]\w*")
Step = tuple[str, str]  # (kind: key, index or attr; its text)


def key_path(name: str) -> tuple[Step, ...] | None:
    """The steps of a keystr-named parameter, the argument first as ``("arg", name)``;
    None for a name that is not one (no ``[`` or ``.``, or anything else in it)."""
    head = _ARGUMENT.match(name)
    if head is None or head.end() == len(name):
        return None
    steps: list[Step] = [("arg", head.group())]
    at = head.end()
    while at < len(name):
        step = _KEY_STEP.match(name, at)
        if step is None:
            return None
        kind = next(k for k in ("key", "dkey", "index", "attr") if step.group(k) is not None)
        steps.append(("key" if kind == "dkey" else kind, step.group(kind)))
        at = step.end()
    return tuple(steps)


def parameter_roles(names: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """(role, layer or None) of a JAX program's entry parameters, from their key
    paths; names not listed say nothing (an input batch, a lone array).

    An optimizer keeps state that mirrors the parameters: optax's states are
    NamedTuples (``ScaleByAdamState(count, mu, nu)``, ``TraceState(trace)``;
    ``optax._src.transform``) whose per-parameter fields are trees made from the
    parameters (``optax.tree_utils.tree_zeros_like(params)``), so each such leaf
    ends with a parameter's own key path (``opt_state[0].mu['params']['big']['kernel']``
    ends like ``params['params']['big']['kernel']``) under a longer prefix (the
    chain's index and the state's field). So, among parameters whose paths end
    alike (at least the leaf's dict key), the one with the shortest prefix is the
    weight and the rest are optimizer state; a leaf that mirrors nothing but sits
    under an optimizer state's prefix (Adam's ``count``) is optimizer state too.
    The layer is the dict key before the variable's name: flax and haiku keep a
    module's variables in a dict keyed by the module's name (``flax.core.scope``,
    ``haiku.Params``). A program whose optimizer keeps no state (plain SGD) shows
    no mirror, so its parameters stay unsaid.
    """
    paths = {name: found for name in names if (found := key_path(name)) is not None}
    # The longest tail of dict keys and indices that ends each path.
    tails: dict[str, tuple[Step, ...]] = {}
    for name, steps in paths.items():
        cut = len(steps)
        while cut > 1 and steps[cut - 1][0] in ("key", "index"):
            cut -= 1
        tails[name] = steps[cut:]
    groups: dict[tuple[Step, ...], list[str]] = {}
    for name, tail in tails.items():
        if tail:
            groups.setdefault(tail, []).append(name)
    out: dict[str, tuple[str, str | None]] = {}
    state_prefixes: set[tuple[Step, ...]] = set()
    for tail, members in groups.items():
        if len(members) < 2:
            continue
        keys = [text for kind, text in tail if kind == "key"]
        layer = keys[-2] if len(keys) >= 2 else None
        members.sort(key=lambda n: (len(paths[n]) - len(tail), n))
        weight, *rest = members
        # A state leaf sits under a state's field (keystr's ``.mu``), which the
        # weight's own path does not have: two inputs with the same keys are no mirror.
        fields = sum(kind == "attr" for kind, _ in paths[weight])
        state = [n for n in rest if sum(kind == "attr" for kind, _ in paths[n]) > fields]
        if not state:
            continue
        out[weight] = ("weight", layer)
        for name in state:
            out[name] = ("optimizer_state", layer)
            prefix = paths[name][: len(paths[name]) - len(tail)]
            state_prefixes.add(prefix[:-1])  # the state tuple holding this field
    for name, steps in paths.items():
        if name not in out and any(steps[: len(p)] == p for p in state_prefixes if p):
            out[name] = ("optimizer_state", None)
    return out


# An optax GradientTransformation's ``update`` (``optax._src.base``: every optimizer
# is ``init``/``update`` functions, chained by ``optax.chain``) and ``apply_updates``
# (``optax._src.update``): ops traced inside them are the optimizer's update.
_OPTAX_FILE = re.compile(r"(?:^|/)optax/(?!losses/)")
_OPTAX_UPDATE = re.compile(r"(?:^|\.)(?:update_fn|update|apply_updates)(?:\.|$)")


def stack_role(frames: Sequence[Frame]) -> str | None:
    """``optimizer_update`` when a JAX instruction's recorded stack (innermost
    first) runs through an optax transformation's ``update`` or ``apply_updates``;
    None otherwise. optax's losses (``optax/losses``) are not its updates."""
    for frame in frames:
        if _OPTAX_FILE.search(frame.file) and _OPTAX_UPDATE.search(frame.function):
            return "optimizer_update"
    return None
