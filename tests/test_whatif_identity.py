"""What-ifs that change nothing predict the capture itself, and what a capture
does not do is not offered as a change (issue 50).

Asking for the optimizer the capture already trains with, or the precision it
already computes in, is no change: the prediction must be the captured peak to
the byte (the replay at the captured batch is the capture). An eager loop's
ops carry no optimizer scope, so its source record names the optimizer; a
forward-only program has no optimizer to change; a JAX program whose buffers
are bfloat16 is already 16-bit though its allocator events carry no dtype.
"""

from __future__ import annotations

import functools
import warnings

import pytest
from conftest import FIXTURES, run_traceparse

import traceparse
from traceparse.analysis.naming.optimizers import optimizer_of_frames
from traceparse.analysis.predict import Predictor
from traceparse.analysis.whatif import Change, candidates, facts_of, what_if
from traceparse.core.profile import predictor_of
from traceparse.errors import UsageError

SITE = ".venv/lib/python3.11/site-packages"


@functools.cache
def predictor(name: str) -> Predictor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return predictor_of(traceparse.load(FIXTURES / name), None)


def test_optimizer_of_frames() -> None:
    keras3 = [
        f"{SITE}/keras/src/optimizers/base_optimizer.py:462 apply_gradients",
        f"{SITE}/keras/src/optimizers/adam.py:104 update_step",
        f"{SITE}/keras/src/optimizers/adam.py:117 update_step",
    ]
    assert optimizer_of_frames(keras3) == "adam"
    tf_keras = [f"{SITE}/tf_keras/src/optimizers/legacy/rmsprop.py:200 _resource_apply_dense"]
    assert optimizer_of_frames(tf_keras) == "rmsprop"
    v2 = [f"{SITE}/keras/optimizers/optimizer_v2/adagrad.py:140 _resource_apply_sparse"]
    assert optimizer_of_frames(v2) == "adagrad"
    # The base class's frames, a user's file named like an optimizer: no optimizer named.
    assert optimizer_of_frames(keras3[:1]) is None
    assert optimizer_of_frames(["/home/me/adam.py:3 update_step"]) is None


@pytest.mark.parametrize(
    ("name", "optimizer"),
    [
        ("sources_tape", "adam"),  # eager GradientTape loop: named by its frames
        ("sources_tape_tf216", "adam"),
        ("keras_train", "adam"),  # fit: named by its ops' scopes
        ("layers_cnn_xla", "adam"),
        ("gpu_chess_32", "adam"),
    ],
)
def test_the_captured_optimizer_predicts_the_capture(name: str, optimizer: str) -> None:
    p = predictor(name)
    facts = facts_of(p)
    assert facts.optimizer == optimizer
    base, _ = p.point(p.batch)
    changed = what_if(p, Change(optimizer=optimizer))
    replayed, _ = changed.point(changed.batch)
    for key in p.rows:
        assert replayed.peak(key)[1] == base.peak(key)[1], key


def test_the_captured_precision_predicts_the_capture() -> None:
    p = predictor("whatif_cnn_bf16")
    assert facts_of(p).mixed
    base, _ = p.point(p.batch)
    changed = what_if(p, Change(precision="mixed_bfloat16"))
    replayed, _ = changed.point(changed.batch)
    for key in p.rows:
        assert replayed.peak(key)[1] == base.peak(key)[1], key


def test_each_candidate_once() -> None:
    for name in ("sources_tape", "keras_train", "jax08_conv", "xla_function"):
        found = candidates(facts_of(predictor(name)))
        assert len(found) == len({c.label() for c in found}), (name, [c.label() for c in found])


def test_a_forward_only_program_has_no_optimizer_to_change() -> None:
    """jax08_conv is one bfloat16 convolution, no training: the candidates go
    back to float32 and offer no optimizer, and asking for one is refused."""
    facts = facts_of(predictor("jax08_conv"))
    assert facts.mixed and not facts.trains
    labels = [c.label() for c in candidates(facts)]
    assert labels == ["float32"]
    with pytest.raises(UsageError, match="no training step"):
        what_if(predictor("jax08_conv"), Change(optimizer="sgd"))
    done = run_traceparse("predict", str(FIXTURES / "jax08_conv"), "--optimizer", "sgd")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no training step" in done.stderr
