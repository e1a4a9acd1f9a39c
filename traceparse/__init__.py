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

# Errors are light; everything else (pandas above all) loads on first use, so
# `import traceparse` and the pytest plugin cost next to nothing until used.
from traceparse.errors import (
    CaptureError,
    CaptureNotFoundError,
    CaptureTooLargeError,
    CorruptCaptureError,
    InputError,
    NoCaptureError,
    TraceparseError,
    UsageError,
)

if TYPE_CHECKING:
    from traceparse.batching import batch
    from traceparse.capture import Capture, profile
    from traceparse.dtypes import Estimate, estimate_bytes
    from traceparse.loading import load, load_all
    from traceparse.profile_data import Profile

# Public name -> the module that defines it.
_LAZY = {
    "batch": "traceparse.batching",
    "Capture": "traceparse.capture",
    "profile": "traceparse.capture",
    "Estimate": "traceparse.dtypes",
    "estimate_bytes": "traceparse.dtypes",
    "load": "traceparse.loading",
    "load_all": "traceparse.loading",
    "Profile": "traceparse.profile_data",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'traceparse' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "Capture",
    "CaptureError",
    "CaptureNotFoundError",
    "CaptureTooLargeError",
    "CorruptCaptureError",
    "Estimate",
    "InputError",
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
