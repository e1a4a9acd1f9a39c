"""traceparse: which tensors hold your TensorFlow memory, read from profiler captures.

>>> import traceparse
>>> with traceparse.profile("logs/run1") as cap:      # doctest: +SKIP
...     for step in range(3):
...         with cap.step(step):
...             train_step()
>>> prof = cap.load()                                  # doctest: +SKIP
>>> prof.allocations.nlargest(10, "allocated_bytes")   # doctest: +SKIP
>>> record = prof.summary()[0]                         # doctest: +SKIP
>>> record.peak_bytes, record.to_dict()["attribution"]  # doctest: +SKIP
>>> traceparse.predictor_of(prof).breakdown(256)       # doctest: +SKIP

The public names: capturing (``profile``, ``Capture``, ``MemoryCallback``),
loading (``load``, ``load_all``, ``batch``), the tables (``Profile``), the
records every output renders (``AllocatorRecord``, ``LeakVerdict``, ``Part``;
``to_dict()`` is the JSON of docs/record-schema.json), the prediction at other
batch sizes (``predictor_of``, ``Predictor``; docs/predict.md), shape x dtype
estimates (``estimate_bytes``, ``Estimate``) and the errors, each with its exit
code (``TraceparseError`` and below; ``OutOfMemoryError`` and
``BudgetExceededError`` are what ``traceparse check`` fails with).

Analysing a capture never imports TensorFlow; capturing does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from traceparse.core import display as _display

# Errors are light; everything else (pandas above all) loads on first use, so
# `import traceparse` and the pytest plugin cost next to nothing until used.
from traceparse.errors import (
    BudgetExceededError,
    CaptureError,
    CaptureNotFoundError,
    CaptureTooLargeError,
    CorruptCaptureError,
    DependencyError,
    InputError,
    NoCaptureError,
    OutOfMemoryError,
    TraceparseError,
    UsageError,
)
from traceparse.version import __version__

if TYPE_CHECKING:
    from traceparse.analysis.predict import Predictor
    from traceparse.batching import batch
    from traceparse.capture.session import Capture, profile
    from traceparse.core.loading import load, load_all
    from traceparse.core.profile import Profile, predictor_of
    from traceparse.integrations.keras import MemoryCallback
    from traceparse.records import AllocatorRecord, LeakVerdict, Part
    from traceparse.tables.dtypes import Estimate, estimate_bytes

# Public name -> the module that defines it.
_LAZY = {
    "batch": "traceparse.batching",
    "Capture": "traceparse.capture.session",
    "profile": "traceparse.capture.session",
    "Estimate": "traceparse.tables.dtypes",
    "estimate_bytes": "traceparse.tables.dtypes",
    "load": "traceparse.core.loading",
    "load_all": "traceparse.core.loading",
    "Profile": "traceparse.core.profile",
    "predictor_of": "traceparse.core.profile",
    "Predictor": "traceparse.analysis.predict",
    "AllocatorRecord": "traceparse.records",
    "LeakVerdict": "traceparse.records",
    "Part": "traceparse.records",
    # Imports Keras (and so TensorFlow) on first use only.
    "MemoryCallback": "traceparse.integrations.keras",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'traceparse' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def _notebook_html(profile: Any, top: int) -> str:
    """A Profile in a notebook: the report stage's renderer, imported when first shown."""
    from traceparse.report.notebook import profile_html

    return profile_html(profile, top)


_display.use(_notebook_html)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AllocatorRecord",
    "BudgetExceededError",
    "Capture",
    "CaptureError",
    "CaptureNotFoundError",
    "CaptureTooLargeError",
    "CorruptCaptureError",
    "DependencyError",
    "Estimate",
    "InputError",
    "LeakVerdict",
    "MemoryCallback",
    "NoCaptureError",
    "OutOfMemoryError",
    "Part",
    "Predictor",
    "Profile",
    "TraceparseError",
    "UsageError",
    "__version__",
    "batch",
    "estimate_bytes",
    "load",
    "load_all",
    "predictor_of",
    "profile",
]
