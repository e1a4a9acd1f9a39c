"""The dashboard's routes over one logdir, as plain WSGI apps.

The same apps serve TensorBoard (``plugin.py`` hands them to it under
``/data/plugin/traceparse/``) and ``traceparse serve`` (``serve_app`` mounts
them at the same URLs), so the page and its module never know which server
they are in.

- ``runs``: JSON, every run under the logdir that holds captures (what
  ``files.discover.find_captures`` finds, as ``traceparse batch`` does), each
  with its status (``pending`` with a progress line, ``ready`` with the record's
  headline, ``error`` with its one-line error). It answers at once: analyses
  run in one worker thread, never in the request.
- ``report?run=RUN[&host=HOST]``: the HTML ``traceparse report --format html``
  writes for that run (``report.formats.render_html``), self-contained;
- ``record?run=RUN``: the JSON ``traceparse report --format json`` writes
  (``report.jsonreport``), whose allocators are ``AllocatorRecord.to_dict()``.

A request's ``run`` and ``host`` are looked up among the names discovery
found; one that is not there is a 404, and no path is ever built from a
request. Results are cached in memory by each capture file's (path, size,
mtime), so a reopened run is instant and a rewritten capture is analysed
again. Nothing is written anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from traceparse.errors import CaptureNotFoundError, NoCaptureError, TraceparseError
from traceparse.files.discover import CaptureFile, find_captures, is_url
from traceparse.files.names import printable
from traceparse.units import format_bytes

__all__ = ["PLUGIN_NAME", "ROUTE_PREFIX", "Dashboard", "serve_app"]

PLUGIN_NAME = "traceparse"
# Where TensorBoard mounts a plugin's apps; ``serve_app`` uses the same prefix.
ROUTE_PREFIX = f"/data/plugin/{PLUGIN_NAME}"
# The routes, as TensorBoard's get_plugin_apps keys them.
RUNS, REPORT, RECORD, MODULE = "/runs", "/report", "/record", "/index.js"

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
# (path, size, modification time) of each capture file of a run: what its results are
# cached by.
CacheKey = tuple[tuple[str, int, str], ...]


@dataclass(frozen=True)
class Run:
    """One run as discovery found it: its name here, and its capture files (one a host)."""

    name: str
    captures: tuple[CaptureFile, ...]

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(capture.host for capture in self.captures)

    def key(self) -> CacheKey | None:
        """What the run's results are cached by; None when a file cannot be stat'ed."""
        try:
            return tuple((c.path, *_size_and_time(c.path)) for c in self.captures)
        except (OSError, ValueError, ImportError):
            return None


def _size_and_time(path: str) -> tuple[int, str]:
    """A file's size and modification time (in ns locally; a URL's as its store says)."""
    if not is_url(path):
        info = os.stat(path)
        return info.st_size, str(info.st_mtime_ns)
    import fsspec  # find_captures found this URL's files: fsspec is there

    fs, inner = fsspec.core.url_to_fs(path)
    found = fs.info(inner)
    stamp = next(
        (found[k] for k in ("mtime", "LastModified", "updated", "created") if k in found), ""
    )
    return int(found.get("size") or 0), str(stamp)


@dataclass
class Result:
    """A run's pages, or its one-line error."""

    html: str = ""
    host_html: dict[str, str] = field(default_factory=dict)  # with several hosts
    record: str = ""
    headline: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


@dataclass
class Job:
    """A run waiting for or in its analysis; ``progress`` is what the page shows."""

    run: Run
    progress: str = "queued"
    started: float | None = None


