"""Issue 52, the HTML report's display: a card's headline is a figure (its sentence
is body text), and the largest tensors' Source shows without scrolling sideways."""

from __future__ import annotations

import re

import pytest

from traceparse import load
from traceparse.report import render_html

FIXTURES = "fixtures"


def _card(page: str, label: str) -> tuple[str, str]:
    match = re.search(
        rf'<div class="card[^"]*"><div class="label">{re.escape(label)}</div>'
        r'<div class="value">(.*?)</div>(?:<div class="detail">(.*?)</div>)?</div>',
        page,
    )
    assert match, label
    return match.group(1), match.group(2) or ""


def test_the_variables_card_heads_with_a_figure_and_says_the_sentence_below() -> None:
    page = render_html([load(f"{FIXTURES}/sources_fit")])
    value, detail = _card(page, "Variables at the peak")
    # Was the whole 60-word sentence in the 20px headline font.
    assert re.fullmatch(r"[\d.]+ (?:B|KiB|MiB|GiB)", value), value
    assert value == "9 MiB"  # 3 MiB weights + 6 MiB Adam state, as the sentence says
    assert "3 MiB weights in 2 variables" in detail and "6 MiB Adam state" in detail


def test_the_before_the_capture_card_counts_the_unnamed_bytes_too() -> None:
    page = render_html([load(f"{FIXTURES}/keras_inventory")])
    value, detail = _card(page, "Before the capture")
    assert value == "6 MiB" and "0 B not named" in detail


# -- batch's summary.md: code spans render, hostile names stay escaped ----------


def _summary_md(message: str, status: str = "out_of_memory") -> str:
    from traceparse.batching.summary import render_markdown, summary_frame

    row = {"path": "/x/localhost.xplane.pb", "host": "localhost", "status": status}
    return render_markdown(summary_frame([{**row, "message": message}]))


def test_batch_summary_shows_quoted_names_as_code() -> None:
    # What output.failure writes (plain_code quotes names in backticks).
    sentence = (
        "Out of memory at step 3: `RandomUniform` asked `mklcpu` for 4 TiB "
        "(`[1048576,1048576]` float32); 6.5 MiB were in use of 23.5 GiB."
    )
    markdown = _summary_md(sentence)
    # Was \`RandomUniform\`: the backticks shown with their backslashes.
    assert "\\`" not in markdown
    assert (
        "Out of memory at step 3: `RandomUniform` asked `mklcpu` for 4 TiB "
        "(`[1048576,1048576]` float32); 6.5 MiB were in use of 23.5 GiB." in markdown
    )


@pytest.mark.parametrize(
    "name",
    ["a|b", "<img src=x onerror=alert(1)>", "x`y", "**bold**", "[l](http://e)", "``"],
)
def test_batch_summary_keeps_hostile_names_escaped(name: str) -> None:
    from traceparse.report.markdown import md_sentence

    sentence = f"Out of memory: `{name}` asked `GPU_0_bfc` for 1 MiB | *x* <b>"
    text = md_sentence(sentence)
    row = _summary_md(sentence).split("\n")[-2]
    assert row.count("|") - row.count("\\|") == 3  # the table's own pipes only
    assert "<img" not in text.replace("`<img", "") and "<b>" not in text
    assert "*x*" not in text and "\\*x\\*" in text


# -- an out-of-memory report: the text and the chart name the same steps --------


@pytest.mark.parametrize("name", ["oom_profile_graph", "oom_run_eager", "oom_callback_eager"])
def test_the_chart_names_the_peak_step_the_text_names(name: str) -> None:
    # oom_profile_graph peaks at 2.25 s, inside step 2 (a 27 ms band, too narrow to
    # see); the chart showed the peak against step 3's band, where the program ran
    # out of memory at 12.28 s, and said neither step.
    prof = load(f"{FIXTURES}/{name}")
    (summary,) = prof.summary()
    (failure,) = prof.failures()
    page = render_html([prof])
    steps = dict(prof.steps[["step", "start_ps"]].itertuples(index=False))
    peak_step = int(summary.peak_step)
    assert steps and peak_step in steps
    assert f"step {peak_step}; leak check" in page  # the headline
    timeline = page[page.index('id="timeline-') :].split("</svg>")[0]
    assert re.search(rf"peak [\d.]+ [KMG]?i?B at [\d.]+ m?s, step {peak_step}\b", timeline)
    assert f"out of memory, step {failure.step}" in timeline
    if failure.step != peak_step:
        assert f"step {failure.step}" not in timeline.split("peak ")[1].split("<")[0]


def test_a_healthy_capture_has_no_failure_mark() -> None:
    page = render_html([load(f"{FIXTURES}/keras_train")])
    assert "out of memory" not in page and re.search(r"peak [^<]* at [^<]*, step 3", page)


# -- the largest tensors: Source in view -----------------------------------------


def test_the_largest_tensors_show_source_beside_the_op() -> None:
    # Was the eleventh and last column: off screen behind a sideways scroll.
    page = render_html([load(f"{FIXTURES}/sources_fit")])
    table = page[page.index('<table class="top_tensors"') :].split("</table>")[0]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert headers[:2] == ["Op", "Source"], headers
    assert len(headers) == len(set(headers)) >= 10  # every column still there, once
    first = table.split("<tbody>")[1].split("</tr>")[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", first)
    assert len(cells) == len(headers)
    assert cells[1] == "<code>fixtures/<wbr>sources_model.py:60 train</code>"  # may wrap


def test_a_table_without_sources_keeps_its_order() -> None:
    page = render_html([load(f"{FIXTURES}/keras_train")])
    table = page[page.index('<table class="top_tensors"') :].split("</table>")[0]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert headers[0] == "Op" and "Source" not in headers
