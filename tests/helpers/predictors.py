"""A fixture's Predictor at the first batch size that makes one: the captured
batch where it can be read, else 8, 64 or 1 given (a capture without batch
evidence still predicts when told its batch)."""

from __future__ import annotations

from pathlib import Path

import pytest

import traceparse
from traceparse.analysis.predict import Predictor
from traceparse.errors import UsageError


def fixture_predictor(path: Path) -> tuple[traceparse.Profile, Predictor]:
    """The capture at ``path`` and its Predictor; skips a capture with no memory events."""
    profile = traceparse.load(path)
    if profile.timeline.empty:
        pytest.skip(f"{path.name}: no memory events")
    capture = profile._prediction_input
    for given in (None, 8, 64, 1):
        try:
            return profile, Predictor(capture, given)
        except UsageError:
            continue
    pytest.fail(f"{path.name}: no batch makes a Predictor")
