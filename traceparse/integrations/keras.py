"""``MemoryCallback``: profile a range of Keras ``fit`` batches, with named variables.

::

    from traceparse.integrations.keras import MemoryCallback

    model.fit(x, y, callbacks=[MemoryCallback("logs/", profile_batch=(3, 5),
                                              report="memory.html", max_peak="2GiB")])

``profile_batch`` means what it means for ``keras.callbacks.TensorBoard``: the
batches are counted from 1 within each ``fit``, and ``(3, 5)`` profiles the
third to the fifth. Each batch is marked as a step
(``tf.profiler.experimental.Trace("train", step_num=batch, _r=1)``), so the
capture has one step per batch (numbered 3, 4, 5), and the variable inventory
(``traceparse.capture.inventory``) names the model's weights and optimizer state. When
the range ends the callback can write a report (``.html``, ``.md`` or ``.json``
by the file's suffix) and check budgets, as ``traceparse check`` does.

Importing this module imports Keras (it defines a Keras callback); ``import
traceparse`` does not.
"""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceparse.capture.steps import STEP_NAME, StepMarker, step_markers_in_fit
from traceparse.errors import TraceparseError, UsageError

if TYPE_CHECKING:
    from traceparse.capture.session import Capture
    from traceparse.core.profile import Profile
    from traceparse.gate.budgets import Budgets, Result

__all__ = ["MemoryCallback", "StepMarker", "step_markers_in_fit"]


def _batch_range(profile_batch: Any) -> tuple[int, int] | None:
    """TensorBoard's ``profile_batch``: an int, ``(first, last)`` or ``"first,last"``;
    0 or None profiles nothing."""
    if profile_batch is None:
        return None
    value = profile_batch
    if isinstance(value, str):
        try:
            value = [int(part) for part in value.split(",")]
        except ValueError:
            value = None
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 0 <= value[0] <= value[1]
    ):
        first, last = int(value[0]), int(value[1])
        return None if (first, last) == (0, 0) else (max(first, 1), last)
    raise UsageError(
        "profile_batch must be a batch number, a pair (first, last) of batch numbers "
        f"counted from 1 with first <= last, or 0 to profile nothing; got {profile_batch!r}"
    )


