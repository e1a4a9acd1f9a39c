"""pytest plugin: memory budgets on tests that run TensorFlow.

Installed with traceparse (the ``pytest11`` entry point), so it is active in
every pytest run; it does nothing, and imports neither TensorFlow nor the
analysis, until a test uses the ``tf_memory`` marker or fixture.

::

    @pytest.mark.tf_memory(max_peak="512MiB", max_padding="25%")
    def test_train_step():
        model.train_on_batch(x, y)

    def test_no_growth(tf_memory):
        for step in range(4):
            with tf_memory.step(step):
                model.train_on_batch(x, y)
        assert tf_memory.profile.leaks().verdict == "stable"

The test body runs under the TensorFlow profiler (fixtures' setup and
teardown do not). After it, each budget of the marker is judged per allocator
(as ``traceparse check`` does); a breach fails the test with the breaches and
a table of the largest tensors live at the peak. With
``--traceparse-report-dir DIR`` each profiled test also leaves a report there
(``DIR/<test id>.md`` by default), passed or failed.

Marker arguments: ``max_peak`` (size: ``"512MiB"`` or bytes), ``max_utilisation``
and ``max_padding`` (``"90%"`` or a fraction), ``no_leaks`` (needs 3 or more
steps marked with ``tf_memory.step(n)``), ``baseline`` (a file from
``traceparse baseline``) with ``tolerance`` (default ``"5%"``), ``allocator``
(judge only that one; default every allocator), ``allow_empty`` (pass when the
capture has no memory events; by default that fails, since nothing was
measured).
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from traceparse.report.formats import NAMES

if TYPE_CHECKING:
    from traceparse.capture.session import Capture
    from traceparse.core.profile import Profile
    from traceparse.gate.budgets import Budgets, Result

__all__ = ["TFMemory"]

MARKER = "tf_memory"
REPORT_FORMATS = NAMES  # report.formats.REPORT_FORMATS
_MARKER_ARGS = (
    "max_peak",
    "max_utilisation",
    "max_padding",
    "no_leaks",
    "baseline",
    "tolerance",
    "allocator",
    "allow_empty",
)


class TFMemory:
    """The memory profile of one test: what the ``tf_memory`` fixture gives.

    The profiler runs during the test body. ``step(n)`` marks a step;
    ``profile`` stops the profiler (the rest of the body is not captured) and
    returns the ``traceparse.Profile``; ``check(...)`` judges budgets now and
    fails the test on a breach.
    """

    def __init__(self, item: pytest.Item, logdir: Path, temporary: bool) -> None:
        self.item = item
        self.logdir = logdir
        self._temporary = temporary
        self.results: list[Result] = []
        self.report_path: Path | None = None
        self._capture: Capture | None = None
        self._profile: Profile | None = None

    @property
    def running(self) -> bool:
        return self._capture is not None and self._capture.running

    def start(self) -> None:
        """Start the profiler (done for you before the test body)."""
        if self._capture is not None:
            return
        from traceparse.capture.session import profile
        from traceparse.errors import TraceparseError

        self._capture = profile(self.logdir)
        try:
            self._capture.start()
        except TraceparseError as exc:
            pytest.fail(f"tf_memory: {exc}", pytrace=False)

    def stop(self) -> None:
        """Stop the profiler and write the capture (done for you after the test body)."""
        if self._capture is not None and self._capture.running:
            from traceparse.errors import TraceparseError

            try:
                self._capture.stop()
            except TraceparseError as exc:
                pytest.fail(f"tf_memory: {exc}", pytrace=False)

    def cleanup(self) -> None:
        """Remove the capture unless it is kept (``--traceparse-keep-captures``)."""
        if self._temporary:
            import shutil

            shutil.rmtree(self.logdir, ignore_errors=True)

    def step(self, step_num: int, name: str = "train") -> AbstractContextManager[Any]:
        """Mark one step: ``with tf_memory.step(n): train_step()``."""
        if self._capture is None or not self._capture.running:
            raise RuntimeError("tf_memory.step() works only inside the test body, while profiling")
        return self._capture.step(step_num, name)

    @property
    def profile(self) -> Profile:
        """The capture of the test body, read; stops the profiler if it is still running."""
        if self._profile is None:
            if self._capture is None:
                raise RuntimeError("the test body has not started, so nothing was profiled yet")
            self.stop()
            self._profile = self._capture.load()
        return self._profile

    def check(self, **budgets: Any) -> list[Result]:
        """Judge budgets (the marker's arguments) now; fail the test on a breach."""
        results = _judge(self, _budgets(self.item, budgets))
        self.results.extend(results)
        _fail_on_breach(self, results)
        return results


_STATE = pytest.StashKey[TFMemory]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("traceparse", "TensorFlow memory budgets (traceparse)")
    group.addoption(
        "--traceparse-report-dir",
        metavar="DIR",
        default=None,
        help="write a memory report for each test profiled by tf_memory into DIR",
    )
    group.addoption(
        "--traceparse-report-format",
        choices=REPORT_FORMATS,
        default="md",
        help="report format: md (default; with the budget results), html or json",
    )
    group.addoption(
        "--traceparse-keep-captures",
        action="store_true",
        default=False,
        help="keep each test's profiler capture in the report directory, next to its report",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "tf_memory(max_peak=None, max_utilisation=None, max_padding=None, no_leaks=False, "
        "baseline=None, tolerance='5%', allocator=None, allow_empty=False): profile the "
        "test body with the TensorFlow profiler and fail the test when a memory budget "
        "is breached (traceparse)",
    )


def _state(item: pytest.Item, create: bool) -> TFMemory | None:
    state = item.stash.get(_STATE, None)
    if state is None and create:
        logdir, temporary = _logdir(item)
        state = TFMemory(item, logdir, temporary)
        item.stash[_STATE] = state
    return state


@pytest.fixture
def tf_memory(request: pytest.FixtureRequest) -> Iterator[TFMemory]:
    """The test body's memory profile (``TFMemory``): ``.profile``, ``.step(n)``, ``.check()``."""
    state = _state(request.node, create=True)
    assert state is not None
    yield state
    state.stop()  # the body never ran (a setup error) or left it running


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    marker = item.get_closest_marker(MARKER)
    state = _state(item, create=marker is not None)
    if state is None:
        return (yield)
    budgets = None
    if marker is not None:
        if marker.args:
            pytest.fail("tf_memory takes keyword arguments only, such as max_peak='512MiB'")
        budgets = _budgets(item, dict(marker.kwargs))
    state.start()
    try:
        outcome = yield
    except BaseException:
        state.stop()
        _save_report(state)
        raise
    state.stop()
    try:
        if budgets is not None:
            state.results.extend(_judge(state, budgets))
    finally:
        _save_report(state)
        _record(state)
    _fail_on_breach(state, state.results)
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    finally:
        state = item.stash.get(_STATE, None)
        if state is not None:
            state.stop()
            state.cleanup()


def _budgets(item: pytest.Item, kwargs: dict[str, Any]) -> Budgets:
    from traceparse.core.loading import load
    from traceparse.errors import TraceparseError
    from traceparse.gate.baseline import baseline_of, is_baseline_file
    from traceparse.gate.budgets import DEFAULT_TOLERANCE, Budgets

    unknown = sorted(set(kwargs) - set(_MARKER_ARGS))
    if unknown:
        pytest.fail(
            f"tf_memory: unknown argument{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}; it takes {', '.join(_MARKER_ARGS)}",
            pytrace=False,
        )
    baseline = kwargs.get("baseline")
    if baseline is not None and not os.path.isabs(os.fspath(baseline)):
        baseline = os.path.join(str(item.config.rootpath), os.fspath(baseline))
    try:
        if baseline is not None and not is_baseline_file(baseline):
            baseline = baseline_of(load(baseline))  # a capture as the baseline
        budgets = Budgets.from_options(
            max_peak=kwargs.get("max_peak"),
            max_utilisation=kwargs.get("max_utilisation"),
            max_padding=kwargs.get("max_padding"),
            no_leaks=bool(kwargs.get("no_leaks", False)),
            baseline=baseline,
            tolerance=kwargs.get("tolerance", DEFAULT_TOLERANCE),
            allocator=kwargs.get("allocator"),
            allow_empty=bool(kwargs.get("allow_empty", False)),
        )
    except TraceparseError as exc:
        pytest.fail(f"tf_memory: {exc}", pytrace=False)
    if budgets.empty:
        pytest.fail(
            "tf_memory: no budget given; use max_peak, max_utilisation, max_padding, "
            "no_leaks or baseline (or the tf_memory fixture alone to read the profile)",
            pytrace=False,
        )
    return budgets


def _judge(state: TFMemory, budgets: Budgets) -> list[Result]:
    """The gate's verdict (``traceparse check``'s own ``judge``) on the test body."""
    from traceparse.errors import TraceparseError
    from traceparse.gate.verdict import judge

    try:
        return judge(state.profile, budgets, state.item.nodeid).results
    except TraceparseError as exc:
        pytest.fail(f"tf_memory: {exc}", pytrace=False)


def _fail_on_breach(state: TFMemory, results: list[Result]) -> None:
    if not any(r.failed for r in results):
        return
    from traceparse.gate.render import failure_message

    report = None if state.report_path is None else str(state.report_path)
    pytest.fail(failure_message(state.item.nodeid, results, state.profile, report), pytrace=False)


def _record(state: TFMemory) -> None:
    """Peaks as test properties (pytest's --junitxml shows them)."""
    if state._profile is None:
        return
    for summary in state._profile.summary():
        state.item.user_properties.append(
            (f"tf_memory_peak_bytes[{summary.allocator}]", summary.peak_bytes)
        )


# -- files --------------------------------------------------------------------


def _safe_name(nodeid: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("._") or "test"
    if len(name) > 120:
        import hashlib

        digest = hashlib.sha1(nodeid.encode("utf-8")).hexdigest()[:10]
        name = f"{name[:100]}_{digest}"
    return name


def _report_dir(config: pytest.Config) -> Path | None:
    value = config.getoption("--traceparse-report-dir")
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def _logdir(item: pytest.Item) -> tuple[Path, bool]:
    """Where the test's capture goes, and whether it is temporary (removed after the test)."""
    reports = _report_dir(item.config)
    if reports is not None and item.config.getoption("--traceparse-keep-captures"):
        return reports / f"{_safe_name(item.nodeid)}.capture", False
    import tempfile

    return Path(tempfile.mkdtemp(prefix="tf_memory-")), True


def _save_report(state: TFMemory) -> None:
    directory = _report_dir(state.item.config)
    if directory is None or state._capture is None or state._capture.run_dir is None:
        return
    from traceparse.errors import TraceparseError

    fmt = state.item.config.getoption("--traceparse-report-format")
    path = directory / f"{_safe_name(state.item.nodeid)}.{fmt}"
    try:
        profile = state.profile
        text = _report_text(state, profile, fmt)
        from traceparse.files.atomic import atomic_write

        atomic_write(path, text)
    except (TraceparseError, OSError) as exc:
        state.item.warn(pytest.PytestWarning(f"tf_memory: no report written to {path}: {exc}"))
        return
    state.report_path = path


def _report_text(state: TFMemory, profile: Profile, fmt: str) -> str:
    """The report in ``fmt`` (a name of ``report.formats.REPORT_FORMATS``): Markdown
    and JSON with the test's budgets added, any other format as its renderer writes it."""
    from traceparse.report import render_json, render_markdown
    from traceparse.report.formats import named

    if fmt not in ("md", "json"):
        return named(fmt).render([profile])
    if fmt == "json":
        import json

        data = {
            "test": state.item.nodeid,
            "budgets": [r.to_dict() for r in state.results],
            "report": json.loads(render_json([profile])),
        }
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    from traceparse.gate.render import check_markdown

    text = ""
    if state.results:
        text = check_markdown(state.results, state.item.nodeid) + "\n"
    report = render_markdown([profile])
    if state._temporary:  # the capture is removed after the test: link nothing
        kept = (
            "- Capture: not kept (removed after the test; pytest "
            "--traceparse-keep-captures keeps it next to this report)"
        )
        lines = report.split("\n")
        report = "\n".join(
            kept if line.startswith("- Capture: ") and str(state.logdir) in line else line
            for line in lines
        )
    return text + report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    directory = _report_dir(config)
    if directory is not None and directory.is_dir() and any(directory.iterdir()):
        terminalreporter.write_line(f"traceparse: memory reports in {directory}")
