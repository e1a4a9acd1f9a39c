"""traceparse.gate: budgets, baselines, diffs and JUnit XML, on the real fixtures.

Expected numbers come from MANIFEST.json (what the programs made) and are
worked out by hand in each test.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FIXTURES, MANIFEST

import traceparse
from traceparse.errors import InputError, UsageError
from traceparse.gate import (
    AllocatorFigures,
    Baseline,
    Budgets,
    Contributor,
    OpFigures,
    Result,
    Tolerance,
    baseline_of,
    diff_figures,
    evaluate,
    figures_of,
    junit_xml,
)
from traceparse.gate.baseline import BASELINE_VERSION
from traceparse.gate.figures import NO_OP, pair_allocators, rollup
from traceparse.gate.render import check_markdown, verdict_line

TWO_RUNS = MANIFEST["fixtures"]["two_runs"]
MiB = 1 << 20


def two_runs_dir(index: int) -> Path:
    return FIXTURES / "two_runs" / "plugins" / "profile" / TWO_RUNS["runs"][index]["run"]


@pytest.fixture(scope="module")
def small() -> traceparse.Profile:
    """two_runs' first run: each step makes tf.ones((256, 1024)) * 2.0 (1 MiB each)."""
    return traceparse.load(two_runs_dir(0))


@pytest.fixture(scope="module")
def large() -> traceparse.Profile:
    """two_runs' second run: the same with (1024, 1024) tensors (4 MiB each)."""
    return traceparse.load(two_runs_dir(1))


@pytest.fixture(scope="module")
def keras() -> traceparse.Profile:
    return traceparse.load(FIXTURES / "keras_train")


@pytest.fixture(scope="module")
def leak() -> traceparse.Profile:
    return traceparse.load(FIXTURES / "leak")


# -- figures -------------------------------------------------------------------


def test_figures_of_two_runs_match_the_programs(small: traceparse.Profile) -> None:
    tensor = TWO_RUNS["runs"][0]["tensor"]["bytes"]
    assert tensor == MiB
    (figures,) = figures_of(small)
    # The Fill and the Mul of one step are live together at the peak.
    assert figures.peak_bytes == 2 * tensor
    assert figures.live_at_peak_bytes == 2 * tensor
    assert figures.padding_at_peak_bytes == 0
    # Two steps, one Fill and one Mul each.
    shape = "{dtype}[{dims}]".format(
        dtype=TWO_RUNS["runs"][0]["tensor"]["dtype"],
        dims=",".join(map(str, TWO_RUNS["runs"][0]["tensor"]["shape"])),
    )
    # Requests equal the shapes' bytes (no padding): 2 steps, one live at the peak.
    same = OpFigures(
        live_at_peak_bytes=tensor,
        allocated_bytes=2 * tensor,
        count=2,
        requested_bytes=2 * tensor,
        live_at_peak_requested_bytes=tensor,
        shapes=(shape,),
    )
    assert figures.ops == {"Fill": same, "Mul": same}
    assert figures.allocated_bytes == 4 * tensor
    assert figures.allocations == 4


def test_figures_ops_add_up_to_the_ops_table(keras: traceparse.Profile) -> None:
    (figures,) = figures_of(keras)
    ops = keras.ops
    assert sum(f.allocated_bytes for f in figures.ops.values()) == int(ops["allocated_bytes"].sum())
    assert sum(f.live_at_peak_bytes for f in figures.ops.values()) == figures.live_at_peak_bytes
    assert sum(f.count for f in figures.ops.values()) == len(keras.allocations)
    # The numpy input batch has no op: it is kept, under its own label.
    assert NO_OP in figures.ops


def test_scope_rollup_matches_profile_scopes(keras: traceparse.Profile) -> None:
    (figures,) = figures_of(keras)
    for depth in (1, 2):
        rows = rollup(figures, "scope", depth)
        table = keras.scopes(depth)
        expected = {
            (NO_OP if str(s) == "nan" else str(s)): int(b)
            for s, b in zip(
                table["scope"].astype(object).fillna(NO_OP),
                table["live_at_peak_bytes"],
                strict=True,
            )
        }
        assert {k: v.live_at_peak_bytes for k, v in rows.items()} == expected


