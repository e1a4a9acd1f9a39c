"""Deprecated: the Keras integration moved to ``traceparse.integrations.keras``.

The old spelling keeps working for a release with a ``DeprecationWarning``
(CHANGELOG.md); ``traceparse.MemoryCallback`` is the short one.
"""

from __future__ import annotations

import warnings

from traceparse.integrations.keras import MemoryCallback, StepMarker, step_markers_in_fit

__all__ = ["MemoryCallback", "StepMarker", "step_markers_in_fit"]

warnings.warn(
    "traceparse.keras moved to traceparse.integrations.keras (or use traceparse.MemoryCallback); "
    "the old name goes in a later release",
    DeprecationWarning,
    stacklevel=2,
)
