"""The dashboard's routes, called as WSGI apps in this process, on real fixture captures.

The report and record routes must give what ``traceparse report`` writes for
the same run, byte for byte (``SOURCE_DATE_EPOCH`` pins the timestamp), so
they are the report's views and not a second rendering. Names come from
discovery only: anything else is a 404, and a name that is markup stays text.
"""

from __future__ import annotations

import html
import os
import shutil
import time
from pathlib import Path

import pytest
from helpers.dashboard import (
    FIXTURES,
    HOSTILE,
    by_name,
    call,
    json_of,
    make_logdir,
    run_of,
    wait_all_done,
)

from traceparse.core.loading import load_all
from traceparse.integrations.tensorboard.app import (
    RECORD,
    REPORT,
    ROUTE_PREFIX,
    RUNS,
    Dashboard,
    run_names,
    serve_app,
)
from traceparse.report import write_report

P = ROUTE_PREFIX


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """(logdir, dashboard, app, the runs once every analysis finished)."""
    os.environ["SOURCE_DATE_EPOCH"] = "1764547200"  # the report's "generated" line, pinned
    logs = make_logdir(tmp_path_factory.mktemp("dashboard"))
    dashboard = Dashboard(str(logs))
    app = serve_app(dashboard)
    runs = wait_all_done(lambda: json_of(call(app, P + RUNS)[2]))
    yield logs, dashboard, app, runs
    dashboard.close()
    os.environ.pop("SOURCE_DATE_EPOCH", None)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def test_runs_lists_every_run_with_its_status(served) -> None:  # type: ignore[no-untyped-def]
    logs, _dashboard, _app, runs = served
    found = by_name(runs)
    names = {run_of(logs, e)[0] for e in ("cnn", "leak", "broken", HOSTILE)}
    assert set(found) == names
    cnn = found[run_of(logs, "cnn")[0]]
    assert cnn["status"] == "ready" and cnn["hosts"] == ["localhost"]
    (mklcpu,) = cnn["allocators"]
    # The headline is the record's: the same peak the JSON report has.
    profile = load_all(str(run_of(logs, "cnn")[1]))[0]
    (summary,) = profile.summary()
    assert mklcpu["peak_bytes"] == summary.peak_bytes
    assert mklcpu["allocator"] == summary.allocator
    # A capture that does not load is its one-line error, naming the file.
    broken = found[run_of(logs, "broken")[0]]
    assert broken["status"] == "error"
    assert "localhost.xplane.pb" in broken["error"] and "\n" not in broken["error"]


def test_report_is_traceparse_reports_html(served) -> None:  # type: ignore[no-untyped-def]
    logs, _dashboard, app, _runs = served
    for experiment in ("cnn", "leak"):
        name, run_dir = run_of(logs, experiment)
        status, headers, body = call(app, P + REPORT, run=name)
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        expected = write_report(load_all(str(run_dir)), "html")
        assert body.decode() == expected
        # ... and by host: the one host of this run.
        assert call(app, P + REPORT, run=name, host="localhost")[2] == body


def test_record_is_traceparse_reports_json(served) -> None:  # type: ignore[no-untyped-def]
    logs, _dashboard, app, _runs = served
    name, run_dir = run_of(logs, "cnn")
    status, headers, body = call(app, P + RECORD, run=name)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert body.decode() == write_report(load_all(str(run_dir)), "json")
    record = json_of(body)
    assert record["profiles"][0]["summary"][0]["peak_bytes"] > 0


@pytest.mark.parametrize(
    "query",
    [
        {"run": "../../etc"},
        {"run": "..%2F..%2Fetc"},  # encoded once more: decoded, it is still not a run
        {"run": "/etc/passwd"},
        {"run": "cnn"},  # a directory, not a run
        {"run": "cnn/plugins/profile/" + "x"},
        {},
        {"run": "cnn/2026_11_30_16_15_41", "host": "../../etc"},
    ],
)
def test_names_not_found_by_discovery_are_404(served, query) -> None:  # type: ignore[no-untyped-def]
    _logs, _dashboard, app, _runs = served
    for route in (REPORT, RECORD):
        status, _headers, body = call(app, P + route, **query)
        assert status == 404, (route, query, body)


