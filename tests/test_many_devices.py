"""Captures with many allocators: the summary starts with one line per host and
allocator and flags the fullest; plots start at the first known counter value."""

from __future__ import annotations

import io

from helpers.devices import many
from helpers.trace import GPU, alloc, trace_of

from traceparse.cli._summary_view import print_summaries
from traceparse.core.profile import Profile
from traceparse.output.terminal import Terminal

MiB = 2**20


def summary_text(profile: Profile) -> str:
    out = io.StringIO()
    print_summaries([profile], Terminal(stream=out, err=io.StringIO(), color=False))
    return out.getvalue()


def test_the_summary_starts_with_one_line_per_host_and_allocator() -> None:
    profile = many()
    text = summary_text(profile)
    overview, first_block = text.index("Allocators (4;"), text.index("Allocator GPU_0_bfc")
    assert overview < first_block
    lines = text[overview:first_block].splitlines()
    rows = [line for line in lines if line.startswith("worker-")]
    assert len(rows) == 4
    flagged = [line for line in rows if "fullest" in line]
    # worker-b's GPU holds 300 MiB of the same capacity: the fullest.
    assert len(flagged) == 1 and flagged[0].split()[:2] == ["worker-b", GPU]
    # The share from before the capture: 32 of worker-a's 96 MiB.
    row_a = next(line for line in rows if line.split()[:2] == ["worker-a", GPU])
    assert "96 MiB" in row_a and "33.3%" in row_a


def test_one_allocator_gets_no_overview() -> None:
    profile = Profile([trace_of([alloc(10, 1, MiB)])], run="r")
    assert "Allocators (" not in summary_text(profile)


def test_the_plot_of_a_late_allocator_starts_at_its_counter_not_at_zero() -> None:
    from traceparse.report.plots import line_points

    # gpu_host_bfc held 32 MiB from before the capture; its first event comes late.
    late = trace_of(
        [alloc(10, 1, MiB), alloc(5_000, 2, 8 * MiB, allocator="gpu_host_bfc")],
        before={"gpu_host_bfc": 32 * MiB},
    )
    timeline = Profile([late]).timeline
    mine = timeline[timeline["allocator"].astype(str) == "gpu_host_bfc"]
    from traceparse.records.timeline import counter_before

    start = counter_before(mine)
    assert start == 32 * MiB  # the counter before its first event, not 0
    t, y = line_points(mine["time_ps"].to_numpy(), mine["in_use_bytes"].to_numpy(), start)
    assert t.tolist() == [0, 5_000] and y.tolist() == [32 * MiB, 40 * MiB]
