"""Issue 48 item 3: one answer when the peak repeats.

A training loop reaches its peak once per step; which of those instants is the
latest at the maximum (the one ``peak`` describes, xprof's rule) is chance.
``peak_instants`` lists them all, ``at_instant`` opens any, and the summary's
sentence names the steps and what holds memory at every one, whichever came
last. The ``repeat_*`` fixtures are three captures of ``traceparse demo``'s model
(``fixtures/make_repeats.py``).
"""

from __future__ import annotations

import pytest
from conftest import FIXTURES
from helpers.cli import traceparse_cli
from helpers.trace import alloc, free, profile_of

import traceparse
from traceparse.analysis.peak_repeats import NEAR, held_at_every
from traceparse.errors import UsageError
from traceparse.output.sentences import allocator_notes

MiB = 1 << 20
REPEATS = ("repeat_a", "repeat_b", "repeat_c")


def _steps_of_equal_peaks(last_extra: int) -> list[dict[str, object]]:
    """Three steps, each holding a 4 MiB weight-like buffer and a step's 2 MiB
    temporary; ``last_extra`` bytes more in one step's temporary."""
    events: list[dict[str, object]] = [alloc(0, 1, 4 * MiB, op="model/dense/kernel")]
    for step in range(3):
        t = 100 * (step + 1)
        size = 2 * MiB + (last_extra if step == 1 else 0)
        events += [
            alloc(t, 10 + step, size, op=f"model/dense/MatMul_{step}"),
            free(t + 50, 10 + step, size),
        ]
    return events


def test_each_visit_near_the_peak_is_one_instant_at_its_highest_event() -> None:
    prof = profile_of(_steps_of_equal_peaks(0))
    instants = prof.peak_instants
    assert list(instants["instant"]) == [0, 1, 2]
    assert list(instants["time_ps"]) == [100, 200, 300]
    assert (instants["in_use_bytes"] == 6 * MiB).all()
    # peak keeps the latest at the maximum; at_instant opens the others.
    assert int(prof.peak["time_ps"].iloc[0]) == 300
    first, rows = prof.at_instant("first")
    assert int(first["time_ps"].iloc[0]) == 100 and int(rows["bytes"].sum()) == 6 * MiB
    assert set(rows["op"].dropna()) == {"model/dense/kernel", "model/dense/MatMul_0"}


def _steps(sizes: list[int]) -> list[dict[str, object]]:
    """One step's temporary of each size, in turn (nothing else held)."""
    events: list[dict[str, object]] = []
    for step, size in enumerate(sizes):
        t = 100 * (step + 1)
        events += [
            alloc(t, 10 + step, size, op=f"model/dense/MatMul_{step}"),
            free(t + 50, 10 + step, size),
        ]
    return events


def test_an_instant_at_99_percent_of_the_maximum_counts_and_one_byte_less_does_not() -> None:
    unit = 1 << 16
    top, near = 100 * unit, int(100 * unit * (1 - NEAR))
    assert len(profile_of(_steps([near, top, near])).peak_instants) == 3
    assert len(profile_of(_steps([near - 1, top, near - 1])).peak_instants) == 1


def test_held_at_every_puts_what_every_instant_holds_first_with_its_range() -> None:
    prof = profile_of(_steps_of_equal_peaks(0))
    frames = [prof.breakdown_at(t, "host0") for t in (100, 200, 300)]
    ops = held_at_every(frames, "op")
    assert ops.iloc[0].to_dict() == {
        "op": "model/dense/kernel",
        "low_bytes": 4 * MiB,
        "high_bytes": 4 * MiB,
        "instants": 3,
    }
    assert set(ops["instants"].iloc[1:]) == {1}


def test_asking_for_a_step_the_peak_is_not_reached_in_is_a_usage_error() -> None:
    prof = profile_of(_steps_of_equal_peaks(0))
    with pytest.raises(UsageError, match="no peak instant in step 9"):
        prof.at_instant(9)


@pytest.fixture(scope="module")
def repeats() -> list[traceparse.Profile]:
    return [traceparse.load(FIXTURES / name) for name in REPEATS]


def test_the_summary_names_the_steps_the_peak_is_reached_in(
    repeats: list[traceparse.Profile],
) -> None:
    for prof in repeats:
        (summary,) = prof.summary()
        instants = prof.peak_instants
        if len(instants) < 2:  # reached once: the peak's own figures, no section
            assert summary.peak_repeats is None
            continue
        found = summary.peak_repeats
        assert found is not None and found["instants"] == len(instants)
        steps = sorted({int(s) for s in instants["step"].dropna()})
        assert found["steps"] == steps
        (note,) = [n for n in allocator_notes(summary) if "instants within 1%" in n]
        assert f"step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))};" in note
    assert any(len(p.peak_instants) > 1 for p in repeats)


def test_what_it_names_holds_whichever_instant_is_taken(
    repeats: list[traceparse.Profile],
) -> None:
    """The layers the summary says hold memory at every instant, with their range:
    at each instant (whichever a run leaves last) each holds bytes within it, and the
    instant ``peak`` describes is one of them, while its own table can differ."""
    for prof in repeats:
        (summary,) = prof.summary()
        if summary.peak_repeats is None:
            continue
        layers = summary.peak_repeats["layers"].set_index("layer")
        every = layers[layers["instants"] == summary.peak_repeats["opened"]]
        assert len(every)
        tops = set()
        for time_ps in prof.peak_instants["time_ps"]:
            rows = prof.breakdown_at(int(time_ps), prof.hosts[0])
            held = rows.astype({"layer": object}).groupby("layer")["bytes"].sum()
            for layer, row in every.iterrows():
                assert row["low_bytes"] <= held[layer] <= row["high_bytes"], layer
            tops.add(held.drop(labels=[n for n in held.index if n.startswith("(")]).idxmax())
        assert int(prof.peak["time_ps"].iloc[0]) in set(prof.peak_instants["time_ps"])


def test_peak_and_breakdown_take_at(repeats: list[traceparse.Profile]) -> None:
    prof = repeats[0]
    path = next((FIXTURES / REPEATS[0]).rglob("*.xplane.pb")).parent
    step = int(prof.peak_instants["step"].dropna().iloc[0])
    done = traceparse_cli("breakdown", str(path), "--at", "step", str(step), "--format", "csv")
    assert done.returncode == 0, done.stderr
    rows = prof.at_instant(step)[1]
    header = done.stdout.splitlines()[0].split(",")
    at = header.index("bytes")
    total = sum(int(line.split(",")[at]) for line in done.stdout.splitlines()[1:] if line)
    assert total == int(rows["bytes"].sum())
    first = traceparse_cli("peak", str(path), "--at", "first", "--per-allocator", "--format", "csv")
    assert first.returncode == 0, first.stderr
    assert str(int(prof.peak_instants["time_ps"].iloc[0])) in first.stdout
    bad = traceparse_cli("peak", str(path), "--at", "middle")
    assert bad.returncode != 0 and "give first, last or step N" in bad.stderr
