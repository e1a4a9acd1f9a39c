"""Running batch tasks: in this process, in local worker processes, or on a Dask cluster.

Every runner calls the same worker function (``tasks.run_task``) on the same
plain-data tasks, so the outcomes do not depend on where they ran. Each keeps
only a small window of tasks in flight, so memory stays bounded by the largest
capture times the number of workers, whatever the number of captures.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from traceparse.batching.orphans import watch_parent
from traceparse.batching.tasks import Outcome, Task, outcome_of_crash, run_task
from traceparse.errors import UsageError

__all__ = ["OnDone", "run_dask", "run_inline", "run_local"]

OnDone = Callable[[Outcome], None]

# tcp://host:8786, tls://[::1]:8786, inproc://..., or host:port.
_SCHEDULER_ADDRESS = re.compile(
    r"^(?:(?:tcp|tls|inproc|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._/-]+)(?::\d{1,5})?/?$"
)

# Tasks in flight per worker: enough to keep each busy while the parent
# collects a result, few enough that little is lost or held at any time.
_PER_WORKER = 2


def run_inline(tasks: Iterable[Task], on_done: OnDone) -> None:
    """One task after another in this process (``jobs=0``: for debugging, and for
    filesystems that exist only in this process, such as ``memory://``)."""
    for task in tasks:
        on_done(run_task(task))


def _start_worker(started: Any, parent: int) -> None:
    # Ctrl-C is the parent's to handle: it stops the workers itself, and
    # workers would otherwise each print a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A parent killed outright cannot stop its workers: they stop themselves.
    watch_parent(parent)
    started.set()


def _pool(jobs: int, started: Any) -> ProcessPoolExecutor:
    """Spawned workers; each sets ``started`` once it is up and ready for tasks."""
    return ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(started, os.getpid()),
    )


def _never_started() -> UsageError:
    return UsageError(
        "the worker processes exited while starting (their errors are above). A script "
        'that calls traceparse.batch must do so under `if __name__ == "__main__":`, '
        "because each spawned worker imports the script again; or pass jobs=0"
    )


def run_local(tasks: Sequence[Task], jobs: int, on_done: OnDone) -> None:
    """The tasks on ``jobs`` spawned worker processes, one capture per task.

    A worker that dies (killed for memory, a crash in native code) breaks the
    pool; the tasks that were in flight are then rerun one at a time, so only
    the capture that kills a worker on its own is reported as failed, and the
    batch goes on with a fresh pool.
    """
    queue = deque(tasks)
    started = multiprocessing.get_context("spawn").Event()
    executor = _pool(jobs, started)
    inflight: dict[Future[Outcome], Task] = {}
    try:
        while queue or inflight:
            broken = False
            while queue and len(inflight) < jobs * _PER_WORKER:
                task = queue.popleft()
                try:
                    inflight[executor.submit(run_task, task)] = task
                except BrokenProcessPool:
                    queue.appendleft(task)
                    broken = True
                    break
            done: Iterable[Future[Outcome]]
            if inflight and not broken:
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            else:
                done = []
            suspects: list[Task] = []
            for future in done:
                task = inflight.pop(future)
                outcome = _collect(future, task)
                if outcome is None:
                    suspects.append(task)
                else:
                    on_done(outcome)
            if suspects or broken:
                if not started.is_set():
                    # No worker ever came up: the tasks are not to blame.
                    raise _never_started()
                # The whole pool is gone: every task still in flight fails with it.
                wait(inflight)
                for future, task in list(inflight.items()):
                    outcome = _collect(future, task)
                    if outcome is None:
                        suspects.append(task)
                    else:
                        on_done(outcome)
                inflight.clear()
                executor.shutdown(wait=True, cancel_futures=True)
                for outcome in _isolate(suspects, started):
                    on_done(outcome)
                executor = _pool(jobs, started)
    except BaseException:
        _terminate(executor)
        raise
    executor.shutdown(wait=True)


def _collect(future: Future[Outcome], task: Task) -> Outcome | None:
    """The future's outcome; None when its worker process died."""
    try:
        return future.result()
    except BrokenProcessPool:
        return None
    except Exception as exc:
        # run_task never raises, so this is the pool failing to carry the task
        # (pickling, a worker that could not start).
        return outcome_of_crash(task, f"{type(exc).__name__}: {exc}")


def _isolate(suspects: Sequence[Task], started: Any) -> Iterable[Outcome]:
    """Rerun each task alone, so a crash points at exactly one capture."""
    executor: ProcessPoolExecutor | None = None
    try:
        for task in suspects:
            if executor is None:
                executor = _pool(1, started)
            future = executor.submit(run_task, task)
            outcome = _collect(future, task)
            if outcome is None:
                executor.shutdown(wait=True)
                executor = None
                outcome = outcome_of_crash(task, "killed, or crashed in native code")
            yield outcome
    except BaseException:
        if executor is not None:
            _terminate(executor)
        raise
    if executor is not None:
        executor.shutdown(wait=True)


def _terminate(executor: ProcessPoolExecutor) -> None:
    """Stop the workers now (on Ctrl-C): their unfinished writes leave only temporary files."""
    executor.shutdown(wait=False, cancel_futures=True)
    terminate = getattr(executor, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    processes: dict[int, Any] = getattr(executor, "_processes", None) or {}
    for process in list(processes.values()):
        process.terminate()
    for process in list(processes.values()):
        process.join(timeout=5)


def run_dask(tasks: Sequence[Task], scheduler: Any, on_done: OnDone) -> None:
    """The tasks on a Dask distributed cluster: ``scheduler`` is its address or a ``Client``.

    The workers must be able to import traceparse, read the inputs (a shared
    filesystem or URLs) and write to the output directory.
    """
    try:
        from distributed import Client, as_completed
    except ImportError as exc:
        raise UsageError(
            "--scheduler needs dask.distributed: pip install 'traceparse[dask]'"
        ) from exc
    own = isinstance(scheduler, str)
    if own and not _SCHEDULER_ADDRESS.match(scheduler):
        # Checked here: Dask would try to connect to it for its whole timeout.
        raise UsageError(
            f"{scheduler!r} is not a Dask scheduler address; give one such as "
            "tcp://HOST:8786 (or a scheduler file's address)"
        )
    if own:
        try:
            client = Client(scheduler, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(
                f"{scheduler}: cannot connect to the Dask scheduler ({exc}); "
                "check the address (tcp://HOST:8786) and that the scheduler is running"
            ) from exc
    else:
        client = scheduler
    queue = deque(tasks)
    submitted: dict[Any, tuple[Any, Task]] = {}
    running = as_completed(loop=client.loop)

    def submit(task: Task) -> None:
        future = client.submit(run_task, task, pure=False)
        submitted[future.key] = (future, task)
        running.add(future)

    try:
        threads = sum(client.nthreads().values())
        for _ in range(min(len(queue), max(4, threads * _PER_WORKER))):
            submit(queue.popleft())
        for future in running:
            task = submitted.pop(future.key)[1]
            try:
                outcome: Outcome = future.result()
            except Exception as exc:
                # KilledWorker: the task killed the workers Dask tried it on.
                outcome = outcome_of_crash(task, f"{type(exc).__name__}: {exc}")
            future.release()
            on_done(outcome)
            if queue:
                submit(queue.popleft())
    except BaseException:
        client.cancel([future for future, _ in submitted.values()])
        raise
    finally:
        if own:
            client.close()
