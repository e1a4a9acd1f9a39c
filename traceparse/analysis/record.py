"""Deprecated: the allocator record moved to ``traceparse.records`` (CHANGELOG.md).

For a release the old name imports, with a ``DeprecationWarning``, as the very
module at its new home (``records.allocator``): no name is repeated here.
"""

import sys
import warnings

from traceparse.records import allocator

warnings.warn(
    "traceparse.analysis.record moved to traceparse.records; the old name goes in a later release",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = allocator
