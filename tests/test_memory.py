"""The pool NumPy's arrays come from inside traceparse's calls (``core/memory.py``,
``core/_pool.c``): it keeps what arrays hold, and the tables come out the same."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.compiled import expect_built

import traceparse
from traceparse.core import memory, profile

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # NumPy 1.x
    from numpy.core.multiarray import get_handler_name

FIXTURES = Path(__file__).parent.parent / "fixtures"
MiB = 1 << 20
OURS, NUMPYS = "traceparse_pool", "default_allocator"

built = pytest.mark.skipif(memory._pool is None, reason="the pool was not built")


@pytest.fixture(autouse=True)
def _pool_on() -> Iterator[None]:
    """On, whatever an earlier test in this process did: a command run in process
    turns it off (``cli/process.py``)."""
    with memory.use_pool(True):
        yield


@built
def test_arrays_come_from_the_pool_inside_a_scope_only() -> None:
    outside = np.ones(2 * MiB)
    with memory.pooled():
        assert get_handler_name() == OURS
        inside = np.ones(2 * MiB)
        with memory.pooled():
            assert get_handler_name() == OURS
        assert get_handler_name() == OURS  # an inner scope puts back the pool
    assert get_handler_name() == NUMPYS
    assert get_handler_name(inside) == OURS and get_handler_name(outside) == NUMPYS
    assert inside.sum() == 2 * MiB  # an array outlives its scope
    with memory.use_pool(False), memory.pooled():
        assert get_handler_name() == NUMPYS


@built
def test_freed_pages_go_to_the_next_arrays_and_back_to_the_kernel_at_the_end() -> None:
    start = memory.stats()
    with memory.pooled():
        big = np.arange(4 * MiB, dtype=np.int64)  # 32 MiB, fresh
        del big
        held = memory.stats()
        assert held["cached_bytes"] >= 32 * MiB and held["scopes"] >= 1
        small = np.full(2 * MiB, 7, dtype=np.int64)  # 16 MiB of them, split off
        zeros = np.zeros(MiB, dtype=np.int64)  # dirty pages: zeroed here
        grown = np.ones(6 * MiB, dtype=np.int64)  # the 8 MiB left, grown by 40
        after = memory.stats()
        assert (small == 7).all() and not zeros.any() and (grown == 1).all()
        assert after["reused_bytes"] - start["reused_bytes"] >= 32 * MiB
        assert after["fresh_bytes"] - start["fresh_bytes"] <= (32 + 40) * MiB + 4 * 4096
    assert memory.stats()["cached_bytes"] == 0  # the outermost scope unmapped it
    del small, zeros, grown  # freed outside any scope: unmapped at once
    assert memory.stats()["cached_bytes"] == 0


@built
def test_resize_keeps_contents_across_the_threshold() -> None:
    with memory.pooled():
        array = np.arange(1000, dtype=np.int64)  # from malloc
        array.resize(3 * MiB, refcheck=False)  # into the pool
        assert (array[:1000] == np.arange(1000)).all() and not array[1000:].any()
        array[:] = 5
        array.resize(10, refcheck=False)  # shrinks in place
        array.resize(5 * MiB, refcheck=False)  # out of its pages
        assert (array[:10] == 5).all() and not array[10:].any()


@built
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_many_arrays_made_and_freed_keep_their_contents(seed: int) -> None:
    """Random sizes about the threshold, freed in random order: every live array
    still holds what was written to it, and zeros are zeros."""
    rng = np.random.default_rng(seed)
    live: dict[int, tuple[np.ndarray, int]] = {}
    with memory.pooled():
        for step in range(400):
            if live and rng.random() < 0.45:
                del live[int(rng.choice(list(live)))]
                continue
            size = int(rng.integers(1, 3 * MiB) // 8)
            if rng.random() < 0.3:
                array, value = np.zeros(size, dtype=np.int64), 0
            else:
                array, value = np.full(size, step, dtype=np.int64), step
            live[step] = (array, value)
        for array, value in live.values():
            assert (array == value).all()


@built
def test_threads_each_in_their_own_scope() -> None:
    errors: list[str] = []

    def work(value: int) -> None:
        with memory.pooled():
            for _ in range(30):
                arrays = [np.full(MiB // 4 + value, value) for _ in range(4)]
                if any((a != value).any() for a in arrays):
                    errors.append(f"thread {value}: an array changed")
        if get_handler_name() != NUMPYS:
            errors.append(f"thread {value}: the pool outlived the scope")

    threads = [threading.Thread(target=work, args=(value,)) for value in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert memory.stats()["scopes"] == 0 and memory.stats()["cached_bytes"] == 0


@built
@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_starts_outside_the_scope() -> None:
    code = (
        "import os, numpy as np; from traceparse.core import memory\n"
        "with memory.pooled():\n"
        "    kept = np.ones(1 << 20); free = np.ones(1 << 20); del free\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        s = memory.stats(); del kept; t = memory.stats()\n"
        "        os._exit(0 if s['scopes'] == 0 and s['cached_bytes'] == t['cached_bytes'] == 0 "
        "else 1)\n"
        "    _, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status), memory.stats()['scopes'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0"]


def _tables(capture: str) -> list[object]:
    prof = traceparse.load(FIXTURES / capture)
    return [
        prof.allocations,
        prof.timeline,
        prof.peak,
        prof.steps,
        prof.ops,
        prof.scopes(2),
        prof.breakdown,
        prof.attribution,
        prof.live_at_peak(expand_xla=True),
        prof.layers(),
        prof.leaks().by_op,
        prof.summary(),
    ]


@built
@pytest.mark.parametrize("capture", ["keras_train", "layers_cnn_xla", "two_runs", "legacy"])
def test_every_array_from_the_pool_gives_the_same_tables(capture: str) -> None:
    """The fixtures' arrays are under 1 MiB: from 64 bytes up, nearly all of them
    come from the pool, split, grown and reused."""
    with memory.use_pool(False):
        expected = _tables(capture)
    before = memory.stats()
    with memory.pooling_from(64):
        got = _tables(capture)
    assert memory.stats()["reused_bytes"] > before["reused_bytes"]
    _same(got, expected)


def _same(got: object, want: object) -> None:
    if isinstance(got, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want)
    elif isinstance(got, pd.Series):
        pd.testing.assert_series_equal(got, want)
    elif isinstance(got, list | tuple):
        assert isinstance(want, list | tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    elif isinstance(got, dict):
        assert isinstance(want, dict) and list(got) == list(want)
        for key in got:
            _same(got[key], want[key])
    elif dataclasses.is_dataclass(got):
        for field in dataclasses.fields(got):
            _same(getattr(got, field.name), getattr(want, field.name))
    else:
        assert got == want or (got != got and want != want)  # NaN is NaN


@built
def test_profile_computes_its_tables_in_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, str] = {}

    def watch(name: str) -> None:
        real = getattr(profile, name)

        def call(*args: object, **kwargs: object) -> object:
            seen[name] = get_handler_name()
            return real(*args, **kwargs)

        monkeypatch.setattr(profile, name, call)

    for name in ("build_run_tables", "peak_table", "ops_table", "scopes_table", "layers_table"):
        watch(name)
    prof = traceparse.load(FIXTURES / "keras_train")
    prof.summary()
    prof.layers()
    assert seen == dict.fromkeys(seen, OURS) and len(seen) == 5
    assert get_handler_name() == NUMPYS


def test_off_by_the_environment() -> None:
    code = "from traceparse.core import memory; print(memory.available())"
    env = {**os.environ, "TRACEPARSE_NO_POOL": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "False"
    with memory.use_pool(False), memory.pooled():
        assert get_handler_name() == NUMPYS


def test_the_pool_is_built_where_a_compiler_is() -> None:
    expect_built(memory._pool, "traceparse/core/_pool.c", "TRACEPARSE_NO_POOL")
    assert memory.available()
