"""Predictions from a capture that ran out of memory (``analysis/predict/failed.py``).

The captures: ``fixtures/oom_limit_256`` and ``oom_limit_128``, a Keras CNN fit
under a 300 MiB limit on TensorFlow's BFC allocator (the development family),
``oom_attention_512``, a self-attention model under the same limit (held out:
captured after the rules were written), from ``fixtures/make_oom_limit.py``;
and what every batch of each sweep really did (``fixtures/oom_limit.json``):
completed, or the request it failed at. The older ``oom_*`` fixtures ask 4 TiB.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, run_traceparse

import traceparse
from traceparse.analysis.predict import Predictor, capacity_fit
from traceparse.analysis.predict.failed import FailedRequest, ran_before

SWEEP = json.loads((FIXTURES / "oom_limit.json").read_text())
LIMIT = SWEEP["limit_bytes"]
# Each kept capture's family: its sweep's runs.
FAMILY = {
    run["fixture"]: family["runs"]
    for family in SWEEP["families"].values()
    for run in family["runs"].values()
    if "fixture" in run
}
GRANULE = 256


def predictor(name: str, from_batch: int | None = None) -> tuple[traceparse.Profile, Predictor]:
    profile = traceparse.load(FIXTURES / name)
    return profile, Predictor(profile._prediction_input, from_batch)


def demand_at_failure(profile: traceparse.Profile) -> int:
    """The counter at the failure plus the refused request rounded to the granule,
    read off ``Profile.failures`` (not the predictor)."""
    (failure,) = profile.failures()
    assert failure.in_use_bytes is not None and failure.requested_bytes is not None
    return failure.in_use_bytes + -(-failure.requested_bytes // GRANULE) * GRANULE


CAPTURES = [
    ("oom_limit_256", None),
    ("oom_limit_128", None),
    ("oom_attention_512", None),
    ("oom_run_graph", 256),
]


@pytest.mark.parametrize(("name", "given"), CAPTURES)
def test_the_batch_that_ran_out_of_memory_does_not_fit(name: str, given: int | None) -> None:
    profile, made = predictor(name, given)
    (key,) = made.failed
    row = made.at(made.batch).iloc[0]
    assert row["peak_at_failure"]
    assert row["predicted_peak_bytes"] == demand_at_failure(profile)
    assert row["low_bytes"] <= row["predicted_peak_bytes"] <= row["high_bytes"]
    fit = capacity_fit(made, key, LIMIT, made.batch)
    assert not fit.fits and fit.refused_here
    # Larger batches ask every request at least as large: none fits.
    assert fit.largest is None or fit.largest < made.batch
    assert fit.largest_possible is None or fit.largest_possible < made.batch


def test_by_the_bytes_in_use_the_refused_batch_fits_and_is_still_refused() -> None:
    # At 128 the allocator refused 64 MiB with 114 MiB of its 300 free: the
    # capture says so, whatever the counter does.
    profile, made = predictor("oom_limit_128")
    (key,) = made.failed
    fit = capacity_fit(made, key, LIMIT, 128)
    assert fit.peak_bytes < LIMIT and not fit.fits
    (failure,) = profile.failures()
    assert failure.shortfall_bytes == 0


def test_the_refused_request_is_sized_by_its_shape() -> None:
    _, made = predictor("oom_limit_256")
    (key,) = made.failed
    request = made.failed[key][0]
    assert request.shape == "[256,64,64,32]" and request.dtype == "float32"
    for batch in (64, 128, 256, 512):
        point, low, high = made.failed_chunks(batch)[key]
        assert point == batch * 64 * 64 * 32 * 4
        assert low <= point <= high < 2 * point
    # A request of no batch dimension (4 TiB of random numbers) is kept.
    _, fixed = predictor("oom_run_graph", 256)
    (other,) = fixed.failed
    assert fixed.failed_chunks(64)[other][0] == fixed.failed_chunks(256)[other][0] == 4 << 40


def _got_past(run: dict, made: Predictor, profile: traceparse.Profile) -> bool:
    """Whether a real run got past ``made``'s refused request: it completed, or it
    failed at an op the capture does not show before the refused moment (a later
    one in the step)."""
    if run["outcome"] == "completed":
        return True
    (key,) = made.failed
    request = made.failed[key][0]
    if run["failed_op"] == request.op:
        return False
    a = profile.allocations
    earlier = a["op"].astype(str).str.endswith(run["failed_op"]).to_numpy(dtype=bool)
    earlier &= a["alloc_event"].to_numpy(dtype=np.int64) < request.event
    return not earlier.any()


@pytest.mark.parametrize("name", ["oom_limit_256", "oom_limit_128", "oom_attention_512"])
def test_the_bounds_hold_on_every_real_run_of_the_sweep(name: str) -> None:
    """Every real batch at or under the sure answer got past the refused request,
    and every one that completed is at or under the possible one."""
    profile, made = predictor(name)
    (key,) = made.failed
    fit = capacity_fit(made, key, LIMIT, made.batch)
    assert fit.unseen_after_failure  # the refused op never ran before in any capture
    for batch, run in FAMILY[name].items():
        if fit.largest_sure is not None and int(batch) <= fit.largest_sure:
            assert _got_past(run, made, profile), (name, batch, run)
        if run["outcome"] == "completed":
            assert fit.largest_possible is not None and int(batch) <= fit.largest_possible


def test_the_sweep_is_what_the_fixtures_say() -> None:
    for name, runs in FAMILY.items():
        batch = name.rsplit("_", 1)[1]
        (failure,) = traceparse.load(FIXTURES / name).failures()
        assert runs[batch]["fixture"] == name and runs[batch]["failed_op"] == failure.op
        assert {r["outcome"] for r in runs.values()} == {"completed", "out of memory"}


def test_an_earlier_run_of_the_same_request_shows_what_follows() -> None:
    profile, made = predictor("oom_limit_128")
    a, ends = profile.allocations, profile._ends
    (key,) = made.failed
    moment = made.failed[key][0].event
    done = np.flatnonzero((ends >= 0) & (ends < moment) & a["shape"].notna().to_numpy())
    row = a.iloc[done[0]]

    def asked(shape: str) -> FailedRequest:
        return FailedRequest(
            str(key[0]), str(key[1]), moment, str(row["op"]), None, shape, "float32", 1
        )

    assert ran_before(a, asked(str(row["shape"])), ends)
    assert not ran_before(a, asked("[3,1,4,1,5]"), ends)
    assert not made.seen_past_failure


def test_a_change_is_another_program_the_refusal_does_not_bind() -> None:
    from traceparse.analysis.whatif import WhatIf, parse_change

    _, made = predictor("oom_limit_256")
    (key,) = made.failed
    changed = WhatIf.of(made, parse_change("mixed_bfloat16", None, None))
    assert made.refused_batch(key) == 256 and changed.refused_batch(key) is None
    assert not capacity_fit(changed, key, LIMIT, 128).refused_here


def test_the_command_says_what_failed_and_what_is_unseen() -> None:
    refused = run_traceparse("predict", str(FIXTURES / "oom_limit_256"), "--batch", "256")
    assert refused.returncode == 0, refused.stderr
    text = " ".join(refused.stdout.split())
    assert "the request the capture ended in, asked again: capped_1/conv_b_1/Relu" in text
    assert "Batch 256 does not fit: the capture ran out of memory at batch 256 (this one)" in text
    smaller = run_traceparse(
        "predict", str(FIXTURES / "oom_limit_256"), "--batch", "64", "--format", "json"
    )
    found = json.loads(smaller.stdout)
    (row,) = found["predictions"]
    assert row["failed_request_bytes"] == 64 * 64 * 64 * 32 * 4 and row["unseen_after_failure"]
    (fit,) = found["capacity"]
    assert fit["fits"] and not fit["refused_here"] and fit["unseen_after_failure"]


def test_a_capture_that_ended_well_has_no_failed_request() -> None:
    _, made = predictor("keras_train")
    row = made.at(made.batch).iloc[0]
    assert not made.failed and made.failed_sizing is None
    assert pd.isna(row["failed_request"]) and not row["peak_at_failure"]


def test_the_report_says_the_batch_ran_out_and_what_is_unseen() -> None:
    from traceparse.report.predict import record_prediction_caption

    profile = traceparse.load(FIXTURES / "oom_limit_256")
    ((_, entry),) = profile._report_predictions.items()
    assert entry["failed_request"].startswith("capped_1/conv_b_1/Relu")
    assert entry["unseen_after_failure"] and entry["largest_batch"] < 256
    caption = record_prediction_caption(entry)
    assert "ran out of memory at batch 256" in caption and "gets past the request" in caption


def test_a_mixed_policy_halves_the_refused_activation_and_no_optimizer_moves_it() -> None:
    from traceparse.analysis.whatif import WhatIf, parse_change

    _, made = predictor("oom_limit_256")
    (key,) = made.failed
    asked = made.failed_chunks(128)[key]
    mixed = WhatIf.of(made, parse_change("mixed_bfloat16", None, None)).failed_chunks(128)[key]
    sgd = WhatIf.of(made, parse_change(None, "sgd", None)).failed_chunks(128)[key]
    assert mixed[0] == asked[0] // 2 and mixed[2] == asked[2]  # high: kept float32
    assert sgd == asked
