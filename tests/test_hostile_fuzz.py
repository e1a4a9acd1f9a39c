"""The fuzz harness in the suite: real fixtures mutated, truncated and spliced, and
random bytes, through load, every analysis and the renderers. Only a
``TraceparseError`` naming the file may come out, within a time bound, and the
outputs stay safe (tests/fuzz/harness.py). The long run is tests/fuzz/run_fuzz.py."""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

import pytest
from fuzz.harness import exercise
from fuzz.mutations import KINDS, XPLANE, Case, Target, make_case, targets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Seconds one case may take: the largest fixture takes about 1 s, so this only
# catches a hang or a blow-up, not a slow machine.
TIME_BOUND = 30.0
# Small fixtures keep the in-suite run short; the long run uses all of them.
SMALL = tuple(t for t in targets() if len(t.data) < 40_000)


def run_case(case: Case, *, html: bool) -> str:
    with tempfile.TemporaryDirectory(prefix="traceparse-fuzz-") as tmp:
        path = Path(tmp) / f"h{case.suffix}"
        path.write_bytes(case.data)
        started = time.process_time()
        outcome = exercise(path, html=html)
        assert time.process_time() - started < TIME_BOUND
        return outcome


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(kind=st.sampled_from(KINDS), rng=st.randoms(use_true_random=False))
def test_mutated_fixtures_fail_cleanly_or_load(kind: str, rng: random.Random) -> None:
    run_case(make_case(rng, kind, SMALL), html=False)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_absurd_captures_render_safe_html(rng: random.Random) -> None:
    """Well-formed captures with absurd content reach every analysis and the HTML report."""
    run_case(make_case(rng, "absurd", SMALL), html=True)


@pytest.mark.parametrize("target", targets(), ids=lambda t: t.name.split("/")[0])
def test_every_truncation_of_every_fixture(target: Target, tmp_path: Path) -> None:
    """Cut at 40 places (and at every byte of the first 64): never more than a clean error."""
    data, suffix = target.encode(target.data), target.suffix
    path = tmp_path / f"h{suffix}"
    cuts = sorted({*range(min(64, len(data))), *range(0, len(data), max(1, len(data) // 40))})
    for cut in cuts:
        path.write_bytes(data[:cut])
        outcome = exercise(path, html=False)
        if suffix == XPLANE and cut == 0:
            assert outcome == "CorruptCaptureError"
