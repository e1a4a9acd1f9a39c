"""Headless Chromium for the HTML report tests: finding it, opening a page, what it saw."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

VIEWPORT_WIDTH = 1200


LAUNCH_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-pipe",
]


PROBE = """
(() => {
  const rect = (el) => { const r = el.getBoundingClientRect();
    return {width: r.width, height: r.height, top: r.top, left: r.left}; };
  return JSON.stringify({
    title: document.title,
    timelines: [...document.querySelectorAll('figure.timeline')].map((f) => ({
      id: f.id, figure: rect(f), svg: f.querySelector('svg') ? rect(f.querySelector('svg')) : null,
      texts: f.querySelectorAll('svg text').length })),
    charts: document.querySelectorAll('figure.chart svg').length,
    tables: document.querySelectorAll('table').length,
    scripts: document.querySelectorAll('script').length,
    handlers: [...document.querySelectorAll('*')].filter((el) =>
      [...el.attributes].some((a) => a.name.startsWith('on'))).length,
    pwned: typeof window.__pwned !== 'undefined',
    resources: performance.getEntriesByType('resource').map((e) => e.name),
    height: Math.ceil(document.documentElement.scrollHeight),
    bodyWidth: document.body.getBoundingClientRect().width,
    text: document.body.innerText,
  });
})()
"""


def chromium() -> str:
    """The browser: ``TRACEPARSE_CHROMIUM`` if set, else the first Chromium on PATH."""
    given = os.environ.get("TRACEPARSE_CHROMIUM")
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed, and CI is set: .ci/run installs it")
    pytest.skip(
        "chromium is not installed: install it (apt-get install chromium) or set "
        "TRACEPARSE_CHROMIUM=/path/to/chrome to run the browser tests"
    )


class DevTools:
    """A minimal Chrome DevTools Protocol client over the debugging pipe."""

    def __init__(self, binary: str, profile_dir: Path) -> None:
        to_chrome_r, self._to_chrome = (_high(fd) for fd in os.pipe())
        self._from_chrome, from_chrome_w = (_high(fd) for fd in os.pipe())
        # bash (dash takes single-digit fds only) puts the pipe ends on fds 3 and 4,
        # where chromium expects them.
        r, w = to_chrome_r, from_chrome_w
        wiring = f'exec "$0" "$@" 3<&{r} 4>&{w} {r}<&- {w}>&-'
        self.proc = subprocess.Popen(
            ["bash", "-c", wiring, binary, *LAUNCH_FLAGS, f"--user-data-dir={profile_dir}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(to_chrome_r, from_chrome_w),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the debugging pipe")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(message))

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        self._next_id += 1
        request: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        os.write(self._to_chrome, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == method:
                return event
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            self.events.append(message)
            if message.get("method") == method:
                return message

    def open_page(self, url: str, width: int, height: int) -> str:
        """A new tab of ``width`` x ``height`` CSS pixels with the runtime, log and
        page events on, navigated to ``url`` and loaded: its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=session)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.send("Emulation.setDeviceMetricsOverride", metrics, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired")
        return str(session)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def _high(fd: int) -> int:
    """``fd`` moved above 9, so that wiring fds 3 and 4 cannot clobber it."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def open_in_chromium(page: Path, screenshot: Path, profile_dir: Path) -> dict[str, Any]:
    """Load ``page``; return the probe's findings plus every problem the browser reported."""
    browser = DevTools(chromium(), profile_dir)
    try:
        session = browser.open_page(page.as_uri(), VIEWPORT_WIDTH, 900)
        result = browser.send(
            "Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, session=session
        )
        found: dict[str, Any] = json.loads(result["result"]["value"])
        shot = browser.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": VIEWPORT_WIDTH,
                    "height": found["height"],
                    "scale": 1,
                },
            },
            session=session,
        )
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        # Let late console messages and log entries arrive.
        browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
    finally:
        browser.close()
    found["problems"] = problems(browser.events)
    return found


def problems(events: list[dict[str, Any]]) -> list[str]:
    """The page's uncaught exceptions, console errors and warnings, and error or
    warning log entries, described one a line."""
    return [
        _describe(e)
        for e in events
        if e.get("method") == "Runtime.exceptionThrown"
        or (
            e.get("method") == "Runtime.consoleAPICalled"
            and e["params"].get("type") in ("error", "warning", "assert")
        )
        or (
            e.get("method") == "Log.entryAdded"
            and e["params"]["entry"].get("level") in ("error", "warning")
        )
    ]


def _describe(event: dict[str, Any]) -> str:
    params = event["params"]
    if "entry" in params:
        return f"log {params['entry'].get('level')}: {params['entry'].get('text')}"
    if "exceptionDetails" in params:
        details = params["exceptionDetails"]
        thrown = details.get("exception", {}).get("description", "")
        return f"exception: {details.get('text')} {thrown}"
    args = " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
    return f"console.{params.get('type')}: {args}"


def screenshot_path(tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get("TRACEPARSE_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def assert_not_blank(png: Path) -> None:
    from PIL import Image, ImageStat

    with Image.open(png) as image:
        assert image.width == VIEWPORT_WIDTH and image.height > 900
        spread = ImageStat.Stat(image.convert("L")).stddev[0]
    assert spread > 10, f"{png} looks blank (stddev {spread:.1f})"
