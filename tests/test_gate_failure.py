"""The table a test over budget fails with (the pytest plugin's message).

Its rows add up to the bytes in use it announces: bytes from before the
capture get a row of their own, the allocations left out are summed, and an
allocation TensorFlow named no op for reads "(no op recorded)", as everywhere.
"""

from __future__ import annotations

from helpers.trace import GPU, alloc, trace_of

from traceparse.core.profile import Profile
from traceparse.gate import Budgets, evaluate
from traceparse.gate.render import failure_message, top_tensors_lines
from traceparse.output.cells import NO_OP
from traceparse.output.units import parse_bytes

MiB = 2**20


def _profile() -> Profile:
    events = [
        alloc(10, 1, 8 * MiB, op="model/dense/MatMul"),
        alloc(20, 2, 6 * MiB, op=None, shape=None, dtype=None),
        alloc(30, 3, 2 * MiB, op="model/dense/BiasAdd"),
        alloc(40, 4, 2 * MiB, op="model/relu"),
    ]
    return Profile([trace_of(events, before={GPU: 4 * MiB})], run="r")


def _allocated(line: str) -> int:
    # The allocated column is the last size on the line (then the step, if any).
    words = line.split()
    last = [i for i, w in enumerate(words) if w in ("B", "KiB", "MiB", "GiB")][-1]
    return parse_bytes(words[last - 1] + words[last])


def test_the_rows_add_up_to_the_bytes_in_use() -> None:
    profile = _profile()
    (summary,) = profile.summary()
    lines = top_tensors_lines(profile, "host0", GPU, top=3)
    rows = lines[2:]
    assert rows[-1].startswith("  ... and 1 more allocations live at the peak (2 MiB)")
    table = rows[:-1]
    before = [r for r in table if "(allocated before the capture)" in r]
    assert len(before) == 1 and "before_capture" in before[0]
    total = sum(_allocated(r) for r in table) + 2 * MiB
    assert total == summary.peak_bytes
    ops = [r.split("  ")[1].strip() for r in table]
    assert NO_OP in ops and "-" not in ops


def test_the_failure_message_names_the_table() -> None:
    profile = _profile()
    results = evaluate(profile, Budgets.from_options(max_peak="1MiB"))
    text = failure_message("tests/test_x.py::test_y", results, profile, None)
    assert "1 of 1 budget breached" in text
    assert "(allocated before the capture)" in text and NO_OP in text