def test_hosts_with_different_names_are_paired() -> None:
    a = AllocatorFigures("laptop", "GPU_0_bfc", 10)
    b = AllocatorFigures("ci-runner-7", "GPU_0_bfc", 12)
    c = AllocatorFigures("ci-runner-7", "gpu_host_bfc", 1)
    assert pair_allocators([a], [b, c]) == [(a, b), (None, c)]
    # With two hosts left on a side, names must match.
    d = AllocatorFigures("other", "GPU_0_bfc", 5)
    assert pair_allocators([a], [b, d]) == [(a, None), (None, b), (None, d)]


# -- budgets -------------------------------------------------------------------


def test_peak_budget_passes_and_fails_at_the_exact_limit(small: traceparse.Profile) -> None:
    peak = 2 * MiB
    (ok,) = evaluate(small, Budgets(max_peak=peak))
    assert ok.status == "pass" and ok.measured == peak and ok.allowed == peak
    (over,) = evaluate(small, Budgets(max_peak=peak - 1))
    assert over.failed
    assert over.budget == "max-peak" and over.allocator == "mklcpu"
    # The contributors are the two tensors live at the peak.
    assert sorted(c.name for c in over.contributors) == ["Fill", "Mul"]
    assert all(c.bytes == MiB for c in over.contributors)
    line = over.line()
    assert line.startswith("max-peak: mklcpu on localhost: peak 2 MiB > allowed")
    assert "top: " in line and "float32 [256,1024]" in line


def test_utilisation_and_padding(keras: traceparse.Profile) -> None:
    (summary,) = keras.summary()
    parts = summary.attribution
    held = int(keras.live_at_peak()["allocated_bytes"].sum())  # what the live tensors hold
    padding = parts["padding_bytes"] / held
    assert 0 < padding < 1
    results = evaluate(keras, Budgets(max_utilisation=0.9, max_padding=padding))
    assert [(r.budget, r.status) for r in results] == [
        ("max-utilisation", "pass"),
        ("max-padding", "pass"),
    ]
    assert results[0].measured == pytest.approx(summary.utilisation)
    (over,) = evaluate(keras, Budgets(max_padding=padding * 0.99))
    assert over.failed and over.measured == pytest.approx(padding)
    # Contributors are the tensors with the most padding, largest first.
    assert over.contributors and all(c.bytes > 0 for c in over.contributors)
    assert [c.bytes for c in over.contributors] == sorted(
        (c.bytes for c in over.contributors), reverse=True
    )
    (tiny,) = evaluate(keras, Budgets(max_utilisation=summary.utilisation / 2))
    assert tiny.failed and tiny.unit == "fraction"


def test_no_leaks(leak: traceparse.Profile, small: traceparse.Profile) -> None:
    expected = MANIFEST["fixtures"]["leak"]["expected_growth_bytes_per_step"]
    (growing,) = evaluate(leak, Budgets(no_leaks=True))
    assert growing.failed and growing.measured == expected
    assert growing.contributors[0].name == "Fill"
    # two_runs has 2 steps: too few to judge, so skipped, not failed.
    (skipped,) = evaluate(small, Budgets(no_leaks=True))
    assert skipped.status == "skip" and "too few" in skipped.message


def test_unknown_allocator_and_empty_capture() -> None:
    prof = traceparse.load(FIXTURES / "keras_train")
    with pytest.raises(UsageError, match="mklcpu"):
        evaluate(prof, Budgets(max_peak=1, allocator="GPU_0_bfc"))
    empty = traceparse.load(FIXTURES / "no_memory")
    with pytest.raises(InputError, match="no memory events"):
        evaluate(empty, Budgets(max_peak=1))
    assert evaluate(empty, Budgets(max_peak=1, allow_empty=True)) == []


