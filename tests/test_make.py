"""``make test`` changes nothing outside the checkout.

Three checks: every command ``make -n test`` would run installs only into the
project's own virtualenvs (no system package manager, no ``sudo``, no
``pip --user``, no absolute paths written); the caches tools keep in $HOME
go under the checkout's .cache/; and the ``browser`` target, run
for real on a machine without Chromium (an empty PATH), as a user who cannot
write outside (nobody, when the tests run as root), succeeds, writes nothing
and says how to run the browser tests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")

# Commands that change a machine outside a project.
_SYSTEM = re.compile(
    r"(^|[\s;&|(])(sudo|su|apt-get|apt|dpkg|yum|dnf|apk|brew|snap|port|pacman|zypper)\s"
    r"|pip[0-9.]*\s+install\s+[^;&|]*--user|npm\s+(install|i)\s+[^;&|]*-g\b"
)


def _dry_run() -> list[str]:
    done = subprocess.run(
        [str(MAKE), "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def test_make_test_installs_only_into_the_checkout() -> None:
    commands = _dry_run()
    assert any("pytest" in c for c in commands), commands  # it is the test command
    # Quoted text (a hint the target prints) is not a command.
    unquoted = [re.sub(r'"[^"]*"' + r"|'[^']*'", '""', c) for c in commands]
    assert not [c for c in unquoted if _SYSTEM.search(c)]
    assert _SYSTEM.search("apt-get install -y chromium")  # the check can fail
    for command in commands:
        if re.search(r"\bpip\b.*\binstall\b", command):
            runner = command.split()[0]
            assert runner.startswith((".venv/", ".venv-compat/")), command
        if command.startswith(("rm ", "touch ", "mkdir ")):
            paths = [w for w in command.split()[1:] if not w.startswith("-")]
            assert all(not os.path.isabs(p) and ".." not in p for p in paths), command


def test_caches_stay_in_the_checkout() -> None:
    """pip's, matplotlib's, Keras' and XDG caches go under .cache/ in the checkout."""
    names = ["PIP_CACHE_DIR", "XDG_CACHE_HOME", "MPLCONFIGDIR", "KERAS_HOME"]
    show = "show:\n\t@echo " + " ".join(f"$${n}" for n in names) + "\n"
    done = subprocess.run(
        [str(MAKE), "-s", "-f", "Makefile", "-f", "-", "show"],
        cwd=REPO,
        input=show,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k not in names},
    )
    assert done.returncode == 0, done.stderr
    paths = done.stdout.split()
    assert len(paths) == len(names)
    assert all(Path(p).is_relative_to(REPO) for p in paths), paths


def _as_nobody() -> None:
    os.setgid(65534)
    os.setuid(65534)


def test_the_browser_target_without_chromium_writes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "bin"  # a PATH where no Chromium can be found
    empty.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": str(empty), "HOME": str(home), "LANG": "C.UTF-8"}
    before = _status()
    drop = None
    if os.geteuid() == 0:
        if os.stat(REPO / "Makefile").st_mode & 0o004 == 0 or not _readable_by_all(REPO):
            pytest.skip("the checkout is not readable by nobody")
        os.chmod(tmp_path, 0o755)
        drop = _as_nobody
    done = subprocess.run(
        [str(MAKE), "-s", "browser"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=drop,
    )
    assert done.returncode == 0, done.stderr
    assert "no Chromium found" in done.stdout and "TRACEPARSE_CHROMIUM" in done.stdout
    assert "apt-get install chromium" in done.stdout  # a hint, never run
    assert list(home.iterdir()) == [] and list(empty.iterdir()) == []
    assert _status() == before


def _readable_by_all(path: Path) -> bool:
    return all(os.stat(part).st_mode & 0o005 == 0o005 for part in [path, *path.parents])


def _status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
