"""The dashboard as a user gets it: traceparse pip-installed from a built wheel into a
fresh virtualenv, and a plain ``tensorboard --logdir`` finding it by its entry point.

The other dashboard tests run the checkout (the plugin passed to TensorBoard by
hand). Here nothing of the checkout is importable: the project's sources are
copied out, pip builds and installs them (the C extensions, the ES module in
``static/`` as package data, the ``tensorboard_plugins`` entry point in the
metadata), and TensorBoard starts the way its console script does
(``tensorboard.main:run_main``) in another directory. The new environment reuses
this one's installed packages (TensorBoard, pandas...) through a ``.pth`` file,
so nothing but the build backend is fetched; pip's cache (``make`` keeps it in
``.cache/pip``) usually has that. Without an index or a cache holding it the test
skips, except on CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.dashboard import (
    check_served_report,
    http_get,
    make_logdir,
    tensorboard,
)

pytest.importorskip("tensorboard.plugins.base_plugin")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
# What pip needs to build the project (pyproject.toml's package data included).
SOURCES = ("pyproject.toml", "setup.py", "README.md", "traceparse")
EPOCH = "1764547200"  # pins the report's "generated" line in both processes
# What TensorBoard's console script runs (its entry point, tensorboard.main:run_main).
CONSOLE_SCRIPT = "import sys; from tensorboard.main import run_main; sys.exit(run_main())"


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def _clean_env() -> dict[str, str]:
    """This environment without what would make the checkout importable."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _install(root: Path) -> Path:
    """A virtualenv under ``root`` with traceparse built and installed from a copy
    of the checkout's sources; this environment's packages visible through a .pth."""
    source = root / "src"
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(
                path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd")
            )
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = _bin(venv, "python")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # After the venv's own site-packages: the installed traceparse comes first.
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "host_packages.pth").write_text("\n".join(sorted(ours)) + "\n")
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-input", str(source)],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=root,
    )
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        if "setuptools" in out and (
            "No matching distribution" in out or "Could not find a version" in out
        ):
            message = "no index or pip cache holds the build backend (setuptools>=74.1)"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        raise AssertionError(f"pip install failed:\n{out[-4000:]}")
    return venv


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    root = tmp_path_factory.mktemp("installed")
    venv = _install(root)
    logs = make_logdir(root)
    away = root / "elsewhere"  # not the checkout: nothing of it on sys.path
    away.mkdir()
    command = [str(_bin(venv, "python")), "-c", CONSOLE_SCRIPT]
    env = _clean_env() | {"SOURCE_DATE_EPOCH": EPOCH}
    with tensorboard(logs, env, command=command, cwd=away) as base:
        yield venv, logs, base


def test_the_installed_copy_is_what_runs(installed: tuple[Path, Path, str]) -> None:
    """traceparse and its entry point come from the virtualenv, not the checkout."""
    venv, _logs, _base = installed
    probe = (
        "import json, traceparse, importlib.metadata as m\n"
        "points = [p for p in m.entry_points(group='tensorboard_plugins')"
        " if p.name == 'traceparse']\n"
        "print(json.dumps({'module': traceparse.__file__, 'points': [p.value for p in points],"
        " 'dist': str(points[0].dist._path) if points else None}))"
    )
    found = json.loads(
        subprocess.run(
            [str(_bin(venv, "python")), "-c", probe],
            check=True,
            capture_output=True,
            text=True,
            env=_clean_env(),
            cwd=venv,
        ).stdout
    )
    assert Path(found["module"]).resolve().is_relative_to(venv.resolve()), found
    assert found["points"] == ["traceparse.integrations.tensorboard.plugin:TraceparseLoader"]
    assert Path(found["dist"]).resolve().is_relative_to(venv.resolve()), found


def test_plain_tensorboard_lists_and_serves_the_dashboard(
    installed: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _venv, logs, base = installed
    status, body = http_get(base + "/data/plugins_listing")
    assert status == 200
    listing = json.loads(body)["traceparse"]
    assert listing["enabled"] is True
    assert listing["loading_mechanism"]["module_path"] == "/data/plugin/traceparse/index.js"
    # The ES module is package data: shipped in the wheel, served from the install.
    status, module = http_get(base + "/data/plugin/traceparse/index.js")
    assert status == 200 and b"export async function render" in module

    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    _run_dir, record = check_served_report(base, logs)
    assert json.loads(record)["profiles"][0]["summary"]
    for query in ("run=../../etc", "run=..%2F..%2Fetc", "run=%2Fetc%2Fpasswd"):
        for route in ("report", "record"):
            status, _ = http_get(f"{base}/data/plugin/traceparse/{route}?{query}")
            assert status == 404, (route, query)
    assert http_get(base + "/data/runs")[0] == 200  # TensorBoard's own routes answer
