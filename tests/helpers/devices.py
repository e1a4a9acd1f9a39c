"""A profile with many hosts and allocators."""

from __future__ import annotations

from helpers.trace import GPU, alloc, trace_of
from traceparse.core.profile import Profile

MiB = 2**20


def many() -> Profile:
    a = trace_of(
        [alloc(10, 1, 64 * MiB), alloc(20, 2, 8 * MiB, allocator="gpu_host_bfc")],
        host="worker-a",
        before={GPU: 32 * MiB},
    )
    b = trace_of(
        [alloc(10, 1, 300 * MiB), alloc(30, 2, 4 * MiB, allocator="gpu_host_bfc")],
        host="worker-b",
    )
    return Profile([a, b], run="r")
