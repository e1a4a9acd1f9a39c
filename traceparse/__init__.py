"""traceparse: which tensors hold your TensorFlow memory, read from profiler captures.

>>> import traceparse
>>> with traceparse.profile("logs/run1") as cap:      # doctest: +SKIP
...     for step in range(3):
...         with cap.step(step):
...             train_step()
>>> prof = cap.load()                                  # doctest: +SKIP
>>> prof.allocations.nlargest(10, "allocated_bytes")   # doctest: +SKIP

Analysing a capture never imports TensorFlow; capturing does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from traceparse.core import display as _display

# Errors are light; everything else (pandas above all) loads on first use, so
# `import traceparse` and the pytest plugin cost next to nothing until used.
from traceparse.errors import (
    CaptureError,
    CaptureNotFoundError,
    CaptureTooLargeError,
    CorruptCaptureError,
    DependencyError,
    InputError,
    NoCaptureError,
    TraceparseError,
    UsageError,
)
from traceparse.version import __version__

if TYPE_CHECKING:
    from traceparse.batching import batch
    from traceparse.capture.session import Capture, profile
    from traceparse.core.loading import load, load_all
    from traceparse.core.profile import Profile
    from traceparse.integrations.keras import MemoryCallback
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
    "Capture",
    "CaptureError",
    "CaptureNotFoundError",
    "CaptureTooLargeError",
    "CorruptCaptureError",
    "DependencyError",
    "Estimate",
    "InputError",
    "MemoryCallback",
    "NoCaptureError",
    "Profile",
    "TraceparseError",
    "UsageError",
    "__version__",
    "batch",
    "estimate_bytes",
    "load",
    "load_all",
    "profile",
]
