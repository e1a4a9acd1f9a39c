"""The JSON documents of ``summary --format json`` and ``oom --format json``.

Each allocator in them is its record's JSON (``output.sentences.summary_record``),
as the report, ``predict`` and ``baseline`` write it: one key set, described by
docs/record-schema.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceparse.core.profile import Profile


def summaries_as_dicts(profiles: Sequence[Profile]) -> list[dict[str, Any]]:
    """The summary as plain data, for ``summary --format json``."""
    from traceparse.output.jsonvalues import json_records
    from traceparse.output.sentences import summary_record
    from traceparse.report.failure import failure_records

    return [
        {
            "run": profile.run,
            # Issue 39: a key only when the capture ended in failure.
            **({"failures": failure_records(profile)} if profile.failures() else {}),
            "hosts": list(profile.hosts),
            "paths": list(profile.paths),
            "allocators": [summary_record(summary) for summary in profile.summary()],
            "layers": json_records(profile.layers()),
            "diagnostics": list(profile.diagnostics()),
        }
        for profile in profiles
    ]


def failures_as_dicts(profiles: Sequence[Profile]) -> list[dict[str, Any]]:
    """The failures and every allocator's record, for ``oom --format json``."""
    from traceparse.output.sentences import summary_record
    from traceparse.report.failure import failure_records

    return [
        {
            "run": profile.run,
            "hosts": list(profile.hosts),
            "paths": list(profile.paths),
            "failures": failure_records(profile),
            "allocators": [summary_record(r) for r in profile.summary()],
        }
        for profile in profiles
    ]
