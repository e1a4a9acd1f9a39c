"""Which model layer an op name belongs to, and what part of training made it.

The rules, from real Keras 3 and Keras 2 captures (see docs/analyses.md):

- Function-call wrappers (``StatefulPartitionedCall/``, ``__inference_...``)
  and a leading control-flow branch's call (``cond/then/_34/cond/``) are
  dropped, then leading ``gradient_tape/`` (or TF1 ``gradients/``) marks
  the backward pass and leading ``replica_N/`` / ``tower_N/`` (distribution
  strategies) give the replica; both can come in either order.
- What is left is ``<model>/<layer>/...op``, read by the generation that
  wrote it (:mod:`traceparse.analysis.naming.generations`, in
  ``KnownNames.generation``):

  - Keras 3 suffixes every model and layer scope with ``_N`` once
    (``mycnn_1/conv_a_1``, ``sequential_1/dense_1_2`` for the layer the user
    called ``dense_1``), so the user's name is the scope minus exactly one
    ``_N``. When the model's own names are known (a variable inventory), a
    stripped name that is a known layer wins, then the scope as written if
    that is a known layer. Without known names, a scope counts as a Keras
    model or layer only if it has that suffix: plain ``tf.name_scope`` blocks
    (``augment/resize``) are not layers.
  - Keras 2 writes each scope as the layer is named (``conv2d_3`` is layer
    ``conv2d_3``; ``conv2d_3`` and ``conv2d_4`` are two layers), so names are
    kept as written. A first scope is a model when the inventory names it or
    when the backward pass shows it (``gradient_tape/<model>/<layer>/...``);
    a layer scope is written in snake case (``MatMul``, ``Tensordot`` are an
    op's own scopes).
  - TF1-style and Estimator graphs have no model scope to rely on: the layer
    is the first scope, as written, when the backward pass
    (``gradients/<scope>/...``) shows it.

  The layer is the level right under the model, so a nested model is one
  row, as in ``model.layers``; ``layer_path`` opens it, level by level.
- An optimizer's ops (``adam/...``) are tied to a layer through a slot name in
  the op (``adam/hidden_kernel_momentum/...``: ``<model>_<layer>_<weight>_<slot>``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TypeVar

import numpy as np

from traceparse.analysis.naming.generations import KERAS3, TF1_LIKE, WRAPPER, is_layer_like
from traceparse.analysis.naming.jax import jax_role
from traceparse.analysis.naming.optimizers import OPTIMIZER_SCOPES

T = TypeVar("T")

NO_LAYER = "(no layer)"
OPTIMIZER_UNASSIGNED = "(optimizer, unassigned)"
BEFORE_CAPTURE = "(before the capture, not named)"
RESERVED = "(allocator reserved)"
# A linked XLA slab's slack and the allocator's padding on it: the program's, no layer's.
XLA_SLAB = "(XLA slab slack and padding)"
EXPLICIT_ROWS = (OPTIMIZER_UNASSIGNED, NO_LAYER, XLA_SLAB, BEFORE_CAPTURE, RESERVED)

ACTIVATION, GRADIENT, WEIGHT, OTHER = ("activation", "gradient", "weight", "other")
# An optimizer's bytes are two roles with different advice. Its state is its
# variables (Adam's m and v, momentum, accumulators: the slots Keras makes with
# ``Optimizer.add_variable_from_reference`` in Keras 3, ``add_slot`` in tf.keras
# 2): made once, kept between steps, one per weight, so they scale with the
# parameters. Its update is the temporaries of ``update_step``/``apply_gradients``
# (``m * beta_1``, ``sqrt(v)``, ...): alive only during the step, what a fused
# update or a smaller optimizer removes.
OPTIMIZER_STATE, OPTIMIZER_UPDATE = "optimizer_state", "optimizer_update"
OPTIMIZER_ROLES = (OPTIMIZER_STATE, OPTIMIZER_UPDATE)
# A role the capture does not say (no op name, no recorded stack naming one).
UNKNOWN = "unknown"
# Every role, in the order tables and reports list them.
ROLES = (WEIGHT, OPTIMIZER_STATE, OPTIMIZER_UPDATE, ACTIVATION, GRADIENT, OTHER, UNKNOWN)

# A control-flow op's branch functions and the id of their call in the graph.
_BRANCHES = frozenset({"then", "else", "body", "cond"})
_CALL = re.compile(r"^_\d+$")
_BACKWARD = re.compile(r"^(?:gradient_tape|gradients)(?:_\d+)?$")
_REPLICA = re.compile(r"^(?:replica|tower)_(\d+)$")
_SUFFIX = re.compile(r"^(.+)_\d+$")
# A variable's initializer scope: in a graph, ``<optimizer>/<slot>/Initializer/zeros``
# makes a slot's first buffer (tf.keras ``add_slot`` and Keras 3 ``add_variable``
# create variables under the optimizer's name scope; TF names the initial value's
# ops ``<variable>/Initializer/...``, resource_variable_ops.py).
_INITIALIZER = "Initializer"
# What a resource-variable assign allocates: TF's assign kernels copy the variable's
# buffer when another tensor still shares it (copy-on-write, ``AssignVariableOp`` and
# ``AssignUpdateVariableOp`` in resource_variable_ops.cc), so the op's new buffer is
# the variable's from then on and is kept between steps. Under an optimizer's scope
# the variable is one it updates: a slot (Keras 3 and tf.keras >= 2.11 ``update_step``
# call ``assign``/``assign_add`` on Adam's m and v) or the weight itself
# (``assign_sub``/``assign_add`` on it); the op's name does not say which, so these
# count as the optimizer's state, and an inventory (``variable_match``) names the
# variable where it can.
_ASSIGNS = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")


def optimizer_op_roles(kind: np.ndarray, op_types: np.ndarray) -> np.ndarray:
    """The roles of allocations, given ``place_op``'s kinds and their ops' types: the
    new buffer of an optimizer's assign is a variable it keeps (optimizer state),
    the rest as placed."""
    update = kind == OPTIMIZER_UPDATE
    if not update.any():
        return kind
    out = kind.copy()
    out[update & np.isin(op_types, _ASSIGNS)] = OPTIMIZER_STATE
    return out


# Scopes Keras puts loss and metric ops under: not layers of the model.
_NOT_MODELS = frozenset({"compile_loss", "compile_metrics", "loss", "metrics"})
# Keras 2 computes a loss under the loss's own name (sparse_categorical_crossentropy/
# weighted_loss/...), which its backward pass shows like a model's layer: not a model.
_LOSS_SCOPE = re.compile(
    r"(?:crossentropy|_error|_loss|hinge|divergence|poisson|similarity|huber)(?:_\d+)?$"
)
# TF1 graphs' scopes of training machinery, never a layer.
_NOT_LAYERS = frozenset({"gradients", "training", "loss", "metrics", "global_step", "save", "init"})


def strip_suffix(scope: str) -> str:
    """The scope minus one trailing ``_N`` (what a Keras 3 trace adds), else as written."""
    match = _SUFFIX.match(scope)
    return match.group(1) if match else scope


@dataclass
class KnownNames:
    """Names of the profiled model(s), from a variable inventory; empty when there is none."""

    layers: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    optimizers: set[str] = field(default_factory=set)
    # slot prefix ("mycnn_conv_a_kernel") -> layer, longest first when matching
    slot_prefixes: dict[str, str] = field(default_factory=dict)
    # Who wrote the op names (layer_generation): Keras 3 unless told otherwise.
    generation: str = KERAS3
    # ``parse_op``'s and ``place_op``'s answers by op name: a summary reads the same
    # few thousand names at every moment it breaks down. Dropped when a name set
    # grows (the sets are filled while the inventory is read).
    _parsed: dict[str, ParsedOp] = field(default_factory=dict, repr=False, compare=False)
    _placements: dict[str, Placement] = field(default_factory=dict, repr=False, compare=False)
    _read_for: tuple[object, ...] = field(default=(), repr=False, compare=False)

    def parsed(self, op: str) -> ParsedOp:
        """``parse_op(op, self)``, once per op name while the names stay as they are
        (shared: not to be changed)."""
        return self._once(self._parsed, op, parse_op)

    def placed(self, op: str) -> Placement:
        """``place_op(op, self)``, once per op name while the names stay as they are."""
        return self._once(self._placements, op, place_op)

    def _once(self, store: dict[str, T], op: str, read: Callable[[str, KnownNames], T]) -> T:
        state = (
            len(self.layers),
            len(self.models),
            len(self.optimizers),
            len(self.slot_prefixes),
            self.generation,
        )
        if state != self._read_for:
            self._parsed.clear()
            self._placements.clear()
            self._read_for = state
        found = store.get(op)
        if found is None:
            found = store[op] = read(op, self)
        return found

    def user_name(self, scope: str) -> str | None:
        """The user's name for a model or layer scope, or None if it is not one."""
        if self.generation != KERAS3:
            return scope if scope in self.layers or scope in self.models else None
        stripped = strip_suffix(scope)
        if stripped in self.layers or stripped in self.models:
            return stripped
        if scope in self.layers or scope in self.models:
            return scope
        return stripped if stripped != scope else None

    def layer_name(self, scope: str) -> str | None:
        """The name of a layer scope right under a model, or None if it is not a layer's."""
        if self.generation == KERAS3:
            return self.user_name(scope)
        return scope if scope in self.layers or is_layer_like(scope) else None

    def sublayer_name(self, scope: str) -> str | None:
        """The name of a layer inside a layer (a nested model's), or None when the scope
        is the op's own (``MatMul``, ``Tensordot``, ``convolution``)."""
        if self.generation == KERAS3:
            # Keras 3 suffixes every layer scope, nested ones too; an op's scopes not.
            stripped = strip_suffix(scope)
            if scope in self.layers or stripped in self.layers:
                return stripped if stripped in self.layers else scope
            return stripped if stripped != scope and is_layer_like(scope) else None
        return self.layer_name(scope)


