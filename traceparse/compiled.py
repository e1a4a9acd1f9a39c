"""traceparse's optional C extensions (the decoder's loops, the array pool).

``pip install`` builds each where a C compiler is at hand and goes on without
it elsewhere; the code that uses one keeps a path for when it is missing, and
an environment variable asks for that path on purpose.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Extension:
    """An extension that may be missing, and whether it is in use: built, and
    ``off_by`` not set in the environment (tests and code may switch it)."""

    def __init__(self, module: str, off_by: str) -> None:
        self.module: Any
        try:
            self.module = importlib.import_module(module)
        except ImportError:  # not built: no compiler where it was installed
            self.module = None
        self.on = self.module is not None and not os.environ.get(off_by)

    def enable(self, on: bool) -> bool:
        """Use it (where built) from now on, or not; returns whether it was in use."""
        before, self.on = self.on, on and self.module is not None
        return before

    @contextmanager
    def used(self, on: bool) -> Iterator[None]:
        """With (``True``, where built) or without it inside the block."""
        before = self.enable(on)
        try:
            yield
        finally:
            self.enable(before)
