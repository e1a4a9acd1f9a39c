"""``(null)`` and empty op names, as older runtimes write them on allocator events,
are no op: the allocation has no op recorded, in every table and output (issue 41, 4)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers.space import SpaceBuilder, alloc, free

import traceparse
from traceparse.cli import app

MiB = 1 << 20


def _capture(tmp_path: Path) -> Path:
    b = SpaceBuilder()
    line = b.line()
    ops = ["(null)", "", "dense/MatMul", "(null)"]
    total = 0
    for i, op in enumerate(ops):
        total += MiB
        alloc(b, line, 1000 * (i + 1), 0x1000 * (i + 1), MiB, total, tf_op=op)
    for i in range(len(ops)):
        total -= MiB
        free(b, line, 10_000 + 1000 * i, 0x1000 * (i + 1), MiB, total)
    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / "localhost.xplane.pb").write_bytes(b.space.SerializeToString())
    return tmp_path


def test_null_and_empty_op_names_are_no_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prof = traceparse.load(_capture(tmp_path))
    ops = prof.allocations.sort_values("alloc_ps")["op"].astype(object).tolist()
    assert [None if pd.isna(op) else op for op in ops] == [None, None, "dense/MatMul", None]
    assert "(null)" not in prof.allocations["op"].cat.categories
    assert "(null)" not in set(prof.ops["op"].astype(object).dropna())
    assert "(null)" not in set(prof.timeline["op"].astype(object).dropna())
    for command in (["ops"], ["peak"]):
        assert app.main([*command, str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "(null)" not in out
        assert "(no op recorded)" in out
