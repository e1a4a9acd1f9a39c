"""The HTML report at 1400 px in headless Chromium: no table wider than the page,
headers sort, the filter box filters, no console errors, nothing fetched.

Uses the DevTools pipe client of test_report_browser (skips without Chromium,
fails on CI). The pages are the keras_train and keras_callback reports (Keras'
``StatefulPartitionedCall/...`` op names are long), and keras_train with every op
renamed into a deep scope (names of 150 characters, as in a transformer).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from helpers.browser import DevTools, chromium, problems

import traceparse
from traceparse.core.profile import Profile
from traceparse.report import write_report

WIDTH = 1400

MEASURE = """
JSON.stringify({
  page: document.documentElement.scrollWidth,
  scripts: document.querySelectorAll('script').length,
  filters: document.querySelectorAll('input.filter').length,
  tables: [...document.querySelectorAll('table')].map((t) => {
    const box = t.closest('.scroll') || t.parentElement;
    return {cls: t.className, width: Math.ceil(t.getBoundingClientRect().width),
            room: box.clientWidth, scroll: box.scrollWidth};
  }),
  resources: performance.getEntriesByType('resource').map((e) => e.name),
})
"""
FIRST_COLUMN = """
JSON.stringify([...document.querySelector('table.top_tensors').tBodies[0].rows]
  .filter((r) => !r.hidden).map((r) => r.cells[0].innerText))
"""
HEADER_CENTRE = """
(() => { const th = document.querySelector('table.top_tensors th');
  th.scrollIntoView(); const r = th.getBoundingClientRect();
  return JSON.stringify([r.left + r.width / 2, r.top + r.height / 2]); })()
"""


def evaluate(browser: DevTools, session: str, expression: str) -> Any:
    result = browser.send(
        "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session
    )
    return json.loads(result["result"]["value"])


def click(browser: DevTools, session: str, x: float, y: float) -> None:
    for kind in ("mousePressed", "mouseReleased"):
        browser.send(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            session=session,
        )


DEEP = (
    "StatefulPartitionedCall/gradient_tape/functional_1/transformer_encoder_block_11/"
    "multi_head_attention_layer/attention_output_dense_projection"
)


def profile_of(fixture: str) -> Profile:
    """A fixture's profile; ``deep_names``: keras_train with every op in a deep scope."""
    if fixture != "deep_names":
        return traceparse.load(FIXTURES / fixture)
    trace = traceparse.load(FIXTURES / "keras_train").traces[0]
    events = trace.events.copy()
    names = list(events["tf_op"].cat.categories)
    events["tf_op"] = events["tf_op"].cat.rename_categories({n: f"{DEEP}/{n}" for n in names})
    return Profile([dataclasses.replace(trace, events=events)], run="deep")


@pytest.mark.parametrize("fixture", ["keras_train", "keras_callback", "deep_names"])
def test_report_at_1400px_fits_sorts_and_filters(fixture: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_report([profile_of(fixture)], "html", page)
    browser = DevTools(chromium(), tmp_path / "chromium-profile")
    try:
        session = browser.open_page(page.as_uri(), WIDTH, 900)

        found = evaluate(browser, session, MEASURE)
        before = evaluate(browser, session, FIRST_COLUMN)
        click(browser, session, *evaluate(browser, session, HEADER_CENTRE))
        by_op = evaluate(browser, session, FIRST_COLUMN)
        click(browser, session, *evaluate(browser, session, HEADER_CENTRE))
        by_op_reversed = evaluate(browser, session, FIRST_COLUMN)
        evaluate(
            browser,
            session,
            """(() => { const box = document.querySelector('input.filter');
              box.value = 'AddV2'; box.dispatchEvent(new Event('input'));
              return '1'; })()""",
        )
        filtered = evaluate(browser, session, FIRST_COLUMN.replace("top_tensors", "top_ops"))
        browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
    finally:
        browser.close()
    found_problems = problems(browser.events)
    assert found_problems == []  # CSP violations and script errors land here
    assert found["resources"] == [] and found["scripts"] == 1
    assert found["page"] <= WIDTH, found
    for table in found["tables"]:  # no table wider than its place: nothing cut off
        assert table["width"] <= table["room"] and table["scroll"] <= table["room"], table
    assert found["filters"] == len(found["tables"])
    # Clicking the Op header orders the rows by name; again, the other way.
    assert by_op == sorted(by_op, key=str.lower) or by_op == sorted(by_op), by_op
    assert by_op != before or before == sorted(before)
    assert by_op_reversed == by_op[::-1]
    # The first filter box is the first table's (top tensors); top_ops keeps its rows.
    assert filtered, "filtering one table hid rows of another"


def test_long_names_in_charts_keep_their_end_and_show_in_full_on_hover() -> None:
    pytest.importorskip("matplotlib")
    from traceparse.report.plots import bars_svg

    name = f"{DEEP}/MatMul/MatMul_1"
    svg = bars_svg([name, "AddV2"], [4 << 20, 1 << 20], label="ops", salt="t")
    shown = re.findall(r">(…[^<]*)<", svg)
    assert shown and name.endswith(shown[0][1:]) and shown[0].endswith("MatMul/MatMul_1")
    assert f"<title>{name}</title>" in svg  # the tooltip: the whole name