class MemoryCallback(StepMarker):
    """Profile batches ``profile_batch`` of ``fit`` into ``log_dir``, with a variable inventory.

    ``report``: a path ending in ``.html``, ``.md`` or ``.json``, written when
    the range ends. Budgets take the ``check`` command's values
    (``max_peak="2GiB"``, ``max_utilisation="90%"``, ``max_padding``,
    ``no_leaks``, ``baseline``, ``tolerance``, ``allocator``); the results are
    in :attr:`results` and every breach is printed on stderr. With
    ``fail_on_breach`` (the default) a breach raises ``BudgetExceededError``
    when the range ends, which stops ``fit``; a report that cannot be written
    only warns (``RuntimeWarning``), saying where the capture is. When ``fit``
    raises or is interrupted inside the range the profiler is stopped all the
    same and the capture kept. After the range, :attr:`capture` is the
    :class:`traceparse.Capture` and :meth:`load` reads it.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        profile_batch: int | tuple[int, int] | str = (2, 3),
        *,
        report: str | os.PathLike[str] | None = None,
        max_peak: str | int | None = None,
        max_utilisation: str | float | None = None,
        max_padding: str | float | None = None,
        no_leaks: bool = False,
        baseline: str | os.PathLike[str] | None = None,
        tolerance: str | float = "5%",
        allocator: str | None = None,
        fail_on_breach: bool = True,
        step_name: str = STEP_NAME,
    ) -> None:
        super().__init__(step_name)
        from traceparse.capture.checks import check_logdir
        from traceparse.gate.budgets import Budgets

        self.log_dir = check_logdir(log_dir)
        self.profile_batch = _batch_range(profile_batch)
        from traceparse.report.formats import format_of_path, suffix_words

        self.report = None if report is None else Path(os.fspath(report))
        # The report's format, by its suffix (report.formats.REPORT_FORMATS).
        self.report_format = None if self.report is None else format_of_path(self.report)
        if self.report is not None and self.report_format is None:
            raise UsageError(
                f"report {self.report} must end in {suffix_words()} (the format)",
                path=self.report,
            )
        self.budgets: Budgets = Budgets.from_options(
            max_peak=max_peak,
            max_utilisation=max_utilisation,
            max_padding=max_padding,
            no_leaks=no_leaks,
            baseline=baseline,
            tolerance=tolerance,
            allocator=allocator,
            allow_empty=True,
        )
        self.fail_on_breach = bool(fail_on_breach)
        self.capture: Capture | None = None
        self._fit_frame: tuple[int, object] | None = None
        self.results: list[Result] = []
        self._batch = 0

    def on_train_begin(self, logs: Any = None) -> None:
        self._batch = 0  # as TensorBoard counts: from 1 in each fit
        # A capture still running here was left by a fit that raised inside the range.
        self._stop_abandoned("an earlier fit ended inside the profiled range")
        # Keras calls no callback when fit raises (or Ctrl-C stops it); the list of
        # callbacks it made for this fit goes away then, and stops the profiler.
        owner = _callback_list_of(self)
        if owner is not None:
            weakref.finalize(owner, _stop_left_running, weakref.ref(self))
        self._fit_frame = _frame_key(sys._getframe(2))  # CallbackList.on_train_begin's caller
        self._find_adapter()  # the batch each step gets (traceparse.capture.batch)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._batch += 1
        first = None if self.profile_batch is None else self.profile_batch[0]
        if self.capture is None and self._batch == first:
            from traceparse.capture.session import Capture

            self.capture = Capture(self.log_dir, models=[self.model])
            fit_frame = self._fit_frame
            self.capture.abandoned = lambda: not _running_frame(fit_frame)
            self.capture.start()
        if self.capture is not None and self.capture.running:
            self._begin_step(self._batch)
            self.capture._step = self._batch
            self._note_batch(batch, self._batch)
            _guard_train_function(self)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._end_step()
        if (
            self.capture is not None
            and self.capture.running
            and self.profile_batch is not None
            and self._batch >= self.profile_batch[1]
        ):
            self._finish()

    def on_train_end(self, logs: Any = None) -> None:
        self._end_step()
        _unguard_train_function(self)
        if self.capture is not None and self.capture.running:  # fit ended inside the range
            self._finish()

    def _stop_abandoned(self, why: str) -> None:
        """Stop a capture whose fit is gone (it raised, or was interrupted), keeping
        what it recorded; never raises."""
        if self.capture is None or not self.capture.running:
            return
        self._end_step()
        try:
            self.capture.stop()
        except TraceparseError as exc:
            _warn(f"{why}; stopping the profiler failed: {exc}")
            return
        _warn(f"{why}; the profiler was stopped and the capture kept in {self.capture.run_dir}")

    def _failed(self, exc: BaseException) -> None:
        """``fit``'s step raised ``exc`` inside the range: stop the profiler now and
        keep the capture with the failure beside it; never raises."""
        _unguard_train_function(self)
        if self.capture is None or not self.capture.running:
            return
        self.capture.note_failure(exc, "keras")
        try:
            self._stop_abandoned(f"fit raised {type(exc).__name__} in batch {self._batch}")
        except Exception as error:  # never in the way of fit's own exception
            print(f"traceparse: stopping the profiler also failed: {error}", file=sys.stderr)

    def load(self) -> Profile:
        """The capture of the profiled batches, read."""
        if self.capture is None:
            raise UsageError("MemoryCallback has not profiled anything yet", path=self.log_dir)
        return self.capture.load()

    def _finish(self) -> None:
        assert self.capture is not None
        _unguard_train_function(self)
        self.capture.stop()
        if self.report is None and self.budgets.empty:
            return
        where = self.capture.run_dir or self.log_dir
        try:
            profile = self.load()
        except TraceparseError as exc:
            _warn(f"no report and no budget check: {exc}; the capture is in {where}")
            return
        if self.report is not None:
            self._write_report(profile, where)
        if self.budgets.empty:
            return
        from traceparse.gate.verdict import judge

        verdict = judge(profile, self.budgets, str(where))
        self.results = verdict.results
        for result in verdict.breaches:
            print(f"traceparse: {result.line()}", file=sys.stderr)
        if not verdict.passed and self.fail_on_breach:
            raise verdict.error()

    def _write_report(self, profile: Profile, where: Path) -> None:
        """Write the report; a report that cannot be written warns, never stops ``fit``."""
        assert self.report is not None
        from traceparse.report import write_report

        assert self.report_format is not None
        try:
            write_report([profile], self.report_format.name, self.report)
        except (TraceparseError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            _warn(
                f"the report {self.report} could not be written ({reason}); "
                f"the capture is in {where}"
            )


# Exceptions that end a fit's data, not the job: never recorded as failures.
_NOT_FAILURES = ("StopIteration", "StopAsyncIteration", "OutOfRangeError")


def _guard_train_function(callback: MemoryCallback) -> None:
    """Wrap the model's ``train_function`` (which ``fit`` calls after
    ``on_train_batch_begin``) so that an exception in a profiled batch is
    recorded and the capture stopped before it propagates, unchanged: Keras
    calls no callback when a step raises (issue 39)."""
    model: Any = getattr(callback, "model", None)
    function = getattr(model, "train_function", None)
    if function is None or getattr(function, "_traceparse_guard", False):
        return

    def train_function(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            if type(exc).__name__ not in _NOT_FAILURES:
                callback._failed(exc)
            raise

    train_function._traceparse_guard = True  # type: ignore[attr-defined]
    train_function.__wrapped__ = function  # type: ignore[attr-defined]
    model.train_function = train_function


def _unguard_train_function(callback: MemoryCallback) -> None:
    model: Any = getattr(callback, "model", None)
    function = getattr(model, "train_function", None)
    if function is not None and getattr(function, "_traceparse_guard", False):
        model.train_function = function.__wrapped__


def _warn(message: str) -> None:
    warnings.warn(f"traceparse: {message}", RuntimeWarning, stacklevel=3)


def _callback_list_of(callback: MemoryCallback) -> object | None:
    """The ``keras.callbacks.CallbackList`` that called ``callback`` (its caller's
    ``self``), or None when Keras called it some other way."""
    from keras.callbacks import CallbackList

    frame = sys._getframe(2)  # _callback_list_of <- on_train_begin <- CallbackList
    owner = frame.f_locals.get("self") if frame is not None else None
    if isinstance(owner, CallbackList) and callback in getattr(owner, "callbacks", ()):
        return owner
    return None


def _frame_key(frame: Any) -> tuple[int, object] | None:
    """What identifies a running frame without keeping it (and its locals) alive."""
    return None if frame is None else (id(frame), frame.f_code)


def _running_frame(key: tuple[int, object] | None) -> bool:
    """Whether the frame ``key`` names is still on some thread's stack."""
    if key is None:
        return True  # unknown: never taken for abandoned
    for top in sys._current_frames().values():
        frame: Any = top
        while frame is not None:
            if (id(frame), frame.f_code) == key:
                return True
            frame = frame.f_back
    return False


def _stop_left_running(ref: weakref.ref[MemoryCallback]) -> None:
    callback = ref()
    if callback is not None:
        callback._stop_abandoned("fit ended inside the profiled range (an exception or Ctrl-C)")
