"""Deprecated: the records' builder moved to ``traceparse.records.build``.

The old spelling keeps working for a release with a ``DeprecationWarning``
(CHANGELOG.md).
"""

from __future__ import annotations

import warnings

from traceparse.records.build import (
    OPTIONAL_FIELDS,
    TOP_OP_COLUMNS,
    TOP_SCOPE_COLUMNS,
    TOP_TENSOR_COLUMNS,
    TOP_VARIABLE_COLUMNS,
    AllocatorRecord,
    AllocatorSummary,
    build_records,
    build_summaries,
    owned,
    plain,
)

__all__ = [
    "OPTIONAL_FIELDS",
    "TOP_OP_COLUMNS",
    "TOP_SCOPE_COLUMNS",
    "TOP_TENSOR_COLUMNS",
    "TOP_VARIABLE_COLUMNS",
    "AllocatorRecord",
    "AllocatorSummary",
    "build_records",
    "build_summaries",
    "owned",
    "plain",
]

warnings.warn(
    "traceparse.analysis.summary moved to traceparse.records.build; the old name goes in a "
    "later release",
    DeprecationWarning,
    stacklevel=2,
)