def test_a_url_encoded_traversal_is_404_on_the_wire(served) -> None:  # type: ignore[no-untyped-def]
    """The query string as a browser sends it (``%2F`` for "/"): parsed, then looked up."""
    _logs, _dashboard, app, _runs = served
    got: dict[str, str] = {}
    environ = {"PATH_INFO": P + REPORT, "QUERY_STRING": "run=..%2F..%2F..%2Fetc%2Fpasswd"}
    body = b"".join(app(environ, lambda s, h: got.update(status=s)))
    assert got["status"].startswith("404") and b"root:" not in body
    assert call(app, "/data/plugin/traceparse/../../etc/passwd")[0] == 404


def test_a_name_that_is_markup_stays_text(served) -> None:  # type: ignore[no-untyped-def]
    logs, _dashboard, app, _runs = served
    name, _run_dir = run_of(logs, HOSTILE)
    raw = call(app, P + RUNS)[2]
    assert b"<img" not in raw  # JSON escapes "<": inert in any page
    assert name in by_name(json_of(raw))
    status, _headers, body = call(app, P + REPORT, run=name)
    assert status == 200
    assert HOSTILE not in body.decode()


def test_error_page_escapes_and_says_the_error(served) -> None:  # type: ignore[no-untyped-def]
    logs, _dashboard, app, runs = served
    name, _run_dir = run_of(logs, "broken")
    status, _headers, body = call(app, P + REPORT, run=name)
    assert status == 422
    assert html.escape(by_name(runs)[name]["error"]) in body.decode()


