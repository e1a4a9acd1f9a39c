"""Each allocator's peak at another batch size (docs/predict.md): one entry point.

``predictor_from(source, ...)`` (``Profile.predictor`` and ``predictor_of`` call it)
gives a ``Predictor`` (``make_predictor`` on the source's ``Capture``); its ``at``,
``bounds`` and ``breakdown`` answer one batch size, and ``capacity_fit`` / ``curve``
/ ``report_curves`` the largest batch that fits and the peak over many. The
modules, in the order a prediction uses them:

- ``evidence``: the batch the capture was made at, weighed off its tensors;
  ``batch``: which requests grow with the batch; ``workspace``: a convolution
  workspace's fixed part; ``xla``: a
  compiled program's slab sized from its HLO buffers; ``fit``: two captures,
  each request fitted in the batch (the sizing);
- ``bfc``: the model of TensorFlow's BFC allocator; ``simulate``: a capture's
  events replayed through it; ``replay``: the captured counter replayed with
  new chunk sizes (the bounds); ``low``: the low bound's readings of the
  captured events (the floor, the steps that ran the program, what another run
  could spare); ``loops``: a recurrent loop's iterations in flight;
- ``predictor``: the ``Predictor`` that puts them together; ``parts``: what
  holds a predicted peak (``weights``: the variables held before a capture that
  names none, read off their gradients); ``capacity``: will it fit, and the curves;
- ``source``: what a prediction is made from (a capture's tables, the batch
  checks, a second capture's check) and the entry point.

Code outside this package imports these names from here; the modules' other
names are the package's own.
"""

from traceparse.analysis.predict.capacity import (
    MAX_BATCH,
    REPLAY_PROGRESS,
    Fit,
    capacity_fit,
    curve,
    plot_batches,
    report_curves,
)
from traceparse.analysis.predict.parts import BEFORE, READ_BEFORE
from traceparse.analysis.predict.predictor import POOLED_BELOW, Capture, Predictor, make_predictor
from traceparse.analysis.predict.replay import Replayed
from traceparse.analysis.predict.source import (
    PredictSource,
    check_batches,
    checked_batch,
    prediction_input,
    predictor_from,
)

__all__ = [
    "BEFORE",
    "MAX_BATCH",
    "POOLED_BELOW",
    "READ_BEFORE",
    "REPLAY_PROGRESS",
    "Capture",
    "Fit",
    "PredictSource",
    "Predictor",
    "Replayed",
    "capacity_fit",
    "check_batches",
    "checked_batch",
    "curve",
    "make_predictor",
    "plot_batches",
    "prediction_input",
    "predictor_from",
    "report_curves",
]
