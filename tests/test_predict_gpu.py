"""Profile.predict on public GPU captures (issue 47): the development set's goals.

The cases are ``benchmarks/predict_protocol.py``'s development set, taken from it
so the two cannot drift: on ``fixtures/gpu_*`` of set ``dev`` (an AlexNet-style
CNN on a V100, a chess CNN on an RTX 2060; ``PROVENANCE.md`` in each), every
ordered pair of batch sizes within 4x from one capture, and every size from two
others. The tolerances are issue 47's goals, not measured errors: the median
prediction within 10% of the median real peak from one capture and 5% from two,
every real run inside every prediction's bounds, the median bounds width at most
2x. Cases that miss on the rules of this commit are marked ``xfail(strict=True)``
with the error measured then, so each starts failing the moment it passes: drop
its mark then. The test set (``set`` ``test``) is held out and has no test here.
"""

from __future__ import annotations

import statistics
import sys
from functools import cache
from typing import Any

import pytest
from conftest import FIXTURES, REPO

import traceparse
from traceparse.errors import UsageError

sys.path.insert(0, str(REPO / "benchmarks"))

from predict_protocol import (
    DEV_GPU,
    GOAL_ONE,
    GOAL_TWO,
    NO_BATCH,
    WIDTH,
    fixture_groups,
    gpu_cases,
    known_batches,
    measure,
)

CASES = {
    f"{c.group}:{c.source}{f'+{c.other}' if c.other else ''}->{c.target}": c
    for c in gpu_cases(fixture_groups(DEV_GPU), two=True)
}


def _miss(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"{reason} on current rules: issue 47")


# Measured on this commit's rules (evidence-weighed batch, per-example cuDNN
# workspaces with Winograd filter transforms fixed, two-capture fits matching
# Keras' auto-numbered scopes, flattened tensors only where a reshape's element
# count fits, the allocator's regions grown on demand where the capture shows
# a whole region). What every point miss shares: the bytes each run held before its
# capture (a notebook's earlier cells and earlier models, 50 to 296 MiB) and the
# BFC allocator's slack at the peak (11% to 21% of the requests on the AlexNet
# runs) differ run to run with the process's history, and no rule can know the
# target run's (benchmarks/PREDICT_GPU_SPREAD.md); the growth during the capture
# is within 10% (one capture) and 6% (two) on the AlexNet cases
# (benchmarks/PREDICT_PROTOCOL.md, "growth error"; tested below).
POINT_MISSES = {
    "alexnet_v100:64->16": "-18.1%",
    "alexnet_v100:64->128": "+14.3%",
    "alexnet_v100:128->64": "-16.2%",
    "alexnet_v100:64+128->16": "-18.1%",
    "alexnet_v100:128+16->64": "-14.1%",
    "alexnet_v100:64+16->128": "+14.2%",
    "chess:64->32": "-11.8%",
}
# The growth during the capture (each prediction less what its input held before
# its capture, against the real peaks less what their runs held): the part of the
# peak the batch decides. The chess CNN's two runs at 32 grew 2.0 and 1.3 MiB
# (other cuDNN algorithms, 0.7 and 0.1 MiB of slack at their peaks); the
# prediction from 64 is 1.3.
GROWTH_MISSES = {
    "alexnet_v100:64+128->16": "growth -5.5%",
    "chess:64->32": "growth -18.8%",
}
BOUNDS_MISSES: dict[str, str] = {}
WIDTH_MISS = "median width 2.29x"
# Captures whose known batch is read wrong today (MANIFEST batch_size: the global batch).
BATCH_MISSES: dict[str, str] = {}
NO_BATCH_MISSES: dict[str, str] = {}


@cache
def result(name: str) -> dict[str, Any]:
    return measure(CASES[name])


def _params(misses: dict[str, str]) -> list[Any]:
    return [pytest.param(n, marks=_miss(misses[n]) if n in misses else ()) for n in CASES]