def run_names(captures: Iterable[CaptureFile], logdir: str) -> dict[str, Run]:
    """The runs of ``captures`` by name: the run directory relative to the logdir
    without the profiler's ``plugins/profile`` level (``train/2026_11_30_19_10_11``),
    or its whole relative path where two would read the same."""
    by_dir: dict[str, list[CaptureFile]] = {}
    for capture in captures:
        by_dir.setdefault(capture.run_dir, []).append(capture)
    wanted: dict[str, str] = {}
    for run_dir, found in by_dir.items():
        relative = _relative(run_dir, logdir)
        if relative == "." or relative.startswith(".."):
            relative = found[0].run  # the logdir is the run directory (or a file in it)
        wanted[run_dir] = printable(relative.replace(os.sep, "/"))
    short = {d: n.replace("plugins/profile/", "") for d, n in wanted.items()}
    counts = Counter(short.values())
    names = {d: short[d] if counts[short[d]] == 1 else wanted[d] for d in by_dir}
    return {names[d]: Run(names[d], tuple(found)) for d, found in by_dir.items()}


def _relative(run_dir: str, logdir: str) -> str:
    """``run_dir`` relative to ``logdir`` (URLs too: ``memory:///logs/a`` in ``memory://logs``)."""
    if not is_url(logdir):
        return os.path.relpath(os.path.abspath(run_dir), os.path.abspath(logdir))
    inner = run_dir.split("://", 1)[-1].strip("/")
    root = logdir.split("://", 1)[-1].strip("/")
    if inner == root:
        return "."
    return inner[len(root) :].strip("/") if inner.startswith(root + "/") else inner


