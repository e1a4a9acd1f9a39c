"""Steps and leaks on hand-built traces: markers, the step-id fallback, growth verdicts."""

from __future__ import annotations

import pandas as pd
from helpers.trace import GPU, alloc, free, profile_of, trace_of

from traceparse import Profile
from traceparse.analysis.leaks import MIN_STEPS
from traceparse.output.sentences import leak_growth, leak_message, leak_sentence

MiB = 1 << 20


def leaky_steps(steps: int, *, leak: int = MiB, warmup: int = 4 * MiB) -> list[dict]:
    """Step n runs [100n, 100n + 90]: a temporary, and ``leak`` bytes kept for good.

    Step 0 also builds ``warmup`` bytes of weights (kept, but that is warm-up).
    """
    events = [alloc(5, 1000, warmup, op="weights")]
    for n in range(steps):
        base = 100 * n
        events += [
            alloc(base + 10, 2 * n + 1, 2 * MiB, op="temp"),
            free(base + 50, 2 * n + 1, 2 * MiB),
        ]
        if leak:
            events.append(alloc(base + 60, 2 * n + 2, leak, op="cache/append"))
    return events


def markers(steps: int) -> list[tuple[int, int, int]]:
    return [(n, 100 * n, 100 * n + 90) for n in range(steps)]


def test_marked_steps_have_their_counts_bytes_and_in_use() -> None:
    prof = profile_of(leaky_steps(3), markers=markers(3), before={GPU: 100})
    steps = prof.steps
    assert steps["step"].tolist() == [0, 1, 2]
    assert (steps["source"] == "marker").all() and (steps["name"] == "train").all()
    first, second = steps.iloc[0], steps.iloc[1]
    assert first["start_ps"] == 0 and first["end_ps"] == 90 and first["duration_ps"] == 90
    assert first["allocations"] == 3 and first["allocated_bytes"] == 4 * MiB + 3 * MiB
    assert first["frees"] == 1 and first["freed_bytes"] == 2 * MiB
    assert first["in_use_start_bytes"] == 100
    assert first["in_use_end_bytes"] == 100 + 5 * MiB
    assert first["peak_in_use_bytes"] == 100 + 6 * MiB and first["peak_time_ps"] == 10
    assert second["in_use_start_bytes"] == 100 + 5 * MiB
    assert second["growth_bytes"] == MiB and second["retained_bytes"] == MiB
    assert second["peak_in_use_bytes"] == 100 + 7 * MiB
    # allocations.step and timeline.step agree with the table.
    counts = prof.allocations.groupby("step")["allocated_bytes"].count()
    assert counts.tolist() == steps["allocations"].tolist()


def test_a_step_without_events_still_has_a_row() -> None:
    prof = profile_of([alloc(10, 1, MiB)], markers=[(0, 0, 50), (1, 60, 90), (2, 100, 150)])
    steps = prof.steps
    assert steps["step"].tolist() == [0, 1, 2]
    assert steps["allocations"].tolist() == [1, 0, 0]
    assert steps["in_use_start_bytes"].tolist() == [0, MiB, MiB]
    assert steps["peak_in_use_bytes"].tolist() == [MiB, MiB, MiB]


def test_every_allocator_gets_every_marked_step() -> None:
    events = [alloc(10, 1, MiB), alloc(120, 2, MiB, allocator="gpu_host_bfc")]
    prof = profile_of(events, markers=[(0, 0, 100), (1, 101, 200)])
    steps = prof.steps
    assert len(steps) == 4
    assert steps.groupby("allocator", observed=True)["step"].apply(list).to_dict() == {
        GPU: [0, 1],
        "gpu_host_bfc": [0, 1],
    }


def test_without_markers_steps_come_from_the_allocators_step_ids() -> None:
    events = [
        alloc(10, 1, MiB, step_id=11),
        alloc(20, 2, MiB, step_id=11),
        free(30, 1, MiB),
        alloc(40, 3, 2 * MiB, step_id=12),
        free(50, 2, MiB),
        free(60, 3, 2 * MiB),
    ]
    prof = profile_of(events)
    steps = prof.steps
    # Raw step ids number executions: shown as 1, 2, ... in time order, the id kept.
    assert steps["step"].tolist() == [1, 2]
    assert (steps["source"] == "execution").all()
    # A free has step id 0 ("none"); it belongs to the step of what it releases.
    assert prof.timeline["step"].tolist() == [1, 1, 1, 2, 1, 2]
    assert steps["frees"].tolist() == [2, 1]
    assert steps["start_ps"].tolist() == [10, 40] and steps["end_ps"].tolist() == [50, 60]
    assert prof.allocations["step"].tolist() == [1, 1, 2]
    assert prof.allocations["step_id"].tolist() == [11, 11, 12]


def test_raw_step_ids_become_executions_in_time_order_everywhere() -> None:
    # TensorFlow's ids are large, often negative, and not in time order.
    ids = [-2900173687060638237, 5507777931146067968, -5507777931146067968]
    events = [alloc(10 * (n + 1), n + 1, MiB, step_id=i) for n, i in enumerate(ids)]
    prof = profile_of(events)
    assert prof.steps["step"].tolist() == [1, 2, 3]
    assert prof.steps["start_ps"].is_monotonic_increasing
    assert prof.peak["step"].tolist() == [3]
    from traceparse.report import write_report

    for fmt in ("md", "html"):
        text = write_report([prof], fmt)
        assert not any(str(abs(i)) in text for i in ids), fmt
        assert "execution 3" in text and "numbered in time order" in text, fmt


def test_allocations_outside_every_marked_step_have_no_step() -> None:
    prof = profile_of([alloc(5, 1, MiB), alloc(50, 2, MiB)], markers=[(0, 10, 40)])
    assert prof.allocations["step"].isna().tolist() == [True, True]
    assert prof.steps["allocations"].tolist() == [0]
    assert prof.steps["in_use_start_bytes"].tolist() == [MiB]