@dataclass(frozen=True)
class Placement:
    """Where one op's allocations go: a row label, a kind, and a replica number."""

    layer: str
    kind: str
    replica: int


@dataclass(frozen=True)
class ParsedOp:
    """An op name's scopes: as written (wrappers dropped), and the model's layer, if any.

    ``rest`` are the scopes after the leading markers (``gradient_tape/``,
    ``replica_N/``); ``layer`` is the user's name of the model layer the op is
    under (``rest[1]``), or None when ``rest`` does not start with a Keras model
    and one of its layers.
    """

    written: list[str]
    rest: list[str]
    backward: bool
    replica: int
    layer: str | None
    # Where the layer is in ``rest``: 1 under a model, 0 in a TF1 graph (no model scope).
    at: int = 1


def written_scopes(op: str) -> list[str]:
    """An op name's scopes as written, without the op itself and the call wrappers,
    nor a leading control-flow branch's call (``cond/then/_34/cond/adam/Mul``: a
    mixed-precision optimizer's updates, made only when the gradients are finite,
    are ``adam/Mul`` in the branch the graph calls)."""
    parts = op.split("/")[:-1]  # the last part is the op itself
    while True:
        while parts and WRAPPER.match(parts[0]):
            parts = parts[1:]
        if not (len(parts) > 3 and parts[1] in _BRANCHES and _CALL.match(parts[2])):
            return parts
        # The branch's body repeats the control-flow op's name scope: drop it too.
        parts = parts[4:] if parts[3] == parts[0] else parts[3:]


