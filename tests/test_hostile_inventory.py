"""Crafted variable inventories (``<host>.variables.json``): a bad one is one
diagnostic, never a refused capture, never a wrapped sum, never a hang
(docs/robustness.md, "Variable inventories").

Each case is the real ``keras_inventory`` capture with its inventory replaced,
every case a run of one logdir; every command runs on them under the bounds of
``bounded.py`` (30 s, 4 GiB of address space, exit 0 or 3).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bounded import check_bounds, every_command, run_bounded
from conftest import FIXTURES

import traceparse
from traceparse.core.sidecars import INVENTORY
from traceparse.decode.limits import MAX_BYTES
from traceparse.decode.variables import MAX_INVENTORY_VARIABLES, InventoryProblem, decode_inventory

SOURCE = next((FIXTURES / "keras_inventory").rglob("*.xplane.pb")).parent
IGNORED = "the variable inventory was ignored"
HEAD = b'{"format":"traceparse.variables","version":1,"variables":'


def real_inventory() -> dict[str, Any]:
    return json.loads((SOURCE / "localhost.variables.json").read_text())


def with_sizes(*sizes: int) -> bytes:
    document = real_inventory()
    for variable, size in zip(document["variables"], sizes, strict=False):
        variable["estimated_bytes"] = size
    return json.dumps(document).encode()


def minimal(count: int) -> bytes:
    """``count`` of the smallest records the reader takes."""
    return HEAD + b"[" + b",".join([b'{"role":"weight","shape":[]}'] * count) + b"]}"


def link_to(target: str) -> Callable[[Path], None]:
    return lambda path: os.symlink(target, path)


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_directory(path: Path) -> None:
    path.mkdir()


def make_loop(path: Path) -> None:
    os.symlink(path.name, path)  # a link to itself


# Name -> the inventory's bytes, or a function that puts something at its path.
BAD: dict[str, bytes | Callable[[Path], None]] = {
    "nested 200k deep": HEAD + b"[" * 200_000 + b"]" * 200_000 + b"}",
    "a size of 10**30": with_sizes(10**30),
    "3 sizes of 2**62 (wrap below 0)": with_sizes(*[2**62] * 3),
    "8 sizes of 2**62 (wrap to 0)": with_sizes(*[2**62] * 8),
    "sizes that add up past 256 TiB": with_sizes(*[MAX_BYTES] * 2),
    "a negative size": with_sizes(-4096),
    "one variable too many": minimal(MAX_INVENTORY_VARIABLES + 1),
    "a byte past the size limit": HEAD + b"[]" + b" " * (INVENTORY.limit - len(HEAD)) + b"}",
    "a role of 1 MB": HEAD + b'[{"role":"' + b"\xe2\x80\xae" * 300_000 + b'","shape":[]}]}',
    "a FIFO": make_fifo,
    "a directory": make_directory,
    "a link loop": make_loop,
    "a link to /dev/zero": link_to("/dev/zero"),
}
GOOD: dict[str, bytes] = {
    "counters past any device": json.dumps(
        {
            **real_inventory(),
            "memory_info": {"start": {"/device:CPU:0": {"current": 10**30, "peak": -1}}},
        }
    ).encode(),
    "at the variable limit": minimal(MAX_INVENTORY_VARIABLES),
}


def make_logdir(root: Path, cases: dict[str, bytes | Callable[[Path], None]]) -> dict[str, Path]:
    """One run per case: the real capture beside the case's inventory."""
    runs = {}
    for i, (name, content) in enumerate(cases.items()):
        run = root / "plugins" / "profile" / f"2026_01_01_00_00_{i:02d}"
        run.mkdir(parents=True)
        shutil.copy(SOURCE / "localhost.xplane.pb", run)
        path = run / "localhost.variables.json"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            content(path)
        runs[name] = run
    return runs


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inventories")
    runs = make_logdir(root / "bad", BAD)
    runs.update(make_logdir(root / "good", GOOD))
    return runs


def test_every_command_is_bounded_and_each_bad_inventory_is_one_diagnostic(
    crafted: dict[str, Path], tmp_path: Path
) -> None:
    runs = list(crafted.values())
    results = run_bounded(every_command(runs, tmp_path), cwd=tmp_path)
    check_bounds(results, problems=0)
    assert all(r.code == 0 for r in results), [(r.argv, r.code) for r in results]
    summary = results[0].stdout
    for name in BAD:
        path = crafted[name] / "localhost.variables.json"
        lines = [line for line in summary.splitlines() if f"{path}: {IGNORED}" in line]
        assert len(lines) == 1, (name, lines)
        assert len(lines[0]) <= 1002, name  # a 1 MB value is not copied into the line
        assert "\u202e" not in lines[0]
    for name in GOOD:
        assert f"{crafted[name] / 'localhost.variables.json'}: {IGNORED}" not in summary, name
    # No wrapped sum anywhere: no negative size, and the reports too.
    for text in [summary, (tmp_path / "report.md").read_text()]:
        assert "−" not in text and "PiB" not in text and "EiB" not in text


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_inventory_leaves_the_capture_whole(crafted: dict[str, Path], name: str) -> None:
    profile = traceparse.load(crafted[name])
    assert profile.variables.empty
    reference = traceparse.load(SOURCE / "localhost.xplane.pb")
    assert profile.summary()[0].peak_bytes == reference.summary()[0].peak_bytes
    notes = [d for d in profile.diagnostics() if IGNORED in d]
    assert len(notes) == 1, profile.diagnostics()


def test_sizes_read_are_bounded_so_no_sum_wraps(crafted: dict[str, Path]) -> None:
    profile = traceparse.load(crafted["at the variable limit"])
    assert len(profile.variables) == MAX_INVENTORY_VARIABLES
    counters = traceparse.load(crafted["counters past any device"])
    sizes = counters.variables["estimated_bytes"]
    assert 0 < int(sizes.sum()) <= MAX_BYTES
    # Counters outside 0..MAX_BYTES are dropped, not kept to be summed.
    data = (crafted["counters past any device"] / "localhost.variables.json").read_bytes()
    inventory = decode_inventory(data, "h.variables.json")
    assert inventory.memory_info["start"]["/device:CPU:0"] == {}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (HEAD + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        (with_sizes(2**62, 2**62), "not a size from 0 to 256 TiB"),
        (with_sizes(MAX_BYTES, 1), "add up to"),
        (HEAD + b'[{"role":"' + b"x" * 10**6 + b'","shape":[]}]}', "has role 'xxx"),
    ],
)
def test_the_reason_is_short_and_says_what_is_wrong(data: bytes, reason: str) -> None:
    with pytest.raises(InventoryProblem) as info:
        decode_inventory(data, "h.variables.json")
    assert reason in str(info.value)
    assert len(str(info.value)) < 200
