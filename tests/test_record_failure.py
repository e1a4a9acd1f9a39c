"""The failure section is built once, in the records (issue 46): every renderer
(Markdown, HTML, the JSON, the gate, the terminal) shows the same holders, cuts
the whole tables itself and says how many rows it left out."""

from __future__ import annotations

import io

from conftest import FIXTURES

import traceparse
from traceparse.analysis.failure import holders_at
from traceparse.gate.failure import out_of_memory_results
from traceparse.output.terminal import Terminal
from traceparse.records.failure import failure_sections
from traceparse.report.failure import failure_records, html_failure, markdown_failure

NAME = "oom_run_eager"  # six ops and two layers held the memory at its failure


def test_the_section_holds_every_row_largest_first() -> None:
    prof = traceparse.load(FIXTURES / NAME)
    (section,) = failure_sections(prof)
    f = section.failure
    rows = prof.breakdown_at(f.time_ps, f.host)
    for by, table in section.tables():
        whole = holders_at(rows, f, by)
        assert table.equals(whole), by
        assert list(table["bytes"]) == sorted(table["bytes"], reverse=True)
    layers = section.by_layer
    assert section.holders() == list(zip(layers["name"], layers["bytes"].astype(int), strict=True))


def test_a_healthy_capture_has_no_section() -> None:
    assert failure_sections(traceparse.load(FIXTURES / "keras_train")) == []
    assert failure_sections(object()) == []  # a stand-in without failures


def test_renderers_cut_and_say_how_many_they_left_out() -> None:
    prof = traceparse.load(FIXTURES / NAME)
    (section,) = failure_sections(prof)
    ops = len(section.by_op)
    assert ops > 2, "the fixture must have more op rows than the cut below"
    md = "\n".join(markdown_failure(prof, top=2))
    assert f"_2 of {ops} rows; the JSON report has all._" in md
    html = html_failure(prof, top=2)
    assert f"2 of {ops} rows; the JSON report has all." in html
    # Uncut: no such line.
    assert "rows; the JSON report has all" not in "\n".join(markdown_failure(prof, top=ops))
    assert "rows; the JSON report has all" not in html_failure(prof, top=ops)
    # The JSON has every row.
    (record,) = failure_records(prof)
    assert len(record["by_op"]) == ops and len(record["by_layer"]) == len(section.by_layer)


def test_the_terminal_says_how_many_rows_it_left_out() -> None:
    from traceparse.cli._failure_view import print_failure_detail

    prof = traceparse.load(FIXTURES / NAME)
    (section,) = failure_sections(prof)
    out = io.StringIO()
    term = Terminal(stream=out, width=120, color=False)
    assert print_failure_detail(prof, term, top=1)
    assert f"{len(section.by_op) - 1} more rows (--top 0 shows all)" in out.getvalue()


def test_the_gate_names_the_sections_holders() -> None:
    prof = traceparse.load(FIXTURES / NAME)
    (section,) = failure_sections(prof)
    (result,) = out_of_memory_results(prof)
    named = [(c.name, c.bytes) for c in result.contributors]
    assert named == section.holders()[: len(named)] and named