def parse_op(op: str, known: KnownNames) -> ParsedOp:
    """Split an op name into its scopes and find the model layer it is under."""
    parts = written_scopes(op)
    written, backward, replica = parts, False, 0
    while parts:
        found = _REPLICA.match(parts[0])
        if found and len(parts) > 2 and strip_suffix(parts[0]) not in known.models:
            replica = int(found.group(1))
        elif _BACKWARD.match(parts[0]):
            backward = True
        else:
            break
        parts = parts[1:]
    layer = None
    if known.generation in TF1_LIKE:
        layer = parts[0] if parts and parts[0] in known.layers else None
        return ParsedOp(written, parts, backward, replica, layer, at=0)
    if len(parts) > 1 and not is_optimizer_scope(parts[0], known):
        model = known.user_name(parts[0]) if strip_suffix(parts[0]) not in _NOT_MODELS else None
        layer = known.layer_name(parts[1]) if model is not None else None
    return ParsedOp(written, parts, backward, replica, layer)


def place_op(op: str | None, known: KnownNames) -> Placement:
    """The layer row and kind of allocations made by ``op`` (NA op: no layer, other)."""
    if not op:
        return Placement(NO_LAYER, OTHER, 0)
    jax = jax_role(op)  # a JAX program's names (TF op names never hold parentheses)
    if jax is not None:
        return Placement(jax[1] or NO_LAYER, jax[0], 0)
    parsed = known.parsed(op)
    if not parsed.rest:
        return Placement(NO_LAYER, OTHER, parsed.replica)
    rest = parsed.rest
    if rest[0] == "training" and len(rest) > 1 and known.generation in TF1_LIKE:
        rest = rest[1:]  # a TF1 graph's update: training/Adam/...
    if is_optimizer_scope(rest[0], known):
        kind = OPTIMIZER_STATE if _INITIALIZER in rest else OPTIMIZER_UPDATE
        return Placement(_slot_layer(rest[1:], known), kind, parsed.replica)
    kind = GRADIENT if parsed.backward else ACTIVATION
    if parsed.layer is None:
        return Placement(NO_LAYER, GRADIENT if parsed.backward else OTHER, parsed.replica)
    return Placement(parsed.layer, kind, parsed.replica)


