"""The capture stage: profile TensorFlow and write what the later stages read.

- ``checks``: TensorFlow present and supported, arguments that make sense;
- ``session``: :func:`profile` and :class:`Capture` (one profiler session, its
  step markers, the files it wrote);
- ``steps``: Keras step markers (imports Keras; loaded only when used);
- ``script`` and ``child``: run an unmodified script under the profiler, in a
  child process of its own for ``traceparse run``;
- ``inventory``: the live ``tf.Variable`` list written beside a capture.

Nothing here imports TensorFlow at import time.
"""

from __future__ import annotations

from traceparse.capture.checks import TENSORFLOW_MISSING, enable_onednn
from traceparse.capture.script import ScriptResult, keras_step_markers, run_script
from traceparse.capture.session import Capture, profile

__all__ = [
    "TENSORFLOW_MISSING",
    "Capture",
    "ScriptResult",
    "enable_onednn",
    "keras_step_markers",
    "profile",
    "run_script",
]