def test_budgets_from_options_parse_what_people_type() -> None:
    budgets = Budgets.from_options(max_peak="512MiB", max_utilisation="90%", max_padding=0.25)
    assert budgets.max_peak == 512 * MiB
    assert budgets.max_utilisation == pytest.approx(0.9)
    assert budgets.max_padding == pytest.approx(0.25)
    assert Budgets().empty and not budgets.empty
    with pytest.raises(UsageError):
        Budgets.from_options(max_peak="lots")
    assert Tolerance.parse("5%") == Tolerance(fraction=0.05)
    assert Tolerance.parse("64MiB") == Tolerance(bytes=64 * MiB)
    assert Tolerance.parse("5%").allowed(1000) == 1050
    assert Tolerance.parse("1KiB").allowed(1000) == 2024
    with pytest.raises(UsageError, match="tolerance"):
        Tolerance.parse("5 parsecs")


# -- baselines -----------------------------------------------------------------


def test_baseline_json_round_trip_is_stable(keras: traceparse.Profile) -> None:
    baseline = baseline_of(keras)
    text = baseline.to_json()
    assert text == baseline_of(traceparse.load(FIXTURES / "keras_train")).to_json()
    data = json.loads(text)
    assert data["format"] == "traceparse-baseline" and data["version"] == BASELINE_VERSION
    ops = data["allocators"][0]["gate"]["ops"]
    assert list(ops) == sorted(ops)
    back = Baseline.from_json(text)
    assert back.allocators == baseline.allocators
    assert back.to_json() == text


def test_a_capture_passes_its_own_baseline_and_fails_a_smaller_one(
    small: traceparse.Profile, large: traceparse.Profile
) -> None:
    (same,) = evaluate(large, Budgets(baseline=baseline_of(large)))
    assert same.status == "pass" and same.budget == "baseline"
    (grown,) = evaluate(large, Budgets(baseline=baseline_of(small)))
    assert grown.failed
    # 8 MiB against 2 MiB + 5%.
    assert grown.measured == 8 * MiB
    assert grown.allowed == 2 * MiB + int(2 * MiB * 0.05)
    assert {(c.name, c.bytes) for c in grown.contributors} == {("Fill", 3 * MiB), ("Mul", 3 * MiB)}
    # A tolerance in bytes that covers the growth passes.
    (tolerated,) = evaluate(
        large, Budgets(baseline=baseline_of(small), tolerance=Tolerance(bytes=6 * MiB))
    )
    assert tolerated.status == "pass"


