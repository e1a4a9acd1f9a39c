"""Where the arrays of loading and analysing a capture get their memory.

Decoding a capture and building its tables makes and frees a few hundred
arrays of a row each, tens to hundreds of MB apiece. With NumPy's default
allocator each one is fresh memory from the kernel (glibc maps large
allocations anew and unmaps them on free), zeroed a page at a time, and on a
1.2 GB capture that made the time per MB grow with the file
(``benchmarks/RESULTS.md``, "Speed"). Inside ``pooled()``, NumPy arrays of
1 MiB or more come from a pool (``_pool.c``) that gives the pages of a freed
array to the next one, and unmaps what it holds when the outermost scope ends.
It never holds more than the peak of the arrays alive at once.

The pool is NumPy's own mechanism for this (a data allocator, chosen per
context and thread, NumPy 1.22 on): arrays made inside a scope may outlive it,
and anything else running in the process keeps NumPy's default. Where the
extension was not built (no C compiler at install) ``pooled()`` does nothing;
``TRACEPARSE_NO_POOL=1`` in the environment, ``enable(False)`` or
``use_pool(False)`` turn it off. The commands that read captures turn it off
and have glibc keep freed memory instead (``traceparse.cli.process``): in
their own process that covers every allocation, NumPy's sort buffers and
pandas' hash tables too, and two caches would each hold their own peak.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ParamSpec, TypeVar

from traceparse.compiled import Extension

_extension = Extension("traceparse.core._pool", off_by="TRACEPARSE_NO_POOL")
_pool = _extension.module

P = ParamSpec("P")
R = TypeVar("R")


def available() -> bool:
    """Whether the pool was built and is in use."""
    return _extension.on


def enable(on: bool) -> bool:
    """Use the pool (where built) from now on, or not; returns whether it was in use."""
    return _extension.enable(on)


def use_pool(on: bool) -> AbstractContextManager[None]:
    """With (``True``, where built) or without the pool inside the block; for
    tests and benchmarks."""
    return _extension.used(on)


@contextmanager
def pooled() -> Iterator[None]:
    """NumPy arrays made in this thread inside the block come from the pool."""
    if not _extension.on:
        yield
        return
    before = _pool.enter()
    try:
        yield
    finally:
        _pool.leave(before)


@contextmanager
def pooling_from(size: int) -> Iterator[None]:
    """Arrays of ``size`` bytes or more come from the pool inside the block (1 MiB
    otherwise); for tests, whose captures make no array that large."""
    if _pool is None:
        yield
        return
    before = _pool.set_pooled_from(size)
    try:
        yield
    finally:
        _pool.set_pooled_from(before)


def pooled_call(func: Callable[P, R]) -> Callable[P, R]:
    """``func``, run inside ``pooled()``."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        with pooled():
            return func(*args, **kwargs)

    return call


def stats() -> dict[str, int]:
    """Bytes the pool mapped fresh and reused since the process started, and
    what it holds now; empty where it was not built."""
    return {} if _pool is None else dict(_pool.stats())


def pooled_property(func: Callable[[Any], R]) -> functools.cached_property[R]:
    """A ``cached_property`` computed inside ``pooled()``."""
    return functools.cached_property(pooled_call(func))


def pooled_cache(func: Callable[..., R]) -> Callable[..., R]:
    """A method computed inside ``pooled()`` once per instance and arguments (as
    bound, defaults filled: ``f()`` and ``f(1)`` share when 1 is the default).
    The answers are kept in the instance's ``__dict__``, as ``cached_property``
    keeps its value, so they live and go with it."""
    signature = inspect.signature(func)
    slot = f"_{func.__name__}_answers"

    @functools.wraps(func)
    def call(self: Any, *args: Any, **kwargs: Any) -> R:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        key = tuple(bound.arguments.values())[1:]
        answers: dict[tuple[Any, ...], R] = self.__dict__.setdefault(slot, {})
        if key not in answers:
            with pooled():
                answers[key] = func(self, *args, **kwargs)
        return answers[key]

    return call