def model_scopes(op: str, known: KnownNames | None = None) -> list[str]:
    """An op's scopes relative to its model: ``[layer, scopes inside it as written...]``.

    Under a Keras model layer, the wrappers, markers (``gradient_tape/``,
    ``replica_N/``) and the model's own scope are dropped and the layer goes by
    the user's name, so forward and backward ops of a layer share one path.
    Any other op keeps its scopes as written, minus the call wrappers.

    >>> model_scopes("StatefulPartitionedCall/gradient_tape/mycnn_1/conv_a_1/BiasAdd/Grad")
    ['conv_a', 'BiasAdd']
    >>> model_scopes("adam/hidden_kernel_momentum/Mul")
    ['adam', 'hidden_kernel_momentum']
    """
    if known is None:
        return list(_model_scopes(op))
    parsed = known.parsed(op)
    if parsed.layer is None:
        return list(parsed.written)
    return [parsed.layer, *parsed.rest[parsed.at + 1 :]]


def layer_path(op: str | None, known: KnownNames, depth: int) -> str | None:
    """The op's layer and the layers nested in it, ``depth`` levels at most, as a path
    (``bert_encoder_1/transformer/layer_2``); None when the op is under no layer.

    A level counts only if it is a layer's scope (``KnownNames.sublayer_name``):
    a plain layer's own op scopes (``dense/MatMul``, ``conv/convolution``) keep
    its ops in the layer's own row at every depth.

    >>> layer_path("net_1/block_1/block_dense_1/Relu", KnownNames(), 2)
    'block/block_dense'
    >>> layer_path("gradient_tape/mycnn_1/dense_1_1/MatMul/MatMul_1", KnownNames(), 3)
    'dense_1'
    """
    if not op:
        return None
    parsed = known.parsed(op)
    if parsed.layer is None:
        return None
    path = [parsed.layer]
    for scope in parsed.rest[parsed.at + 1 :]:
        name = known.sublayer_name(scope) if len(path) < depth else None
        if name is None:
            break
        path.append(name)
    return "/".join(path)


