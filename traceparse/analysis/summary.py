"""Deprecated: the records' builder moved to ``traceparse.records.build`` (CHANGELOG.md).

For a release the old name imports, with a ``DeprecationWarning``, as the very
module at its new home: no name is repeated here.
"""

import sys
import warnings

from traceparse.records import build

warnings.warn(
    "traceparse.analysis.summary moved to traceparse.records.build; the old name goes in a "
    "later release",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = build
