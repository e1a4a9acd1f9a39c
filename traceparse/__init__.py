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

from traceparse.dtypes import Estimate, estimate_bytes
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
from traceparse.load import load, load_all
from traceparse.profile_data import Profile

# After the submodule import above, which binds the name `profile` to the module.
from traceparse.capture import Capture, profile  # isort: skip

# The function, not its package: `traceparse.batch(...)`; the package's other
# names are imported with `from traceparse.batch import ...`.
from traceparse.batch import batch  # isort: skip

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