def test_steady_growth_after_warmup_is_a_leak_naming_the_op() -> None:
    prof = profile_of(leaky_steps(5), markers=markers(5))
    report = prof.leaks()
    assert report.verdict == "growing"
    assert "growing" in leak_message(report) and "cache/append" in leak_message(report)
    assert "1 MiB per step" in leak_message(report)
    by_op = report.by_op
    assert by_op["op"].astype(str).tolist() == ["cache/append"]
    assert by_op["count"].iloc[0] == 4 and by_op["bytes"].iloc[0] == 4 * MiB
    assert by_op["steps"].iloc[0] == 4
    growth = report.growth
    assert growth["step"].tolist() == [0, 1, 2, 3, 4]
    assert growth["judged"].tolist() == [False, True, True, True, True]
    assert growth["growth_bytes"].tolist()[1:] == [MiB] * 4
    (summary,) = prof.summary()
    assert summary.leak_verdict == "growing" and summary.growth_bytes_per_step == MiB


def test_flat_steps_are_stable_even_with_warmup_allocations() -> None:
    prof = profile_of(leaky_steps(4, leak=0), markers=markers(4))
    report = prof.leaks()
    assert report.verdict == "stable"
    assert report.by_op.empty
    assert report.allocators["total_growth_bytes"].tolist() == [0]


def test_a_one_time_rise_is_stable_and_its_figures_say_so() -> None:
    """Issue 19: "stable … (up in 1 of 2 steps)" beside "Growth +8 MiB per step" contradicted
    itself; a rise in one step of two is stable, and its growth figure is not per step."""
    events = [*leaky_steps(3, leak=0), alloc(160, 99, 16 * MiB, op="cache/build")]
    prof = profile_of(events, markers=markers(3))
    report = prof.leaks()
    (row,) = report.allocators.to_dict("records")
    assert report.verdict == "stable"
    assert (row["judged_steps"], row["grew_steps"], row["total_growth_bytes"]) == (2, 1, 16 * MiB)
    sentence = leak_sentence(row, name="GPU")
    assert "one-time rise" in sentence and "only 1 of 2 steps" in sentence
    assert leak_growth(row) == "+16 MiB over 2 steps, no steady growth"
    (summary,) = prof.summary()
    assert summary.leak == {**row, "host": summary.host, "allocator": summary.allocator}


def test_too_few_steps_is_said_plainly() -> None:
    prof = profile_of(leaky_steps(MIN_STEPS - 1), markers=markers(MIN_STEPS - 1))
    report = prof.leaks()
    assert report.verdict == "too few steps"
    assert f"at least {MIN_STEPS}" in leak_message(report)
    # The suspects are still listed.
    assert report.by_op["op"].astype(str).tolist() == ["cache/append"]


def test_raw_step_ids_are_not_judged_as_training_steps() -> None:
    events = [alloc(10 * n, n, MiB, op="keep", step_id=100 + n) for n in range(1, 8)]
    report = profile_of(events).leaks()
    assert report.verdict == "too few steps"
    assert "no step markers" in leak_message(report)


def test_xprof_step_numbers_of_a_converted_profile_are_judged() -> None:
    events = [alloc(10 * n, n, MiB, op="keep", step_id=n) for n in range(5)]
    prof = profile_of(events, fmt="memory_profile.json")
    assert prof.steps["source"].astype(str).unique().tolist() == ["xprof_step"]
    assert prof.steps["step"].tolist() == [0, 1, 2, 3, 4]
    assert prof.leaks().verdict == "growing"


def test_one_growing_allocator_makes_the_capture_growing() -> None:
    events = [*leaky_steps(4), alloc(5, 77, MiB, allocator="gpu_host_bfc")]
    report = profile_of(events, markers=markers(4)).leaks()
    assert report.verdict == "growing"
    table = report.allocators
    verdicts = dict(zip(table["allocator"].astype(str), table["verdict"], strict=True))
    assert verdicts == {GPU: "growing", "gpu_host_bfc": "stable"}
    assert len(report.growth) == 8
    assert isinstance(report.growth, pd.DataFrame)


def test_each_host_uses_its_own_markers_or_falls_back_alone() -> None:
    marked = trace_of([alloc(10, 1, MiB), alloc(110, 2, MiB)], host="a", markers=markers(2))
    unmarked = trace_of([alloc(10, 1, MiB, step_id=41), alloc(20, 2, MiB, step_id=42)], host="b")
    prof = Profile([marked, unmarked])
    steps = prof.steps
    by_host = steps.groupby("host", observed=True)
    assert by_host["step"].apply(list).to_dict() == {"a": [0, 1], "b": [1, 2]}
    assert by_host["source"].first().astype(str).to_dict() == {"a": "marker", "b": "execution"}
    assert prof.allocations["step"].tolist() == [0, 1, 1, 2]
    assert prof.peak["step"].tolist() == [1, 2]


def test_table_commands_call_unmarked_steps_executions() -> None:
    import io

    from traceparse.cli.allocations import AllocationsCommand
    from traceparse.output.terminal import Terminal

    ids = [-2900173687060638237, 5507777931146067968]
    prof = profile_of([alloc(10 * (n + 1), n + 1, MiB, step_id=i) for n, i in enumerate(ids)])
    table = prof.allocations[["op", "step"]]
    out = io.StringIO()
    command = AllocationsCommand()
    command._print_table(prof, _Args(), Terminal(stream=out, color=False), table, len(table))
    header = out.getvalue().splitlines()[1].split()
    assert header == ["op", "execution"]


class _Args:
    output = None
