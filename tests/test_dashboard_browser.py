"""The dashboard in TensorBoard in headless Chromium (driven as tests/helpers/browser.py does).

TensorBoard's page loads the plugin's ES module in an iframe
(``plugin_entry.html``); the module lists the runs and frames the chosen run's
report. The test opens TensorBoard at ``#traceparse``, waits for the report of
the newest run, and reads both frames: the runs listed, the peak figure and
the layer table, which must be those ``traceparse report`` writes for the same
capture. A run directory named like markup must show as text and run nothing.
Skips when Chromium is absent, except on CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.browser import DevTools, chromium, problems, screenshot_path
from helpers.dashboard import HOSTILE, LOGDIR, make_logdir, run_of, tensorboard

from traceparse.core.loading import load_all
from traceparse.report import write_report

pytest.importorskip("tensorboard")

# Both frames, read from TensorBoard's page (same origin, so their documents are reachable).
PROBE = r"""
(() => {
  let dash = null;
  const walk = (root) => {
    for (const f of root.querySelectorAll('iframe')) {
      if ((f.getAttribute('src') || '').includes('plugin_entry.html?name=traceparse')) {
        dash = f.contentDocument;
      }
    }
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot);
  };
  walk(document);
  if (!dash && document.querySelector('table.runs')) dash = document;  // traceparse serve
  if (!dash || !dash.body) return JSON.stringify({found: false});
  const frame = dash.querySelector('iframe.report');
  const report = frame ? frame.contentDocument : null;
  const cells = (table, n) => table ? [...table.querySelectorAll('tbody tr')].map(
    (r) => r.cells[n].innerText.trim()) : [];
  const overview = report && report.querySelector('table.overview');
  return JSON.stringify({
    found: true,
    runs: cells(dash.querySelector('table.runs'), 0),
    statuses: cells(dash.querySelector('table.runs'), 4),
    chosen: [...dash.querySelectorAll('table.runs tr.chosen')].map(
      (r) => r.cells[0].innerText.trim()),
    peak: overview ? [...overview.querySelectorAll('strong')].map((s) => s.innerText) : [],
    layers: report ? cells(report.querySelector('table.layers'), 0) : [],
    reportTitle: report ? report.title : null,
    pwned: [window, dash.defaultView, report && report.defaultView].some(
      (w) => w && typeof w.__pwned !== 'undefined'),
    images: dash.querySelectorAll('img').length,
  });
})()
"""


def _expected(run_dir: Path) -> tuple[list[str], list[str]]:
    """(the overview's peak figures, the layer table's layer names) of ``traceparse report``."""
    page = write_report(load_all(str(run_dir)), "html")
    overview = re.search(r'<table class="overview">.*?</table>', page, re.S)
    layers = re.search(r'<table class="layers">.*?</table>', page, re.S)
    assert overview and layers, "the report has no overview or layer table"
    peaks = re.findall(r"<strong>(.*?)</strong>", overview.group(0))
    names = re.findall(r'<td class="ident"><code>(.*?)</code>', layers.group(0))
    return [html.unescape(p) for p in peaks], [
        html.unescape(re.sub("<[^>]+>", "", n)) for n in names
    ]


@pytest.mark.slow
def test_the_dashboard_in_tensorboard_shows_the_report(tmp_path: Path) -> None:
    binary = chromium()
    logs = make_logdir(tmp_path)
    cnn, cnn_dir = run_of(logs, "cnn")
    peaks, layers = _expected(cnn_dir)
    assert peaks and layers
    shot = screenshot_path(tmp_path, "dashboard-tensorboard.png")
    with tensorboard(logs) as base:
        found, seen = _open(binary, base + "/#traceparse", shot, tmp_path / "chromium-profile")

    assert sorted(found["runs"]) == sorted(run_of(logs, e)[0] for e in LOGDIR)
    assert f"{HOSTILE}/" in " ".join(found["runs"])  # shown as text...
    assert not found["pwned"] and found["images"] == 0  # ...and nothing ran or loaded
    assert found["chosen"] == [cnn]  # the newest run, chosen at first
    assert found["reportTitle"] == "traceparse memory report"
    assert found["peak"] == peaks
    assert found["layers"] == layers
    ours = [p for p in seen if p.startswith("exception") or "traceparse" in p or "Refused" in p]
    assert ours == []
    assert shot.stat().st_size > 10_000


def _open(binary: str, url: str, shot: Path, profile: Path) -> tuple[dict[str, Any], list[str]]:
    """Open ``url``; wait for the chosen run's report; (the probe's findings, problems)."""
    browser = DevTools(binary, profile)
    try:
        session = browser.open_page(url, 1200, 1000)
        deadline = time.monotonic() + 180
        while True:
            answer = browser.send(
                "Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, session=session
            )
            found: dict[str, Any] = json.loads(answer["result"]["value"])
            if found["found"] and found["layers"] and "ready" in found["statuses"]:
                break
            assert time.monotonic() < deadline, found
            time.sleep(0.5)
        picture = browser.send("Page.captureScreenshot", {"format": "png"}, session=session)
        shot.write_bytes(base64.b64decode(picture["data"]))
    finally:
        browser.close()
    return found, problems(browser.events)


@pytest.mark.slow
def test_traceparse_serve_shows_the_same_page(tmp_path: Path) -> None:
    binary = chromium()
    logs = make_logdir(tmp_path)
    cnn, cnn_dir = run_of(logs, "cnn")
    peaks, layers = _expected(cnn_dir)
    process = subprocess.Popen(
        [sys.executable, "-m", "traceparse", "serve", str(logs), "--port", "0"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        address = re.search(r"at (http://127\.0\.0\.1:\d+/)", process.stderr.readline())
        assert address
        shot = screenshot_path(tmp_path, "dashboard-serve.png")
        found, seen = _open(binary, address.group(1), shot, tmp_path / "chromium-profile")
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert found["chosen"] == [cnn]
    assert found["peak"] == peaks and found["layers"] == layers
    assert not found["pwned"] and found["images"] == 0
    assert seen == []  # the page alone: no TensorBoard around it to excuse anything
