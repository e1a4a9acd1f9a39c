"""Issue 52, the HTML report's display: a card's headline is a figure (its sentence
is body text), and the largest tensors' Source shows without scrolling sideways."""

from __future__ import annotations

import re

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
