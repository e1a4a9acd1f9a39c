"""A check for capture tests: no test leaves TensorFlow's profiler running."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def no_profiler_left_running() -> Iterator[None]:
    """Imported by a capture test module, applies to each of its tests: after it,
    TensorFlow's profiler is stopped (so the next test can start one) and the
    test fails if it left it running."""
    yield
    if "tensorflow" in sys.modules:
        from tensorflow.python.profiler import profiler_v2

        running = profiler_v2._profiler is not None
        if running:
            profiler_v2.stop(save=False)
        assert not running, "a test left the TensorFlow profiler running"