def test_baseline_allocators_missing_or_new(large: traceparse.Profile) -> None:
    base = baseline_of(large)
    gpu = AllocatorFigures("localhost", "GPU_0_bfc", 100)
    results = evaluate(large, Budgets(baseline=replace(base, allocators=[*base.allocators, gpu])))
    assert {r.allocator: r.status for r in results} == {"mklcpu": "pass", "GPU_0_bfc": "fail"}
    results = evaluate(large, Budgets(baseline=replace(base, allocators=[])))
    assert [r.status for r in results] == ["skip"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "invalid JSON"),
        ("[]", "not a traceparse baseline"),
        ('{"format": "traceparse-baseline", "version": 99, "allocators": []}', "newer"),
        ('{"format": "traceparse-baseline", "version": 1}', "allocators"),
        (
            '{"format": "traceparse-baseline", "version": 1, "allocators": '
            '[{"host": "h", "allocator": "a", "peak_bytes": -1}]}',
            "peak_bytes",
        ),
    ],
)
def test_bad_baselines_are_input_errors(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Baseline.from_json(text, "b.json")


# -- diff ----------------------------------------------------------------------


def test_diff_of_two_runs_matches_the_hand_computed_numbers(
    small: traceparse.Profile, large: traceparse.Profile
) -> None:
    before_tensor = TWO_RUNS["runs"][0]["tensor"]["bytes"]  # 1 MiB
    after_tensor = TWO_RUNS["runs"][1]["tensor"]["bytes"]  # 4 MiB
    (diff,) = diff_figures(figures_of(small), figures_of(large), compare="allocated")
    # Peak: a Fill and a Mul output live together: 2 x 1 MiB -> 2 x 4 MiB.
    assert (diff.peak_before, diff.peak_after) == (2 * before_tensor, 2 * after_tensor)
    assert diff.peak_delta == 6 * MiB
    assert [r.key for r in diff.rows] == ["Fill", "Mul"]  # equal impact: by name
    for row in diff.rows:
        assert row.status == "changed"
        assert (row.peak_before, row.peak_after, row.peak_delta) == (MiB, 4 * MiB, 3 * MiB)
        # Two steps each: 2 x 1 MiB -> 2 x 4 MiB allocated.
        assert (row.allocated_before, row.allocated_after) == (2 * MiB, 8 * MiB)
        assert row.allocated_delta == 6 * MiB
        assert (row.count_before, row.count_after) == (2, 2)
    assert diff.outside_rows_delta == 0
    assert [r.key for r in diff.explained_by] == ["Fill", "Mul"]
    assert diff.headline() == (
        "mklcpu on localhost: peak 2 MiB → 8 MiB (+6 MiB, +300.0%); "
        "explained by Fill (+3 MiB), Mul (+3 MiB)."
    )
    (reverse,) = diff_figures(figures_of(large), figures_of(small), compare="allocated")
    assert reverse.peak_delta == -6 * MiB
    assert "explained by Fill (-3 MiB), Mul (-3 MiB)" in reverse.headline()
    # Comparing requests (the default): both ops asked for 4x larger tensors.
    (asked,) = diff_figures(figures_of(small), figures_of(large))
    assert all(r.reshaped and r.requested_delta == 6 * MiB for r in asked.rows)
    assert asked.headline() == (
        "mklcpu on localhost: peak 2 MiB → 8 MiB (+6 MiB, +300.0%); requested at the peak "
        "2 MiB → 8 MiB (+6 MiB); shapes changed most in "
        "Fill (float32[256,1024] → float32[1024,1024], +6 MiB requested), "
        "Mul (float32[256,1024] → float32[1024,1024], +6 MiB requested)."
    )
    (by_scope,) = diff_figures(figures_of(small), figures_of(large), by="scope")
    ((key, peak_delta, allocated_delta),) = [
        (r.key, r.peak_delta, r.allocated_delta) for r in by_scope.rows
    ]
    assert (key, peak_delta, allocated_delta) == ("(top level)", 6 * MiB, 12 * MiB)


def test_diff_new_vanished_and_sorting() -> None:
    before = AllocatorFigures(
        "h",
        "a",
        100,
        ops={"gone": OpFigures(30, 30, 1), "same": OpFigures(10, 10, 1), "x": OpFigures(0, 5, 1)},
    )
    after = AllocatorFigures(
        "h",
        "a",
        170,
        ops={"new": OpFigures(90, 90, 1), "same": OpFigures(10, 10, 1), "x": OpFigures(0, 50, 2)},
    )
    (diff,) = diff_figures([before], [after], compare="allocated")
    assert [(r.key, r.status) for r in diff.rows] == [
        ("new", "new"),
        ("gone", "vanished"),
        ("x", "changed"),
        ("same", "same"),
    ]
    assert [r.key for r in diff.explained_by] == ["new"]
    # 170 - 100 = 70; the rows move 90 - 30 = 60; 10 is outside any op.
    assert diff.outside_rows_delta == 10
    assert "+10 B held by no op" in diff.headline()
    (only_before, only_after) = diff_figures(
        [before], [replace(after, allocator="b")], compare="allocated"
    )
    assert only_before.headline().endswith("only in the first capture (peak 100 B).")
    assert only_after.peak_before is None and only_after.rows[0].status == "new"


def test_diff_headline_names_bytes_held_by_no_op_when_they_moved_the_peak() -> None:
    before = AllocatorFigures("h", "a", 100, ops={"x": OpFigures(10, 10, 1)})
    after = AllocatorFigures("h", "a", 200, ops={"x": OpFigures(20, 20, 1)})
    (diff,) = diff_figures([before], [after], compare="allocated")
    assert diff.outside_rows_delta == 90
    assert [r.key for r in diff.explained_by] == ["x"]
    assert diff.headline() == (
        "a on h: peak 100 B → 200 B (+100 B, +100.0%); explained by +90 B held by no op "
        "(allocated before the capture started, or reserved), x (+10 B)."
    )


def test_diff_of_a_capture_with_itself_changes_nothing(keras: traceparse.Profile) -> None:
    (diff,) = diff_figures(figures_of(keras), figures_of(keras))
    assert diff.peak_delta == 0 and not diff.changed_rows
    assert diff.headline() == "mklcpu on localhost: peak unchanged at 28 MiB."


# -- JUnit and Markdown --------------------------------------------------------

NASTY = "op<script>&\"'|`x`\x01\x1b]8;;\u2028end"


def _results() -> list[Result]:
    return [
        Result(
            "max-peak",
            "localhost",
            "mklcpu",
            "fail",
            "peak 8 MiB > allowed 4 MiB",
            measured=8 * MiB,
            allowed=4 * MiB,
            contributors=(Contributor(NASTY, 4 * MiB, "float32 [1024,1024]"),),
        ),
        Result("max-utilisation", "localhost", "mklcpu", "skip", "capacity unknown"),
        Result("no-leaks", "host.example.com", NASTY, "pass", "stable", measured=0, allowed=0),
    ]


def test_junit_xml_parses_with_one_case_per_budget_and_allocator() -> None:
    root = ET.fromstring(junit_xml(_results(), source="logs/").encode("utf-8"))
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert {k: suite.get(k) for k in ("tests", "failures", "skipped", "errors")} == {
        "tests": "3",
        "failures": "1",
        "skipped": "1",
        "errors": "0",
    }
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases][:2] == [
        "max-peak (mklcpu on localhost)",
        "max-utilisation (mklcpu on localhost)",
    ]
    failure = cases[0].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("max-peak: mklcpu on localhost: peak 8 MiB")
    # Markup in names survives as text; characters XML forbids are replaced.
    assert "op<script>&\"'|`x`\ufffd" in (failure.text or "")
    assert cases[1].find("skipped") is not None
    assert cases[2].find("failure") is None and cases[2].find("skipped") is None
    # Dots in host names do not split the classname.
    assert cases[2].get("classname", "").startswith("traceparse.host_example_com.")


