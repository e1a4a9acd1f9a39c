"""The gate's verdict on a capture that ended in out-of-memory (issue 39).

A run that died of out-of-memory fails ``traceparse check`` whatever its
budgets say (a peak within budget says nothing about a step that never
finished), with its own exit code (``OutOfMemoryError``, 5). The failure is one
more ``Result`` (budget ``out_of_memory``), so the check's lines, its JSON, the
JUnit file and the job summary all say why, in the failure's own sentence.
"""

from __future__ import annotations

from traceparse.gate.budgets import Contributor, Result
from traceparse.output.failure import failure_sentence
from traceparse.records.failure import failure_sections
from traceparse.records.source import RecordSource

OUT_OF_MEMORY = "out_of_memory"
# Holders named as a result's contributors.
_HOLDERS = 5


def out_of_memory_results(profile: RecordSource) -> list[Result]:
    """One failed ``Result`` per host whose capture ended in out-of-memory (the
    record's failure section: ``records.failure``)."""
    results = []
    for section in failure_sections(profile):
        f = section.failure
        if not f.out_of_memory:
            continue
        holders = section.holders()
        results.append(
            Result(
                budget=OUT_OF_MEMORY,
                host=f.host,
                allocator=f.allocator or "(allocator unknown)",
                status="fail",
                message=failure_sentence(f, holders),
                measured=None if f.requested_bytes is None else float(f.requested_bytes),
                allowed=None if f.free_bytes is None else float(f.free_bytes),
                contributors=tuple(
                    Contributor(name, size, "in use at the failure")
                    for name, size in holders[:_HOLDERS]
                ),
            )
        )
    return results