def test_results_are_cached_until_the_capture_changes(tmp_path: Path) -> None:
    logs = make_logdir(tmp_path)
    before = _tree(logs)
    dashboard = Dashboard(str(logs))
    app = serve_app(dashboard)
    try:
        name, run_dir = run_of(logs, "leak")
        wait_all_done(lambda: json_of(call(app, P + RUNS)[2]))
        (run,) = [r for n, r in dashboard.runs().items() if n == name]
        first = dashboard.state(run)[1]
        assert dashboard.state(run)[1] is first  # the same result: not analysed again
        capture = run_dir / "localhost.xplane.pb"
        stat = capture.stat()
        os.utime(capture, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
        status, _job = dashboard.state(run)
        assert status == "pending"  # a rewritten capture is analysed again
        again = wait_all_done(lambda: json_of(call(app, P + RUNS)[2]))
        assert by_name(again)[name]["status"] == "ready"
        assert dashboard.state(run)[1] is not first
    finally:
        dashboard.close()
    after = _tree(logs)
    # Nothing written into the logdir (the one mtime this test moved aside).
    moved = str(capture.relative_to(logs))
    assert {k: v for k, v in after.items() if k != moved} == {
        k: v for k, v in before.items() if k != moved
    }
    assert set(after) == set(before)


def test_the_runs_route_answers_while_an_analysis_runs(tmp_path: Path) -> None:
    logs = make_logdir(tmp_path)
    dashboard = Dashboard(str(logs))
    app = serve_app(dashboard)
    try:
        start = time.monotonic()
        status, _headers, body = call(app, P + RUNS)
        took = time.monotonic() - start
        assert status == 200
        statuses = {r["status"] for r in json_of(body)["runs"]}
        assert statuses == {"pending"}  # queued, not analysed in the request
        assert took < 1.0, took
        # A report asked for while pending says so, and refreshes itself.
        name, _ = run_of(logs, "cnn")
        status, _headers, page = call(app, P + REPORT, run=name)
        assert status in (202, 200)
        if status == 202:
            assert b"analysing" in page and b'http-equiv="refresh"' in page
        wait_all_done(lambda: json_of(call(app, P + RUNS)[2]))
    finally:
        dashboard.close()


def test_run_names_are_unique_and_short(tmp_path: Path) -> None:
    from traceparse.files.discover import CaptureFile

    def capture(run_dir: str) -> CaptureFile:
        return CaptureFile(
            str(tmp_path / run_dir), "h", str(tmp_path / run_dir / "h.xplane.pb"), "xplane"
        )

    found = run_names(
        [
            capture("a/plugins/profile/r1"),
            capture("a/train/plugins/profile/r1"),
            capture("b/r2"),
            capture("b/plugins/profile/r2"),
        ],
        str(tmp_path),
    )
    # The short form where it is unique; the whole relative path where two collide.
    assert set(found) == {"a/r1", "a/train/r1", "b/r2", "b/plugins/profile/r2"}


def test_the_module_and_entry_page(served) -> None:  # type: ignore[no-untyped-def]
    _logs, _dashboard, app, _runs = served
    status, headers, body = call(app, P + "/index.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert b"export async function render" in body
    assert b"innerHTML" not in body  # names go in as text only
    status, _headers, page = call(app, "/")
    assert status == 200 and f'<base href="{P}/">'.encode() in page
    assert call(app, "/etc/passwd")[0] == 404


def test_a_run_of_two_hosts_has_a_report_per_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "logs" / "plugins" / "profile" / "2026_12_05_10_00_00"
    run_dir.mkdir(parents=True)
    for host, fixture in (("worker-a", "leak"), ("worker-b", "keras_train")):
        (capture,) = (FIXTURES / fixture).glob("plugins/profile/*/localhost.xplane.pb")
        shutil.copy(capture, run_dir / f"{host}.xplane.pb")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")
    dashboard = Dashboard(str(tmp_path / "logs"))
    app = serve_app(dashboard)
    try:
        (run,) = wait_all_done(lambda: json_of(call(app, P + RUNS)[2]))["runs"]
        assert run["run"] == "2026_12_05_10_00_00" and run["hosts"] == ["worker-a", "worker-b"]
        assert {a["host"] for a in run["allocators"]} == {"worker-a", "worker-b"}
        both = call(app, P + REPORT, run=run["run"])[2].decode()
        assert both == write_report(load_all(str(run_dir)), "html")
        one = call(app, P + REPORT, run=run["run"], host="worker-b")[2].decode()
        assert one == write_report(load_all(str(run_dir / "worker-b.xplane.pb")), "html")
        assert one != both
        assert call(app, P + REPORT, run=run["run"], host="worker-c")[0] == 404
    finally:
        dashboard.close()


def test_a_new_capture_appears_on_the_next_list(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "leak", logs / "first")
    dashboard = Dashboard(str(logs))
    app = serve_app(dashboard)
    try:
        assert len(json_of(call(app, P + RUNS)[2])["runs"]) == 1
        shutil.copytree(FIXTURES / "keras_train", logs / "second")
        runs = wait_all_done(lambda: json_of(call(app, P + RUNS)[2]))
        assert sorted(r["run"] for r in runs["runs"]) == [
            "first/2026_11_29_14_13_25",
            "second/2026_11_29_14_13_15",
        ]
        assert {r["status"] for r in runs["runs"]} == {"ready"}
    finally:
        dashboard.close()


def test_a_remote_logdir(monkeypatch: pytest.MonkeyPatch) -> None:
    """An fsspec URL (``memory://`` here; ``gs://`` as TensorBoard users have them)."""
    fsspec = pytest.importorskip("fsspec")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")
    fs = fsspec.filesystem("memory")
    (capture,) = (FIXTURES / "leak").glob("plugins/profile/*/localhost.xplane.pb")
    inner = "/dashboard-test/exp/plugins/profile/2026_11_29_14_13_25/localhost.xplane.pb"
    fs.pipe(inner, capture.read_bytes())
    dashboard = Dashboard("memory://dashboard-test")
    app = serve_app(dashboard)
    try:
        (run,) = wait_all_done(lambda: json_of(call(app, P + RUNS)[2]))["runs"]
        assert run["run"] == "exp/2026_11_29_14_13_25" and run["status"] == "ready"
        page = call(app, P + REPORT, run=run["run"])[2].decode()
        run_url = "memory://" + inner.rsplit("/", 1)[0]
        assert page == write_report(load_all(run_url), "html")
        fs.rm(inner)  # gone from the store: gone from the list
        assert json_of(call(app, P + RUNS)[2])["runs"] == []
    finally:
        dashboard.close()
        if fs.exists("/dashboard-test"):
            fs.rm("/dashboard-test", recursive=True)


def test_only_the_serve_command_imports_the_dashboard() -> None:
    """An output-stage consumer: nothing in the pipeline depends on it."""
    package = Path(__file__).resolve().parent.parent / "traceparse"
    dashboard = package / "integrations" / "tensorboard"
    importers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if dashboard not in path.parents
        and "traceparse.integrations.tensorboard" in path.read_text(encoding="utf-8")
    )
    assert importers == ["cli/serve.py"]