def test_junit_xml_with_an_error_case() -> None:
    root = ET.fromstring(junit_xml([], error="x.pb: corrupt <bad>").encode("utf-8"))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("errors") == "1" and suite.get("tests") == "1"
    error = suite.find("testcase/error")
    assert error is not None and error.get("message") == "x.pb: corrupt <bad>"


def test_check_markdown_escapes_names() -> None:
    text = check_markdown(_results(), "logs/")
    assert "❌" in text and "1 of 2 budgets breached (1 skipped)" in text
    # Names are code spans (where GFM shows markup as text), control characters gone.
    assert text.count("<script>") == text.count("``op<script>")
    assert "\x01" not in text and "\x1b" not in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "op<script>" in line]
    # The name's pipe is escaped, so each row keeps its table's cell count.
    assert [line.replace("\\|", "").count("|") for line in rows] == [7, 4]


def test_verdict_line() -> None:
    results = _results()
    assert verdict_line(results) == "1 of 2 budgets breached (1 skipped)"
    assert verdict_line(results[2:]) == "the budget is within its limit"
    assert verdict_line(results[1:2]) == "no budget could be judged (1 skipped)"


def test_a_bigger_batch_grows_activations_not_weight_gradients_or_the_optimizer() -> None:
    """batch_128 and batch_256 are one Keras MLP at two batch sizes (fixtures/MANIFEST.json)."""
    runs = {n: MANIFEST["fixtures"][n] for n in ("batch_128", "batch_256")}
    assert [f["batch_size"] for f in runs.values()] == [128, 256]
    small_batch, large_batch = (traceparse.load(FIXTURES / n) for n in runs)
    (diff,) = diff_figures(figures_of(small_batch), figures_of(large_batch))
    weights = {
        "float32[{}]".format(",".join(map(str, t["shape"])))
        for f in runs.values()
        for name, t in f["tensors"].items()
        if name.endswith("kernel")
    }
    named = diff.explained_by
    assert named, diff.headline()
    top = named[0]
    # The top growth is an activation: its batch dimension doubled.
    assert top.key.startswith("mlp_1/") and top.key.endswith("Relu"), diff.headline()
    assert top.shapes_before[0].replace("[128,", "[256,") == top.shapes_after[0]
    for row in named:  # no optimizer op, no weight gradient (their shapes do not change)
        assert not row.key.startswith("adam"), diff.headline()
        assert not set(row.shapes_after) & weights, diff.headline()
        assert row.reshaped and row.requested_delta > 0
