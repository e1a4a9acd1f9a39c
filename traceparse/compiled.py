"""traceparse's optional C extensions (the decoder's loops, the array pool).

``pip install`` builds each where a C compiler is at hand and goes on without
it elsewhere; the code that uses one keeps a path for when it is missing, and
an environment variable asks for that path on purpose.
"""

from __future__ import annotations

import importlib
import os
from typing import Any


def optional(module: str, off_by: str) -> tuple[Any, bool]:
    """The extension ``module`` (None where it was not built) and whether to use
    it: built, and ``off_by`` not set in the environment."""
    try:
        extension = importlib.import_module(module)
    except ImportError:  # not built: no compiler where it was installed
        return None, False
    return extension, not os.environ.get(off_by)
