"""Concepts the code used to write twice are written once: the copies that drifted
(issue 46) now read the one definition, and what drifted behaves as the rest."""

from __future__ import annotations

from traceparse.analysis import leaks
from traceparse.analysis.naming import KERAS3, OPTIMIZER_SCOPES, read_generation
from traceparse.analysis.naming.optimizers import (
    KERAS2_OPTIMIZERS,
    KERAS3_OPTIMIZERS,
    OPTIMIZER_NAMES,
)
from traceparse.analysis.predict import POOLED_BELOW
from traceparse.output import units
from traceparse.output.sentences import leak_reason
from traceparse.records import LeakVerdict
from traceparse.tables.sources import is_library_path, user_frame
from traceparse.tables.variables import CPU_POOL_BYTES
from traceparse.units import format_bytes


def test_a_keras3_lamb_optimizer_is_a_keras3_clue() -> None:
    # lamb was missing from the Keras 3 set the generation reader used.
    generation = read_generation([f"lamb/Mul_{i}" for i in range(4)])
    assert generation.name == KERAS3
    assert OPTIMIZER_SCOPES == KERAS3_OPTIMIZERS and "lamb" in OPTIMIZER_SCOPES
    # Every tf.keras class scopes in Keras 3 as its lower-case name (but the wrapper).
    assert {c.lower() for c in KERAS2_OPTIMIZERS} - {"lossscaleoptimizer"} <= set(OPTIMIZER_NAMES)


def test_bytes_read_the_same_in_core_and_output() -> None:
    assert units.format_bytes is format_bytes
    assert format_bytes(int(123.45 * 2**20)) == "123 MiB"  # core said "123.5 MiB"


def test_one_test_of_a_library_frame() -> None:
    assert is_library_path("/usr/lib/python3.11/site-packages/keras/src/layers/core.py")
    assert is_library_path("/usr/lib/python3.12/threading.py")
    assert not is_library_path("/home/me/project/train.py")
    frames = ["/home/me/train.py:10 main", "/x/site-packages/keras/fit.py:3 fit"]
    assert user_frame(frames) == frames[0]


def test_the_pool_limit_and_the_verdict_words_are_the_analyses() -> None:
    assert POOLED_BELOW == CPU_POOL_BYTES == 256 * 1024
    assert [str(v) for v in LeakVerdict][:4] == [
        leaks.GROWING,
        leaks.STABLE,
        leaks.TOO_FEW,
        leaks.NO_EVENTS,
    ]
    row = {"verdict": leaks.TOO_FEW, "steps": 1, "source": "marker"}
    assert leak_reason(row) is not None and "too few" in str(leak_reason(row))
