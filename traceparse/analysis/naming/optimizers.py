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

__all__ = ["KERAS2_OPTIMIZERS", "KERAS3_OPTIMIZERS", "OPTIMIZER_NAMES", "OPTIMIZER_SCOPES"]

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
