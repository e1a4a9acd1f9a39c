"""What a change to the training program would do to the peak (docs/whatif.md).

A what-if is a resizing of the capture's allocations fed into the same
allocator replay as a batch-size prediction (``predict.Predictor``): each
allocation's request is multiplied by a factor (0 drops it), with a low and a
high factor where the change's effect on it is uncertain, and bytes the change
adds or removes for the whole step (optimizer slots, cast copies of the
weights, a recomputed layer's activations) are added to the counter. The
Predictor's BFC model then places every chunk, and its bounds replay the
counter with each chunk at its smallest and largest, so peak, bounds, moment
and parts come from the machinery ``predict`` uses.

Three changes, each a rule that names the mechanism it models, and a fresh
process:

- ``precision``: ``mixed_float16`` / ``mixed_bfloat16`` / ``float32``
  (``rules.precision_factors``);
- ``optimizer``: one of ``SLOTS`` (``rules.optimizer_change``);
- ``remat``: ``all`` or layer names (``rules.remat_factors``);
- ``fresh``: the program in a new process (``rules.fresh_process``).

The modules, in the order a what-if uses them: ``change`` (what is asked),
``facts`` (what the rules read off the capture), ``rules`` (the resizing),
``replay`` (``WhatIf``: the changed program's Predictor, and its parts), and
``advise`` (the changes worth trying, ranked). Code outside this package
imports these names from here.
"""

from traceparse.analysis.naming.optimizers import SLOTS
from traceparse.analysis.whatif.advise import COSTS, advice, candidates, cost_of, half_policy
from traceparse.analysis.whatif.change import OPTIMIZERS, PRECISIONS, Change, parse_change
from traceparse.analysis.whatif.facts import FLOAT32_OPS, HALF, Facts, facts_of, layer_names
from traceparse.analysis.whatif.replay import WhatIf, changed_parts, what_if, with_change
from traceparse.analysis.whatif.rules import (
    Resizing,
    attention_scores,
    resizing,
    update_values,
)

__all__ = [
    "COSTS",
    "FLOAT32_OPS",
    "HALF",
    "OPTIMIZERS",
    "PRECISIONS",
    "SLOTS",
    "Change",
    "Facts",
    "Resizing",
    "WhatIf",
    "advice",
    "attention_scores",
    "candidates",
    "changed_parts",
    "cost_of",
    "facts_of",
    "half_policy",
    "layer_names",
    "parse_change",
    "resizing",
    "update_values",
    "what_if",
    "with_change",
]
