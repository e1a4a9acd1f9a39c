"""Which generation of Keras (or TensorFlow) named a capture's ops, from the names alone.

Each generation scopes its ops its own way, and the layer rules depend on it
(:mod:`traceparse.analysis.naming.layers`):

- **Keras 3** suffixes every model and layer scope with ``_N`` once
  (``sequential_1/dense_1_2`` is layer ``dense_1``), spells its optimizer's
  scope in lower case (``adam/``), computes the loss under ``compile_loss/``
  and runs a step as ``one_step_on_data``;
- **Keras 2** (``tf.keras`` up to TF 2.15, ``tf_keras`` after) writes a scope
  as the layer is named: the first model is ``sequential``, its layers
  ``conv2d``, ``conv2d_1``; a layer called ``conv2d_3`` is ``conv2d_3``. Its
  optimizers' scopes are their class names (``Adam/``, ``SGD/``) and a step is
  ``train_function``;
- **TF1-style graphs** (``tf.compat.v1`` sessions, Keras 2 in graph mode)
  mark the backward pass ``gradients/`` and the update ``training/``;
- **Estimator** graphs (canned estimators) are TF1 graphs with
  ``OptimizeLoss/`` or ``global_step`` scopes. Model Garden models are
  Keras 2 (``tf_keras``).

Each clue is counted over the distinct op names; a variable inventory adds
one (Keras 3 variables have a ``path`` without ``:0``; TensorFlow 2's own
names end in ``:N``). Scopes suffixed ``_N`` fit both Keras generations, so
they decide only when nothing else does, and then not surely. The generation
with clues and no contrary clue is read as sure; with clues both ways the
larger count wins, not sure; with none, Keras 3 is assumed (the rules before
generations were told apart), not sure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from traceparse.analysis.naming.optimizers import KERAS2_OPTIMIZERS, KERAS3_OPTIMIZERS

KERAS3 = "keras 3"
KERAS2 = "keras 2"
TF1 = "tf1 graph"
ESTIMATOR = "estimator"
GENERATIONS = (KERAS3, KERAS2, TF1, ESTIMATOR)
# Graphs whose layer is the first scope (no Keras model scope above it).
TF1_LIKE = (TF1, ESTIMATOR)

# Function-call wrappers around a traced function's ops: no layer, no model.
WRAPPER = re.compile(r"^(?:(?:Stateful)?PartitionedCall(?:_\d+)?|__inference_.*|__forward_.*)$")
_MARKER = re.compile(r"^(?:gradient_tape|replica_\d+|tower_\d+)(?:_\d+)?$")
_SUFFIX = re.compile(r"^.+_\d+$")
_DOUBLE = re.compile(r"^.+_\d+_\d+$")
# Keras 2 optimizers scope their ops with their class name; Keras 3 with it in lower case.
_KERAS2_OPTIMIZERS, _KERAS3_OPTIMIZERS = KERAS2_OPTIMIZERS, KERAS3_OPTIMIZERS
_KERAS2_OPTIMIZER = re.compile(rf"^(?:{'|'.join(sorted(_KERAS2_OPTIMIZERS))})(?:_\d+)?$")
_KERAS3_OPTIMIZER = re.compile(rf"^(?:{'|'.join(sorted(_KERAS3_OPTIMIZERS))})(?:_\d+)?$")
# Scopes and step functions each generation alone writes (whole scope names).
_KERAS3_SCOPES = frozenset({"compile_loss", "compile_metrics"})
_ESTIMATOR_SCOPES = frozenset({"OptimizeLoss", "global_step", "head"})
_TF1_SCOPES = frozenset({"gradients", "training"})
_SUFFIXED = (
    "suffixed model and layer scopes (as Keras 3 writes them, and Keras 2 after a first model)"
)


@dataclass(frozen=True)
class Generation:
    """The generation read from a capture, whether it is sure, and the clues counted.

    ``clues`` maps a clue's key (``"optimizer scope Adam/"``, ``"unsuffixed
    layer scope"``...) to (generation, how many op names showed it).
    """

    name: str
    sure: bool
    clues: tuple[tuple[str, str, int], ...] = ()

    @property
    def strips_suffix(self) -> bool:
        """Whether a layer's name is its scope minus one ``_N`` (Keras 3 only)."""
        return self.name == KERAS3