class Dashboard:
    """The routes over ``logdir``, its cache and its worker thread."""

    def __init__(self, logdir: str, *, workers: int = 1) -> None:
        self.logdir = logdir
        self._lock = threading.Lock()
        self._results: dict[CacheKey, Result] = {}
        self._jobs: dict[CacheKey, Job] = {}
        self._order: list[CacheKey] = []  # the queue; the front is analysed next
        # One worker by default: analyses are CPU-bound and share the server's
        # process; a second would slow both without finishing either sooner.
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="traceparse")

    # ---- discovery and state -------------------------------------------------

    def runs(self) -> dict[str, Run]:
        """Every run under the logdir now (a new capture appears on the next call)."""
        try:
            return run_names(find_captures(self.logdir), self.logdir)
        except (NoCaptureError, CaptureNotFoundError):
            return {}  # none yet, or the logdir itself not there (yet): an empty list
        except TraceparseError as exc:
            print(f"traceparse dashboard: {exc}", file=sys.stderr)
            return {}

    def has_captures(self) -> bool:
        return bool(self.runs())

    def state(self, run: Run, *, first: bool = False) -> tuple[str, Result | Job]:
        """("ready"|"error", Result) or ("pending", Job), queueing the run when it is
        neither; ``first`` puts it at the front of the queue (someone is waiting)."""
        key = run.key()
        if key is None:
            return "error", Result(error=f"{run.name}: the capture disappeared; refresh")
        with self._lock:
            result = self._results.get(key)
            if result is not None:
                return ("error" if result.error else "ready"), result
            job = self._jobs.get(key)
            if job is None:
                job = self._jobs[key] = Job(run)
                self._order.append(key)
                self._pool.submit(self._work)
            if first and job.started is None and key in self._order:
                self._order.remove(key)
                self._order.insert(0, key)
            return "pending", job

    def forget_missing(self, runs: dict[str, Run]) -> None:
        """Drop cached results of files that changed or went (they are never asked again)."""
        keys = {run.key() for run in runs.values()}
        with self._lock:
            for key in [k for k in self._results if k not in keys]:
                del self._results[key]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- the worker ------------------------------------------------------------

    def _work(self) -> None:
        """Analyse the run at the front of the queue (one call per queued run)."""
        with self._lock:
            if not self._order:
                return
            key = self._order.pop(0)
            job = self._jobs[key]
            job.started = time.monotonic()
        try:
            result = self._analyse(job)
        except TraceparseError as exc:
            result = Result(error=_one_line(str(exc)))
        except MemoryError:
            result = Result(error=f"{job.run.name}: out of memory while analysing this capture")
        except Exception as exc:  # a server outlives any one capture
            result = Result(
                error=f"{job.run.name}: traceparse failed on this capture "
                f"({type(exc).__name__}: {_one_line(str(exc))}); please report it"
            )
        with self._lock:
            self._results[key] = result
            del self._jobs[key]

    def _analyse(self, job: Job) -> Result:
        # The loading, the reports and their JSON are the command line's own.
        from traceparse.analysis.predict import REPLAY_PROGRESS
        from traceparse.core.loading import each_profile, read_trace
        from traceparse.output.jsonvalues import dumps
        from traceparse.report.formats import render_html
        from traceparse.report.jsonreport import report_dict

        run = job.run

        def read(captures: Iterable[CaptureFile]) -> list[Any]:
            traces = []
            for capture in captures:
                job.progress = f"reading {capture.host}{_size(capture.path)}"
                traces.append(read_trace(capture))
            return traces

        def replayed(done: int, budget: int | None) -> None:
            job.progress = f"analysing: allocator replay {done}" + (
                f" of {budget}" if budget else ""
            )

        told = REPLAY_PROGRESS.set(replayed)
        try:
            profiles = each_profile(run.captures, read=read)
            job.progress = "analysing"
            record = report_dict(profiles)
            job.progress = "rendering the report"
            page = render_html(profiles)
            hosts = (
                {p.hosts[0]: render_html([p]) for p in profiles if p.hosts}
                if len(profiles) > 1
                else {}
            )
        finally:
            REPLAY_PROGRESS.reset(told)
        text = dumps(record) + "\n"
        return Result(html=page, host_html=hosts, record=text, headline=_headline(text))

    # ---- the routes --------------------------------------------------------------

    def apps(self) -> dict[str, WSGIApp]:
        """The WSGI apps by route, as TensorBoard's ``get_plugin_apps`` returns them."""
        return {
            RUNS: self._runs_app,
            REPORT: self._report_app,
            RECORD: self._record_app,
            MODULE: _module_app,
        }

    def _runs_app(self, environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        runs = self.runs()
        self.forget_missing(runs)
        listed = []
        for name, run in runs.items():
            status, found = self.state(run)
            item: dict[str, Any] = {"run": name, "hosts": list(run.hosts), "status": status}
            if isinstance(found, Job):
                item["progress"] = found.progress
            elif found.error:
                item["error"] = found.error
            else:
                item["allocators"] = found.headline
            listed.append(item)
        return _json(start, {"logdir": printable(self.logdir), "runs": listed})

    def _lookup(self, environ: dict[str, Any]) -> tuple[Run | None, str | None, str]:
        """(run, host or None, why not) for the request's ``run`` and ``host``: names
        discovery found, compared as strings; nothing else."""
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        names = query.get("run", [])
        if len(names) != 1:
            return None, None, "give one run=NAME (the names /runs lists)"
        run = self.runs().get(names[0])
        if run is None:
            return None, None, "no such run under this logdir"
        hosts = query.get("host", [])
        if not hosts:
            return run, None, ""
        if len(hosts) != 1 or hosts[0] not in run.hosts:
            return None, None, "no such host in this run"
        return run, hosts[0], ""

    def _report_app(self, environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        run, host, why = self._lookup(environ)
        if run is None:
            return _text(start, "404 Not Found", why)
        _status, found = self.state(run, first=True)
        if isinstance(found, Result) and not found.error:
            page = found.host_html.get(host, found.html) if host else found.html
            return _respond(start, "200 OK", "text/html; charset=utf-8", page.encode())
        if isinstance(found, Result):
            return _respond(
                start,
                "422 Unprocessable Entity",
                "text/html; charset=utf-8",
                _message_page(run.name, found.error, refresh=False),
            )
        progress = found.progress
        return _respond(
            start,
            "202 Accepted",
            "text/html; charset=utf-8",
            _message_page(run.name, f"analysing: {progress}", refresh=True),
        )

    def _record_app(self, environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        run, _host, why = self._lookup(environ)
        if run is None:
            return _text(start, "404 Not Found", why)
        _status, found = self.state(run, first=True)
        if isinstance(found, Result) and not found.error:
            return _respond(
                start, "200 OK", "application/json; charset=utf-8", found.record.encode()
            )
        if isinstance(found, Result):
            return _json(start, {"run": run.name, "error": found.error}, "422 Unprocessable Entity")
        progress = found.progress
        return _json(
            start, {"run": run.name, "status": "pending", "progress": progress}, "202 Accepted"
        )


def _headline(record_json: str) -> list[dict[str, Any]]:
    """Per allocator of the record: host, name, peak (bytes and in words), capacity, leak
    verdict, and whether the capture failed; what the runs list shows."""
    record = json.loads(record_json)
    rows = []
    for profile in record.get("profiles", []):
        failed = bool(profile.get("failures"))
        for summary in profile.get("summary", []):
            peak = summary.get("peak_bytes")
            rows.append(
                {
                    "host": summary.get("host"),
                    "allocator": summary.get("allocator"),
                    "peak_bytes": peak,
                    "peak": format_bytes(peak),
                    "capacity_bytes": summary.get("capacity_bytes"),
                    "leak_verdict": summary.get("leak_verdict"),
                    "failed": failed,
                }
            )
    return rows


def _size(path: str) -> str:
    try:
        return f" ({format_bytes(os.path.getsize(path))})"
    except OSError:
        return ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _respond(
    start: StartResponse,
    status: str,
    kind: str,
    body: bytes,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    start(
        status,
        [
            ("Content-Type", kind),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            *(extra or []),
        ],
    )
    return [body]


def _json(start: StartResponse, value: Any, status: str = "200 OK") -> list[bytes]:
    # json.dumps escapes what a name holds; "<" too, so the JSON is inert in any page.
    text = json.dumps(value, ensure_ascii=True).replace("<", "\\u003c")
    return _respond(start, status, "application/json; charset=utf-8", text.encode())


def _text(start: StartResponse, status: str, text: str) -> list[bytes]:
    return _respond(start, status, "text/plain; charset=utf-8", (text + "\n").encode())


def _message_page(run: str, message: str, *, refresh: bool) -> bytes:
    """A small page saying what is happening to a run (every name escaped)."""
    again = '<meta http-equiv="refresh" content="2">' if refresh else ""
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
        f"{again}<title>traceparse: {html.escape(run)}</title></head>"
        f"<body><p><b>{html.escape(run)}</b>: {html.escape(message)}</p></body></html>"
    ).encode()


def module_source() -> bytes:
    """The dashboard's ES module (``static/index.js``)."""
    return (resources.files(__package__) / "static" / "index.js").read_bytes()


def _module_app(environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
    return _respond(start, "200 OK", "text/javascript; charset=utf-8", module_source())


# The page ``traceparse serve`` opens at "/": what TensorBoard's plugin_entry.html
# does (a base at the plugin's routes, then the module's render()), with a policy
# like TensorBoard's: scripts from here and this one inline script (by hash), the
# module's own <style>, frames from here (the report), no icon fetched.
_LOADER = 'import("./index.js").then((m) => void m.render());'
_ENTRY = (
    '<!DOCTYPE html><html><head><meta charset="utf-8"><title>traceparse</title>'
    f'<base href="{ROUTE_PREFIX}/"><link rel="icon" href="data:,"></head><body>'
    f'<script type="module">{_LOADER}</script></body></html>'
).encode()
_ENTRY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'sha256-"
        + base64.b64encode(hashlib.sha256(_LOADER.encode()).digest()).decode()
        + "'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "frame-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
    ]
)


def serve_app(dashboard: Dashboard) -> WSGIApp:
    """One WSGI app for ``traceparse serve``: the entry page at "/", the routes under
    ``ROUTE_PREFIX`` as in TensorBoard; anything else is a 404."""
    routes = {ROUTE_PREFIX + route: app for route, app in dashboard.apps().items()}

    def app(environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("", "/", "/index.html"):
            policy = [("Content-Security-Policy", _ENTRY_POLICY)]
            return _respond(start, "200 OK", "text/html; charset=utf-8", _ENTRY, policy)
        route = routes.get(path)
        if route is None:
            return _text(start, "404 Not Found", "not found")
        return route(environ, start)

    return app