def test_the_development_set_is_there() -> None:
    """Both models, both kinds of case, every run of each committed fixture."""
    assert {c.group for c in CASES.values()} == {"alexnet_v100", "chess"}
    assert any(c.other for c in CASES.values()) and any(not c.other for c in CASES.values())
    for case in CASES.values():
        assert case.runs_from and case.runs_to and (case.other is None or case.runs_other)
        assert case.goal == (GOAL_TWO if case.other else GOAL_ONE)


@pytest.mark.parametrize("name", _params(POINT_MISSES))
def test_the_point_is_within_the_goal_of_the_median_real_peak(name: str) -> None:
    r = result(name)
    assert r["preds"], r["failed"]
    assert abs(r["median_error"]) <= CASES[name].goal, (r["median_error"], r["preds"], r["real"])


@pytest.mark.parametrize("name", _params(GROWTH_MISSES))
def test_the_growth_is_within_the_goal(name: str) -> None:
    """The point less the bytes held before the capture, which differ run to run
    with the process's earlier work and which the batch does not decide, against
    the goal of the point."""
    r = result(name)
    assert r["preds"], r["failed"]
    assert abs(r["growth_error"]) <= CASES[name].goal, (r["growth_error"], r["preds"])


@pytest.mark.parametrize("name", _params(BOUNDS_MISSES))
def test_every_real_run_is_inside_the_bounds(name: str) -> None:
    r = result(name)
    assert r["preds"], r["failed"]
    assert r["in_bounds"] == r["pairs"], (r["lows"], r["highs"], r["real"])


@_miss(WIDTH_MISS)
def test_the_bounds_stay_useful() -> None:
    widths = [result(n)["width"] for n in CASES]
    assert statistics.median(widths) <= WIDTH, widths


def _read(path: str, known: int) -> set[int] | None:
    """The batch ``predict`` reads off a capture; None when it refuses with the
    message that asks for ``--from-batch``."""
    try:
        table = traceparse.load(FIXTURES / path).predict(known)
    except UsageError as exc:
        assert "--from-batch" in str(exc)
        return None
    return {int(b) for b in table["found_batch"]}


@pytest.mark.parametrize(
    ("path", "known"),
    [
        pytest.param(
            p,
            b,
            id=p.split("/")[0] + ":" + p.split("/")[-2],
            marks=_miss(BATCH_MISSES[p.split("/")[0]]) if p.split("/")[0] in BATCH_MISSES else (),
        )
        for p, b in known_batches()
    ],
)
def test_the_batch_is_read_right_or_refused(path: str, known: int) -> None:
    """Every committed capture with a batch size known independently of the predictor
    (the GPU fixtures' input tensors, MANIFEST ``batch_size``,
    ``fixtures/predict_fixtures.json``)."""
    read = _read(path, known)
    assert read is None or read == {known}, read


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=_miss(NO_BATCH_MISSES[n]) if n in NO_BATCH_MISSES else ())
        for n in NO_BATCH
    ],
)
def test_a_capture_without_batch_evidence_is_refused(name: str) -> None:
    """Nothing in ``fixtures/leak`` grows with a batch: no batch may be assumed."""
    with pytest.raises(UsageError, match="--from-batch"):
        traceparse.load(FIXTURES / name).predict(64)


def test_the_gpu_fixtures_batch_sizes_are_their_inputs() -> None:
    """The known batch of each development fixture is the leading dimension of its
    step's highest-rank input tensor (the images or boards copied to the GPU), read
    back from every run (not from the predictor)."""
    for group in DEV_GPU.values():
        for batch, name in group.items():
            for run in sorted((FIXTURES / name).rglob("*.xplane.pb")):
                allocations = traceparse.load(run).allocations
                shapes = allocations.loc[
                    allocations["op"].astype(str) == "SameWorkerRecvDone", "shape"
                ].astype(str)
                rank = shapes.str.count(",")
                leads = {s.strip("[]").split(",")[0] for s in shapes[rank == rank.max()]}
                assert leads == {str(batch)}, (run, sorted(set(shapes)))