ASSUMED = Generation(KERAS3, sure=False)


def read_generation(ops: Iterable[str], variable_names: Iterable[str] = ()) -> Generation:
    """The generation that wrote ``ops`` (op names), with an inventory's variable names."""
    votes: Counter[tuple[str, str]] = Counter()
    for op in ops:
        for clue in _clues(op):
            votes[clue] += 1
    names = [str(n) for n in variable_names]
    if names:
        tf_names = sum(1 for n in names if re.search(r":\d+$", n))
        if tf_names == len(names):
            votes[(KERAS2, "inventory variable names end in :N")] += tf_names
        elif tf_names == 0:
            votes[(KERAS3, "inventory variable names without :N")] += len(names)
    if not votes:
        return ASSUMED
    # Suffixed scopes fit Keras 2 as well (its tenth Dense is dense_9): they decide
    # only when nothing else does, and then not surely.
    strong = {k: n for k, n in votes.items() if k[1] != _SUFFIXED}
    per: Counter[str] = Counter()
    for (generation, _), count in (strong or votes).items():
        per[generation] += count
    # Estimator and TF1 graphs are Keras 2's kin: a TF1 clue beside an Estimator one
    # is the Estimator's graph, not a contrary clue.
    if per[ESTIMATOR]:
        per[ESTIMATOR] += per.pop(TF1, 0)
    best = max(per.items(), key=lambda kv: (kv[1], -GENERATIONS.index(kv[0])))[0]
    sure = len(per) == 1 and bool(strong)
    clues = tuple(sorted((key, gen, n) for (gen, key), n in votes.items()))
    return Generation(best, sure=sure, clues=clues)


def _clues(op: str) -> list[tuple[str, str]]:
    """The clues one op name gives, as (generation, clue)."""
    out: list[tuple[str, str]] = []
    raw = op.split("/")
    if any("one_step_on_data" in p or "one_step_on_iterator" in p for p in raw):
        out.append((KERAS3, "Keras 3 step function (one_step_on_data)"))
    elif any("train_function" in p for p in raw):
        out.append((KERAS2, "Keras 2 step function (train_function)"))
    parts = [p for p in raw[:-1] if not WRAPPER.match(p)]
    if not parts:
        return out
    head = parts[0]
    if head in _TF1_SCOPES:
        out.append((TF1, f"TF1 graph scope {head}/"))
        return out
    if head in _ESTIMATOR_SCOPES:
        out.append((ESTIMATOR, f"Estimator scope {head}/"))
        return out
    backward = False
    while parts and _MARKER.match(parts[0]):
        backward = backward or parts[0].startswith("gradient_tape")
        parts = parts[1:]
    if not parts:
        return out
    head = parts[0]
    if _KERAS2_OPTIMIZER.match(head):
        out.append((KERAS2, f"optimizer scope {_bare(head)}/"))
    elif _KERAS3_OPTIMIZER.match(head):
        out.append((KERAS3, f"optimizer scope {_bare(head)}/"))
    elif head in _KERAS3_SCOPES:
        out.append((KERAS3, f"Keras 3 scope {head}/"))
    elif backward and len(parts) > 1 and is_layer_like(head) and is_layer_like(parts[1]):
        # gradient_tape/<model>/<layer>/...: Keras 3 suffixes both, always, and a
        # layer Keras named dense_1 twice (dense_1_2); Keras 2 adds nothing.
        if _DOUBLE.match(parts[1]):
            out.append((KERAS3, "twice-suffixed layer scope (dense_1_2)"))
        elif _SUFFIX.match(head) and _SUFFIX.match(parts[1]):
            out.append((KERAS3, _SUFFIXED))
        else:
            out.append((KERAS2, "unsuffixed model or layer scope"))
    return out


def _bare(scope: str) -> str:
    return re.sub(r"_\d+$", "", scope)


def is_layer_like(scope: str) -> bool:
    """Whether a scope can be a Keras layer's: Keras names layers in snake case, so a
    scope that starts with a capital is an op's (``MatMul``, ``Tensordot``)."""
    return bool(scope) and not scope[0].isupper()
