"""MemoryCallback (traceparse.integrations.keras) and `traceparse run`'s step markers, with TF.

Each test trains a small Keras model on CPU; the Dense kernel is 1 MiB (only
allocations of 256 KiB or more reach the allocator that records events).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO

from traceparse.errors import BudgetExceededError, UsageError

MiB = 1 << 20


@pytest.fixture(scope="module")
def tf() -> ModuleType:
    return pytest.importorskip("tensorflow", reason="capturing needs TensorFlow")


@pytest.fixture(autouse=True)
def _no_profiler_left_running() -> Iterator[None]:
    yield
    if "tensorflow" in sys.modules:
        # The models made here must not stay alive into later tests in this process
        # (the pytest plugin's tests measure a peak that they would raise).
        sys.modules["tensorflow"].keras.backend.clear_session()
        gc.collect()
        from tensorflow.python.profiler import profiler_v2

        running = profiler_v2._profiler is not None
        if running:
            profiler_v2.stop(save=False)
        assert not running, "a test left the TensorFlow profiler running"


def _model(tf: ModuleType) -> tuple[Any, Any, Any]:
    import numpy as np

    keras = tf.keras
    keras.utils.set_random_seed(0)
    inp = keras.Input((256,), name="features")
    x = keras.layers.Dense(1024, activation="relu", name="wide")(inp)
    out = keras.layers.Dense(4, name="head")(x)
    model = keras.Model(inp, out, name="small")
    model.compile(optimizer="adam", loss="mse")
    xs = np.ones((32 * 4, 256), "float32")
    ys = np.zeros((32 * 4, 4), "float32")
    return model, xs, ys


def test_memory_callback_profiles_the_range_reports_and_checks(
    tmp_path: Path, tf: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    from traceparse.integrations.keras import MemoryCallback

    model, xs, ys = _model(tf)
    report = tmp_path / "memory.md"
    callback = MemoryCallback(
        tmp_path / "logs",
        profile_batch=(2, 3),
        report=report,
        max_peak="1KiB",
        fail_on_breach=False,
    )
    model.fit(xs, ys, batch_size=32, epochs=1, callbacks=[callback], verbose=0)

    assert callback.capture is not None and callback.capture.stopped
    assert any(f.name.endswith(".variables.json") for f in callback.capture.files)
    prof = callback.load()
    assert sorted(prof.step_markers["step"].tolist()) == [2, 3]
    roles = prof.variables.groupby("role", observed=True)["estimated_bytes"].sum()
    assert roles["optimizer"] >= 2 * MiB and roles["weight"] >= MiB
    assert "wide/kernel" in set(prof.variables["path"])
    assert report.is_file() and "Largest variables alive before the capture" in report.read_text()
    assert [r.budget for r in callback.results if r.failed] == ["max-peak"]
    assert "traceparse: max-peak" in capsys.readouterr().err

    # A breach with fail_on_breach (the default) stops fit when the range ends.
    strict = MemoryCallback(tmp_path / "strict", profile_batch=1, max_peak="1KiB")
    with pytest.raises(BudgetExceededError, match="breached"):
        model.fit(xs, ys, batch_size=32, epochs=1, callbacks=[strict], verbose=0)
    assert strict.capture is not None and strict.capture.stopped


def _raising(tf: ModuleType, at: int, error: BaseException) -> Any:
    """A callback that raises ``error`` at the start of batch ``at`` (counted from 1)."""

    class Raise(tf.keras.callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if batch + 1 == at:
                raise error

    return Raise()


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_an_exception_inside_the_range_stops_the_profiler_and_keeps_the_capture(
    tmp_path: Path, tf: ModuleType, error: BaseException
) -> None:
    from traceparse.capture import profile
    from traceparse.integrations.keras import MemoryCallback

    model, xs, ys = _model(tf)
    callback = MemoryCallback(tmp_path / "logs", profile_batch=(2, 4))
    raising = _raising(tf, 3, type(error)())
    with pytest.raises(type(error)) as caught:
        model.fit(xs, ys, batch_size=32, callbacks=[callback, raising], verbose=0)
    assert callback.capture is not None
    # While the traceback (and so fit's frame) is held, the next capture still starts:
    # it stops the one fit left running first.
    with profile(tmp_path / "next", inventory=False):
        pass
    assert callback.capture.stopped and callback.capture.run_dir is not None
    assert any(f.name.endswith(".xplane.pb") for f in callback.capture.files)
    del caught

    # Once the exception is dropped, fit's callbacks go (Keras' traceback filter
    # leaves a cycle: the collector frees it), and the profiler stops then.
    again = MemoryCallback(tmp_path / "again", profile_batch=(2, 4))
    with pytest.warns(RuntimeWarning, match="capture kept in"):
        try:
            model.fit(xs, ys, batch_size=32, callbacks=[again, _raising(tf, 3, type(error)())])
        except type(error):
            pass
        gc.collect()
    assert again.capture is not None and again.capture.stopped


def test_a_report_that_cannot_be_written_warns_and_training_goes_on(
    tmp_path: Path, tf: ModuleType
) -> None:
    from traceparse.integrations.keras import MemoryCallback

    model, xs, ys = _model(tf)
    report = tmp_path / "memory.md"
    report.mkdir()  # a directory where the report should go
    callback = MemoryCallback(tmp_path / "logs", profile_batch=(1, 2), report=report)
    with pytest.warns(RuntimeWarning, match="could not be written.*the capture is in"):
        history = model.fit(xs, ys, batch_size=32, callbacks=[callback], verbose=0)
    assert len(history.history["loss"]) == 1  # the epoch ran to its end
    assert callback.capture is not None and callback.capture.run_dir is not None


@pytest.mark.parametrize("bad", [(3, 2), (-1, 2), "a,b", (1, 2, 3), 1.5])
def test_bad_profile_batch_is_a_usage_error(tmp_path: Path, bad: Any, tf: ModuleType) -> None:
    from traceparse.integrations.keras import MemoryCallback

    with pytest.raises(UsageError, match="profile_batch"):
        MemoryCallback(tmp_path, profile_batch=bad)


def test_bad_report_suffix_is_a_usage_error(tmp_path: Path, tf: ModuleType) -> None:
    from traceparse.integrations.keras import MemoryCallback

    with pytest.raises(UsageError, match=r"\.md, \.html or \.json"):
        MemoryCallback(tmp_path, report=tmp_path / "report.txt")


FIT_SCRIPT = """\
import numpy as np
import keras

