"""What every hostile input must survive: load, every analysis, every renderer.

``exercise`` raises whatever escapes; the callers decide that anything but a
``TraceparseError`` naming the file is a failure. Besides not crashing, the
outputs must be safe: the HTML has no element or attribute that runs code, and
no CSV cell can be read as a formula.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlencode

import traceparse
from traceparse.output.export import to_csv
from traceparse.report import render_html, render_json, render_markdown
from traceparse.report.interact import SCRIPT

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?(e[+-]?\d+)?$")


class UnsafeOutput(AssertionError):
    """An output that could be turned against its reader."""


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.bad: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        refresh = tag == "meta" and values.get("http-equiv", "").lower() == "refresh"
        if tag in ("script", "iframe", "object", "embed", "img", "link", "base") or refresh:
            self.bad.append(f"<{tag}>")
        for name, value in values.items():
            if name.startswith("on"):
                self.bad.append(f"{tag} {name}=")
            if name in ("href", "src", "xlink:href") and not value.startswith(("#", "data:")):
                self.bad.append(f"{tag} {name}={value}")


def check_html(text: str) -> None:
    # The report's own table script (sortable, filterable tables) is allowed, once,
    # exactly as written: any other script is content that escaped.
    page = _Elements()
    page.feed(text.replace(f"<script>{SCRIPT}</script>", "", 1))
    if page.bad:
        raise UnsafeOutput(f"the HTML report holds {page.bad[:5]}")


def check_csv(text: str) -> None:
    for row in csv.reader(io.StringIO(text, newline="")):
        for cell in row:
            if cell.startswith(_FORMULA_START) and not _NUMBER.match(cell):
                raise UnsafeOutput(f"a CSV cell a spreadsheet would run: {cell[:60]!r}")


def exercise(path: Path, *, html: bool = True) -> str:
    """Load ``path``, run the analyses, renderers and CSV exports over it, and check
    that the outputs are safe.

    Returns "ok" or the name of the ``TraceparseError`` subclass raised; any
    other exception propagates. A ``TraceparseError`` must name the file.
    """
    try:
        profile = traceparse.load(path)
        profile.summary()
        profile.steps  # noqa: B018 - each property builds one analysis
        profile.attribution  # noqa: B018
        profile.scopes(2)
        check_csv(to_csv(profile.ops))
        check_csv(to_csv(profile.allocations))
        render_markdown([profile])
        render_json([profile])
        if html:
            check_html(render_html([profile]))
    except traceparse.TraceparseError as exc:
        if str(path) not in str(exc):
            raise AssertionError(f"the error does not name the file: {exc}") from exc
        return type(exc).__name__
    return "ok"


# -- the command line -------------------------------------------------------------------

# Exit codes a command may end with (cli/app.py's EXIT_CODES_HELP); 1 is a bug.
_EXIT_CODES = {0, 2, 3, 4, 5}
_TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


class InternalError(AssertionError):
    """A command ended in an internal error, a traceback or an exit code it may not use."""


def _strict_json(text: str, what: str) -> None:
    def refuse(constant: str) -> None:
        raise UnsafeOutput(f"{what} holds {constant}, which is not JSON")

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        raise UnsafeOutput(f"{what} is not JSON: {exc}") from exc


def _check_written(out: Path) -> None:
    for path in sorted(out.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".html":
            check_html(path.read_text(encoding="utf-8"))
        elif path.suffix == ".csv":
            check_csv(path.read_text(encoding="utf-8"))
        elif path.suffix == ".json":
            _strict_json(path.read_text(encoding="utf-8"), str(path.name))


def exercise_cli(argv: list[str], root: Path) -> str:
    """Run ``traceparse ARGV`` in this process (``serve`` through its WSGI routes);
    return "ok" or "exit N" for a refusal. Raises ``InternalError`` for exit code 1,
    an unknown code or a traceback, ``UnsafeOutput`` for unsafe or invalid output."""
    if argv[0] == "serve":
        return _exercise_serve(argv[1])
    from traceparse.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--no-color", *argv])
    stdout, stderr = out.getvalue(), err.getvalue()
    if code not in _EXIT_CODES or "internal error" in stderr or "Traceback" in stderr:
        raise InternalError(f"exit {code}: {stderr.strip()[-400:]}")
    for name, text in (("stdout", stdout), ("stderr", stderr)):
        bad = _TERMINAL_CONTROL.search(text)
        if bad:
            raise UnsafeOutput(f"{name} holds the control character {bad.group()!r}")
    # A refusal is one line (batch reports each failed capture as a warning instead).
    if code in (2, 3) and stderr.count("error:") > 1:
        raise InternalError(f"exit {code} with more than one error line: {stderr[-400:]}")
    if code == 0 and "json" in argv and stdout.strip():
        _strict_json(stdout, "stdout")
    _check_written(root / "out")
    return "ok" if code == 0 else f"exit {code}"


def _exercise_serve(logdir: str) -> str:
    from traceparse.integrations.tensorboard.app import ROUTE_PREFIX, Dashboard, serve_app

    dashboard = Dashboard(logdir)
    app = serve_app(dashboard)

    def get(route: str, query: str = "") -> tuple[int, bytes]:
        got: dict[str, int] = {}

        def start(status: str, headers: list[tuple[str, str]]) -> None:
            got["status"] = int(status.split()[0])

        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": ROUTE_PREFIX + route}
        environ["QUERY_STRING"] = query
        body = b"".join(app(environ, start))
        return got["status"], body

    try:
        while True:
            status, body = get("/runs")
            listed = json.loads(body)["runs"]
            if all(run["status"] != "pending" for run in listed):
                break
            time.sleep(0.05)
        outcome = "ok"
        for run in listed:
            error = run.get("error", "")
            if "please report it" in error or "traceparse failed" in error:
                raise InternalError(f"serve: {error[:400]}")
            if error:
                outcome = "error page"
            query = urlencode({"run": run["run"]})
            for route in ("/report", "/record"):
                status, body = get(route, query)
                if status >= 500:
                    raise InternalError(f"serve {route}: status {status}")
                if route == "/report" and status == 200:
                    check_html(body.decode())
                if route == "/record" and status == 200:
                    _strict_json(body.decode(), "the /record answer")
        return outcome
    finally:
        dashboard.close()
