"""Issue 36 item 10: the small things a new user trips over."""

from __future__ import annotations

import re

import pytest
from conftest import FIXTURES
from helpers.space import SpaceBuilder, alloc, free

import traceparse
from traceparse.cli import app
from traceparse.gate.budgets import Contributor
from traceparse.output.cells import MAX_CELL_WIDTH
from traceparse.report.notebook import profile_html
from traceparse.report.view import before_capture_text


def test_an_argument_too_many_points_to_the_commands_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = app.main(["check", str(FIXTURES / "leak"), "--max-peak", "2", "GiB"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().endswith("(see 'traceparse check --help')"), err
    assert "unrecognized arguments: GiB" in err


def test_frees_of_earlier_memory_are_said_in_binary_units() -> None:
    b = SpaceBuilder()
    line = b.line()
    free(b, line, 100, addr=0xA, size=4_718_592, total=0)
    alloc(b, line, 200, addr=0xB, size=512, total=512)
    (note,) = [d for d in b.decode().diagnostics() if "frees release" in d]
    assert "(4.5 MiB)" in note and "bytes)" not in note


def test_a_notebook_cell_says_where_the_other_rows_are() -> None:
    html = profile_html(traceparse.load(FIXTURES / "batch_128"), 2)
    notes = re.findall(r"<small>(.*?)</small>", html)
    assert notes and not any("HTML report" in n for n in notes)
    assert any("<code>prof.ops</code> has them all" in n for n in notes), notes


def test_a_long_name_in_a_checks_line_is_capped() -> None:
    name = "scope/" + "x" * 100_000 + "/MatMul"
    text = str(Contributor(name, 4096, "new", signed=True))
    assert len(text) < MAX_CELL_WIDTH + 40 and text.endswith("/MatMul +4 KiB (new)")


def test_the_variables_line_says_the_small_ones_live_untraced() -> None:
    """keras_inventory: 6 weights, 2 of them (the 1 MiB kernels) traced; the 4 others
    (biases, the small logits kernel) live in the CPU pool that records nothing."""
    prof = traceparse.load(FIXTURES / "keras_inventory")
    (summary,) = prof.summary()
    split = summary.before_capture
    assert split is not None
    small = prof.variables[~prof.variables["traced"] & (prof.variables["role"] == "weight")]
    assert split["weight_variables"] == 2 and split["weight_untraced_variables"] == len(small) == 4
    assert split["weight_untraced_bytes"] == int(small["estimated_bytes"].sum())
    text = before_capture_text(split)  # the sentence the summary prints
    assert "2 MiB weights in 2 variables (and 4 under 256 KiB, 15 KiB, untraced)" in text