@lru_cache(maxsize=1 << 16)
def _model_scopes(op: str) -> tuple[str, ...]:
    """``model_scopes`` without known names, once per op name: ``scopes(depth)`` and
    the breakdown ask for the same names again and again."""
    parsed = parse_op(op, KnownNames())
    if parsed.layer is None:
        return tuple(parsed.written)
    return (parsed.layer, *parsed.rest[parsed.at + 1 :])


def is_optimizer_scope(scope: str, known: KnownNames) -> bool:
    """Whether a first scope is an optimizer's (``adam``, ``adam_1``, one the inventory names)."""
    names = {scope, strip_suffix(scope)}
    return bool(names & known.optimizers) or any(n.lower() in OPTIMIZER_SCOPES for n in names)


def slot_owner(name: str, known: KnownNames) -> str | None:
    """The layer whose weight a slot name (``hidden_kernel_momentum``) starts with
    (longest prefix), or None."""
    for prefix in sorted(known.slot_prefixes, key=len, reverse=True):
        if name.startswith(prefix + "_"):
            return known.slot_prefixes[prefix]
    return None


def _slot_layer(rest: list[str], known: KnownNames) -> str:
    """The layer whose slot an optimizer op names (``hidden_kernel_momentum``), if any."""
    found = slot_owner(rest[0], known) if rest else None
    return found or OPTIMIZER_UNASSIGNED


def names_in_ops(ops: list[str], known: KnownNames) -> tuple[set[str], set[str]]:
    """The (model, layer) names that the forward and backward ops of a capture show."""
    models: set[str] = set()
    layers: set[str] = set()
    for op in ops:
        placed = place_op(op, known)
        if placed.kind in (ACTIVATION, GRADIENT) and placed.layer != NO_LAYER:
            layers.add(placed.layer)
            parts = [p for p in op.split("/")[:-1] if not WRAPPER.match(p)]
            for part in parts:
                if not _BACKWARD.match(part) and not _REPLICA.match(part):
                    models.add(strip_suffix(part) if known.generation == KERAS3 else part)
                    break
    return models, layers


def learn_from_ops(ops: list[str], known: KnownNames) -> KnownNames:
    """Add slot prefixes for the layers that the capture's own op names show.

    Without an inventory a slot name ``<model>_<layer>_<weight>_<slot>`` (or
    ``<layer>_...`` for a functional model) is tied to a layer seen in the
    forward or backward ops: the model's and layers' names come from them.
    """
    if known.slot_prefixes:
        return known
    models, layers = names_in_ops(ops, known)
    prefixes: dict[str, str] = {}
    for layer in layers:
        prefixes[layer] = layer
        for model in models:
            prefixes[f"{model}_{layer}"] = layer
    return replace(known, slot_prefixes=prefixes)


def learn_scopes(ops: list[str], generation: str) -> tuple[set[str], set[str]]:
    """(models, layers) a capture's op names show by ``generation``'s rules, without
    an inventory.

    Keras 3: the models of the forward and backward ops (suffix stripped). Keras
    2: the first scopes the backward pass shows above a layer scope
    (``gradient_tape/<model>/<layer>/...``), or, in a capture with no backward
    pass, the forward ops do. TF1 graphs: the layers are the first scopes the
    backward pass (``gradients/<layer>/...``) shows.
    """
    if generation == KERAS3:
        return names_in_ops(ops, KnownNames())[0], set()
    found: dict[bool, set[str]] = {True: set(), False: set()}
    blank = KnownNames(generation=generation)
    for op in ops:
        parsed = parse_op(op, blank)
        rest = parsed.rest
        if not rest or is_optimizer_scope(rest[0], blank) or not is_layer_like(rest[0]):
            continue
        if generation in TF1_LIKE:
            if len(rest) > 1 and rest[0] not in _NOT_LAYERS:
                found[parsed.backward].add(rest[0])
        elif (
            len(rest) > 1
            and is_layer_like(rest[1])
            and strip_suffix(rest[0]) not in _NOT_MODELS
            and not _LOSS_SCOPE.search(rest[0])
        ):
            found[parsed.backward].add(rest[0])
    learnt = found[True] or found[False]
    return (set(), learnt) if generation in TF1_LIKE else (learnt, set())
