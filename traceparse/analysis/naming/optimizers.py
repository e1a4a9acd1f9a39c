"""The Keras optimizers, named once: how each generation scopes their ops and
variables, and how a report names them.

Keras 3 names an optimizer (and so the name scope of its update ops and the
path prefix of its variables) after its class in snake case
(``keras/src/optimizers/base_optimizer.py``: ``auto_name(self.__class__.__name__)``),
which for these classes is the class name in lower case; tf.keras 2 used the
class name as written (``tf_keras/optimizers/optimizer.py``: ``name=None`` ->
the class name). ``Lamb`` is Keras 3's alone (``keras.optimizers.Lamb``); the
loss-scaling wrapper of mixed precision scopes as ``LossScaleOptimizer`` (2) and
``loss_scale_optimizer`` (3).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

__all__ = [
    "KERAS2_OPTIMIZERS",
    "KERAS3_OPTIMIZERS",
    "OPTIMIZER_NAMES",
    "OPTIMIZER_SCOPES",
    "SLOTS",
    "captured_optimizer",
    "optimizer_of_frames",
]

# Keras 3's scope -> the name a report says (the class name; FTRL and LAMB as their papers).
OPTIMIZER_NAMES = {
    "adam": "Adam",
    "adamw": "AdamW",
    "adamax": "Adamax",
    "nadam": "Nadam",
    "sgd": "SGD",
    "rmsprop": "RMSprop",
    "adagrad": "Adagrad",
    "adadelta": "Adadelta",
    "adafactor": "Adafactor",
    "ftrl": "FTRL",
    "lamb": "LAMB",
    "lion": "Lion",
}
# The scopes Keras 3 writes (the loss-scaling wrapper included).
KERAS3_OPTIMIZERS = frozenset(OPTIMIZER_NAMES) | {"loss_scale_optimizer"}
# Every optimizer's scope in lower case, whichever generation wrote it.
OPTIMIZER_SCOPES = KERAS3_OPTIMIZERS
# The scopes tf.keras 2 writes: its class names (no Lamb in tf.keras).
KERAS2_OPTIMIZERS = frozenset(
    [
        "Adam",
        "AdamW",
        "Adamax",
        "Adagrad",
        "Adadelta",
        "Adafactor",
        "Ftrl",
        "Nadam",
        "RMSprop",
        "SGD",
        "Lion",
        "LossScaleOptimizer",
    ]
)


# A frame of an optimizer's own update, ``path:line function``: Keras keeps each
# optimizer in a module named after it (``keras/src/optimizers/adam.py``,
# tf_keras ``keras/optimizers/adam.py`` and ``optimizers/optimizer_v2/adam.py``),
# whose ``update_step`` (Keras 3, tf.keras >= 2.11) or ``_resource_apply_dense``/
# ``_resource_apply_sparse`` (optimizer_v2) makes the update's ops.
_UPDATE_FRAME = re.compile(
    r"(?:^|/)(?:keras|tf_keras)/(?:src/)?optimizers/(?:optimizer_v2/|legacy/)?"
    r"(?P<module>\w+)\.py:\d+ "
    r"(?:update_step|_update_step|_update_step_xla|_resource_apply_dense|_resource_apply_sparse)$"
)


def optimizer_of_frames(frames: Iterable[str]) -> str | None:
    """The Keras optimizer whose update the recorded frames run through (its
    ``OPTIMIZER_NAMES`` key), the most frequent where several do; None when no
    frame is an optimizer's update. An eager loop's ops carry no optimizer scope,
    so its source record is what names the optimizer. AdamW's update is Adam's
    (Keras 3 subclasses it and decays the weights in the base class), so it reads
    as Adam."""
    found: Counter[str] = Counter()
    for frame in frames:
        match = _UPDATE_FRAME.search(frame)
        if match and match.group("module") in OPTIMIZER_NAMES:
            found[match.group("module")] += 1
    return found.most_common(1)[0][0] if found else None


# Per optimizer: (slots per parameter, full-size elementwise tensors its update
# formula makes per variable). Slots are the variables Keras 3's optimizers add
# per trainable variable in ``build`` (keras/src/optimizers/*.py): SGD none (one,
# ``momentums``, with momentum), Adam/AdamW/Adamax/Nadam ``momentums`` and
# ``velocities``, RMSprop ``velocities`` (+ ``average_gradients`` when
# centered), Adagrad ``accumulators``, Adadelta two accumulators, Lion
# ``momentums``, LAMB two; Adafactor (keras/src/optimizers/adafactor.py) keeps a
# full-size ``velocity`` per variable beside its factored rows and columns
# (``ADAFACTOR_SLOTS``). Temporaries: the full-size tensors the update step's
# ops create, counted from ``update_step`` in those files (Adam: g - m, its
# scaling, g*g, g*g - v, its scaling, m*alpha, sqrt(v), + epsilon, the ratio:
# 9; SGD: g*lr: 1); how many are live at once depends on the executor's order,
# so the bounds take the ratio and no change.
SLOTS: dict[str, tuple[float, float]] = {
    "sgd": (0.0, 1.0),
    "momentum": (1.0, 3.0),
    "adam": (2.0, 9.0),
    "adamw": (2.0, 10.0),
    "adamax": (2.0, 8.0),
    "nadam": (2.0, 12.0),
    "rmsprop": (1.0, 5.0),
    "rmsprop_centered": (2.0, 8.0),
    "adagrad": (1.0, 4.0),
    "adadelta": (2.0, 9.0),
    "adafactor": (1.0, 9.0),
    "lion": (1.0, 8.0),
    "lamb": (2.0, 12.0),
}


def captured_optimizer(ops: Iterable[object]) -> str | None:
    """The optimizer whose name scope the ops (their distinct names) carry, the most
    frequent where several do: Keras names an optimizer's update ops after its
    class (above); the loss-scaling wrapper is not one."""
    found: Counter[str] = Counter()
    for op in dict.fromkeys(str(o) for o in ops if isinstance(o, str)):
        for part in op.split("/"):
            name = re.sub(r"_\d+$", "", part).lower()
            if name in OPTIMIZER_SCOPES and name != "loss_scale_optimizer":
                found[name] += 1
    return found.most_common(1)[0][0] if found else None
