"""The HTML report in a real browser: headless Chromium, driven over the DevTools pipe.

Chromium runs with ``--remote-debugging-pipe`` (commands on fd 3, replies on fd
4, JSON messages ending in NUL), so no port, no websocket library and no
network are involved. The test loads the report from a file, collects every
console message, uncaught exception and browser log entry (CSP violations and
failed loads land there), measures the timeline, takes a full-page screenshot
and checks that a hostile name ran nothing.

Skips when Chromium is absent, except on CI (``CI`` set), where it fails.
Screenshots go to ``TRACEPARSE_SCREENSHOT_DIR`` when set, else to tmp_path.
"""

from __future__ import annotations

from pathlib import Path

from helpers.browser import (
    assert_not_blank,
    open_in_chromium,
    screenshot_path,
)
from helpers.report import hostile_profile, keras_profile

from traceparse.report import write_report

# Runs in the page after load; everything the assertions need, as JSON.


def test_html_report_renders_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_report([keras_profile()], "html", page)
    shot = screenshot_path(tmp_path, "report-keras_train.png")
    found = open_in_chromium(page, shot, tmp_path / "chromium-profile")

    assert found["problems"] == []
    assert found["title"] == "traceparse memory report"
    assert found["timelines"], "no timeline figure on the page"
    for timeline in found["timelines"]:
        svg = timeline["svg"]
        assert svg is not None, timeline
        assert svg["width"] > 400 and svg["height"] > 100, timeline
        assert timeline["texts"] > 5, "the timeline has no axis labels"
    assert found["charts"] >= 3  # timeline, ops, scopes (and the attribution)
    assert found["tables"] >= 4
    assert found["resources"] == [], "the report fetched something"
    assert found["scripts"] == 1  # the report's own sort-and-filter script, allowed by hash
    assert "Peak" in found["text"] and "MiB" in found["text"]
    assert_not_blank(shot)


def test_hostile_names_run_nothing_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "hostile.html"
    write_report([hostile_profile()], "html", page)
    shot = screenshot_path(tmp_path, "report-hostile.png")
    found = open_in_chromium(page, shot, tmp_path / "chromium-profile")

    assert found["problems"] == []
    assert not found["pwned"]
    assert found["scripts"] == 1  # the report's own sort-and-filter script, allowed by hash
    assert found["handlers"] == 0
    assert found["resources"] == []
    # The names are shown as text, exactly.
    assert "<script>window.__pwned=1</script>" in found["text"]
    assert found["timelines"] and found["timelines"][0]["svg"]["width"] > 0