inp = keras.Input((256,))
model = keras.Model(inp, keras.layers.Dense(1024, name="wide")(inp))
model.compile(optimizer="adam", loss="mse")
xs, ys = np.ones((96, 256), "float32"), np.zeros((96, 1024), "float32")
model.fit(xs, ys, batch_size=32, epochs=1, verbose=0)   # 3 batches
model.fit(xs, ys, batch_size=32, epochs=1, verbose=0, callbacks=[])  # 3 more
"""


def test_run_marks_fit_batches_as_steps(tmp_path: Path, tf: ModuleType) -> None:
    import keras

    from traceparse.capture.script import run_script

    script = tmp_path / "train.py"
    script.write_text(FIT_SCRIPT)
    original = keras.Model.fit
    result = run_script(script, logdir=tmp_path / "logs")
    assert result.exit_code == 0
    assert keras.Model.fit is original  # put back after the run
    prof = result.capture.load()
    # Step numbers go on across the two fit calls.
    assert sorted(prof.step_markers["step"].tolist()) == [1, 2, 3, 4, 5, 6]
    assert len(prof.variables) and "wide/kernel" in set(prof.variables["path"])
    # So `traceparse check --no-leaks` judges the leak budget instead of skipping it.
    from traceparse.gate.budgets import Budgets, evaluate

    (leak,) = evaluate(prof, Budgets(no_leaks=True))
    assert leak.status in ("pass", "fail"), leak.message


def test_import_traceparse_imports_neither_tensorflow_nor_keras() -> None:
    code = (
        "import sys, traceparse\n"
        "traceparse.profile('unused'); traceparse.load\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr


def test_profile_around_fit_marks_each_batch_as_a_step(tmp_path: Path, tf: ModuleType) -> None:
    """Issue 48: ``traceparse.profile()`` around ``fit`` for 3 epochs of 5 batches
    gives 15 steps (validation batches are not steps), ``evaluate`` on its own
    marks its batches too, and ``fit`` is put back when the capture stops."""
    import keras
    import numpy as np

    import traceparse

    inp = keras.Input((256,))
    model = keras.Model(inp, keras.layers.Dense(1024, name="wide")(inp))
    model.compile(optimizer="adam", loss="mse")
    xs, ys = np.ones((160, 256), "float32"), np.zeros((160, 1024), "float32")
    original = keras.Model.fit
    with traceparse.profile(tmp_path / "logs") as cap:
        model.fit(xs, ys, batch_size=32, epochs=3, verbose=0, validation_data=(xs[:64], ys[:64]))
    assert keras.Model.fit is original
    prof = cap.load()
    assert sorted(prof.step_markers["step"].tolist()) == list(range(1, 16))
    assert prof.leaks().allocators["judged_steps"].max() >= 2
    with traceparse.profile(tmp_path / "eval") as cap:
        model.evaluate(xs, ys, batch_size=32, verbose=0)
    assert sorted(cap.load().step_markers["step"].tolist()) == [1, 2, 3, 4, 5]
