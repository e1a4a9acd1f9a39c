"""One spelling per meaning for unnamed things, in every output a person reads.

An allocation TensorFlow recorded no op for is "(no op recorded)"; an op in no
name scope is in "(top level)"; a tensor without a recorded shape counts as
"shape unknown", not as bytes requested beyond its shape.
"""

from __future__ import annotations

import re

import pytest
from conftest import run_traceparse
from helpers.trace import alloc, profile_of

import traceparse
from traceparse.output.units import format_bytes
from traceparse.report import write_report

MiB = 2**20
OTHER_SPELLINGS = re.compile(r"\(no scope\)|\(no op\)|>nan<|\bnan\b")


def outputs() -> dict[str, str]:
    """Every text form of keras_train (it has allocations without an op)."""
    texts = {}
    for args in (
        ("ops", "--top", "0"),
        ("scopes", "--top", "0"),
        ("allocations", "--top", "0"),
        ("summary",),
    ):
        result = run_traceparse(args[0], "fixtures/keras_train", *args[1:])
        assert result.returncode == 0, result.stderr
        texts[args[0]] = result.stdout
    diff = run_traceparse("diff", "fixtures/keras_train", "fixtures/eager_ops", "--by", "scope")
    assert diff.returncode == 0, diff.stderr
    texts["diff"] = diff.stdout
    prof = traceparse.load("fixtures/keras_train")
    texts["md"] = write_report([prof], "md")
    texts["html"] = write_report([prof], "html")
    return texts


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return outputs()


def test_no_other_spelling_of_unnamed_things(texts: dict[str, str]) -> None:
    for name, text in texts.items():
        assert not OTHER_SPELLINGS.search(text), (name, OTHER_SPELLINGS.search(text))


def test_the_same_spellings_everywhere(texts: dict[str, str]) -> None:
    prof = traceparse.load("fixtures/keras_train")
    assert prof.allocations["op"].isna().any()  # the fixture has what is tested
    for name in ("ops", "allocations", "diff"):
        assert "(no op recorded)" in texts[name], name
    for name in ("scopes", "summary", "diff", "md", "html"):
        assert "(top level)" in texts[name], name


def test_charts_and_tables_of_a_report_name_an_unnamed_op_the_same_way() -> None:
    pytest.importorskip("matplotlib")
    # An input converted from numpy records no op; here it is live at the peak.
    prof = profile_of([alloc(10, 1, 4 * MiB, op=None, shape=None), alloc(20, 2, MiB, op="a/b")])
    html = write_report([prof], "html")
    assert not OTHER_SPELLINGS.search(html)
    # The op and scope tables and both bar charts (SVG text) say it.
    assert html.count(">(no op recorded)<") >= 4, html.count(">(no op recorded)<")


def test_a_tensor_without_a_recorded_shape_is_shape_unknown(texts: dict[str, str]) -> None:
    prof = traceparse.load("fixtures/keras_train")
    live = prof.live_at_peak()
    no_shape = live[live["shape"].isna()]
    assert len(no_shape)  # the Adam slot initializer records no shape
    part = prof.attribution.iloc[0]
    requested = no_shape["requested_bytes"].fillna(no_shape["allocated_bytes"]).sum()
    assert part["shape_unknown_bytes"] == requested
    assert part["unexplained_request_bytes"] == 0
    lines = texts["summary"].splitlines()
    unknown = next(line for line in lines if line.startswith("shape unknown"))
    beyond = next(line for line in lines if line.startswith("requested beyond"))
    assert format_bytes(int(requested)) in unknown
    assert beyond.split()[-3:-1] == ["0", "B"], beyond
