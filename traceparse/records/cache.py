"""Sections built once per profile: a cache keyed by the profile itself.

A section built from a profile on demand (``records.sections.PROFILE_SECTIONS``)
that several renderers draw, or that costs replays, is built the first time one
asks and kept while the profile lives (a weak reference: the cache never keeps a
profile alive). A stand-in that cannot be weakly referenced is built each time.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["once_per_source"]

T = TypeVar("T")

_BUILT: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def once_per_source(source: Any, name: str, build: Callable[[], T]) -> T:
    """``build()``, kept as ``source``'s section ``name`` after the first call."""
    try:
        mine = _BUILT.setdefault(source, {})
    except TypeError:  # not weakly referenceable (or unhashable): nothing to key on
        return build()
    if name not in mine:
        mine[name] = build()
    value: T = mine[name]
    return value
