"""One model, one answer (issue 25): the same Keras model captured the four ways a user
can, each in a fresh process, gives its layer ``big`` 16 MiB of weights and 32 MiB
of Adam state at the peak, whether its variables were made before the capture
(named from the inventory at the start) or during it (named through
``analysis/variable_match.py``).

Slow: four TensorFlow processes. The model is the ``vars_inside`` fixture's
(``fixtures/make_fixtures.py``: ``VARS_BUILD``, ``VARS_FIT``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO
from helpers.variables import assert_big, roles_at_peak

from traceparse import load

sys.path.insert(0, str(FIXTURES))
from make_fixtures import VARS_BUILD, VARS_FIT, VARS_SCRIPT

if importlib.util.find_spec("tensorflow") is None:  # found, not imported: the captures are children
    pytest.skip("capturing needs TensorFlow", allow_module_level=True)

_PROFILE_AFTER_WARM_UP = (
    VARS_BUILD
    + VARS_FIT  # the warm-up: every variable exists before the capture
    + "import traceparse\n"
    + "with traceparse.profile(LOGDIR):\n"
    + textwrap.indent(VARS_FIT, "    ")
)
_MEMORY_CALLBACK = (
    VARS_BUILD
    + "from traceparse.integrations.keras import MemoryCallback\n"
    + "callback = MemoryCallback(LOGDIR, profile_batch=(3, 5))\n"
    + "model.fit(xs, ys, batch_size=16, epochs=1, verbose=0, callbacks=[callback])\n"
)
_INSIDE_PROFILE = (
    "import traceparse\n"
    + "with traceparse.profile(LOGDIR):\n"
    + textwrap.indent(VARS_BUILD + VARS_FIT, "    ")
)


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["TF_ENABLE_ONEDNN_OPTS"] = "1"  # the CPU allocator that records events
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _capture(way: str, logdir: Path) -> None:
    if way == "traceparse run":
        script = logdir.parent / "script.py"
        script.write_text(VARS_SCRIPT)
        cmd = [sys.executable, "-m", "traceparse", "run", "--logdir", str(logdir), str(script)]
    else:
        code = {
            "profile() after a warm-up": _PROFILE_AFTER_WARM_UP,
            "MemoryCallback(profile_batch=(3, 5))": _MEMORY_CALLBACK,
            "built and trained inside profile()": _INSIDE_PROFILE,
        }[way]
        cmd = [sys.executable, "-c", f"LOGDIR = {str(logdir)!r}\n" + code]
    proc = subprocess.run(
        cmd, env=_environment(), capture_output=True, text=True, timeout=600, cwd=logdir.parent
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize(
    "way",
    [
        "profile() after a warm-up",
        "MemoryCallback(profile_batch=(3, 5))",
        "traceparse run",
        "built and trained inside profile()",
    ],
)
def test_big_has_its_weights_and_optimizer_state(way: str, tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    _capture(way, logdir)
    prof = load(logdir)
    variables = prof.variables
    assert variables["at_stop"].all(), "the inventory is taken when the profiler stops"
    made_before = way in ("profile() after a warm-up", "MemoryCallback(profile_batch=(3, 5))")
    assert variables["at_start"].all() == made_before
    assert_big(roles_at_peak(prof))


def test_the_demo_names_its_hidden_kernel_as_a_weight(tmp_path: Path) -> None:
    """``traceparse demo`` builds its model inside the capture: the 8 MiB kernel of
    ``hidden`` ([16384, 128] float32) and its two Adam slots are named."""
    output = tmp_path / "demo"
    cmd = [sys.executable, "-m", "traceparse", "demo", "--steps", "2", "--output", str(output)]
    proc = subprocess.run(cmd, env=_environment(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    roles = roles_at_peak(load(output / "logs"))
    kernel = 16384 * 128 * 4
    assert roles[("hidden", "weight")] == kernel, roles
    assert roles[("hidden", "optimizer_state")] == 2 * kernel, roles
