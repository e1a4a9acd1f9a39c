"""The pytest plugin (``tf_memory`` marker and fixture), run on test files with ``pytester``.

The tests that assert an exact peak run in a process of their own
(``runpytest_subprocess``): tensors that earlier tests in this process left
alive would be in the allocator's counter. The others run here. Each
profiled tensor is 4 MiB (``tf.ones((1024, 1024)) * 2.0``: a Fill and a Mul
output live together, so the peak is 8 MiB); on CPU only allocations of
256 KiB or more are recorded.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

pytest_plugins = ["pytester"]

MODEL = """
import pytest
import tensorflow as tf


def step():
    return tf.ones((1024, 1024)) * 2.0
"""


@pytest.fixture(scope="module")
def tf() -> object:
    return pytest.importorskip("tensorflow", reason="profiling needs TensorFlow")


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    found = [e for e in entry_points(group="pytest11") if e.name == "traceparse"]
    assert [e.value for e in found] == ["traceparse.integrations.pytest_plugin"]


def test_loading_the_plugin_imports_no_tensorflow(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys

        def test_plain():
            assert "tensorflow" not in sys.modules
            assert "traceparse.gate" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("--markers")  # autoloaded
    result.stdout.fnmatch_lines(["@pytest.mark.tf_memory(max_peak=None*"])
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)


def test_over_budget_fails_with_the_table_and_under_budget_passes(
    pytester: pytest.Pytester, tf: object
) -> None:
    pytester.makepyfile(
        MODEL
        + """

@pytest.mark.tf_memory(max_peak="6MiB")
def test_over():
    step()


@pytest.mark.tf_memory(max_peak="512MiB", max_padding="25%")
def test_under():
    step()


def test_not_profiled():
    step()
"""
    )
    reports = pytester.path / "memory-reports"
    # A process of its own: tensors other tests left alive would raise the peak.
    result = pytester.runpytest_subprocess("--traceparse-report-dir", str(reports))
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*tf_memory: 1 of 1 budget breached in test_over_budget_*.py::test_over",
            "*max-peak: mklcpu on *: peak 8 MiB > allowed 6 MiB (+2 MiB, +33.3%); top: *",
            "*Top tensors live at the peak of mklcpu on * (8 MiB in use, 2 allocations):",
            "*op *dtype *shape *region *requested *allocated",
            "*Fill *float32 *1024,1024* *output *4 MiB *4 MiB",
            "*Mul *float32 *1024,1024* *output *4 MiB *4 MiB",
            "*Report: *test_over.md",
        ]
    )
    # Reports for both profiled tests, passed or failed; none for the plain one.
    names = sorted(p.name for p in reports.iterdir())
    assert len(names) == 2 and names[0].endswith("test_over.md")
    assert names[1].endswith("test_under.md")
    over = (reports / names[0]).read_text(encoding="utf-8")
    assert "| max-peak | `mklcpu` |" in over and "❌ fail" in over
    assert "# traceparse memory report" in over
    # The capture was a temporary directory, removed after the test: not linked.
    assert "- Capture: not kept" in over and "tf_memory-" not in over
    under = (reports / names[1]).read_text(encoding="utf-8")
    assert "✅ pass" in under and "❌" not in under


def test_the_fixture_gives_the_profile(pytester: pytest.Pytester, tf: object) -> None:
    pytester.makepyfile(
        MODEL
        + """

def test_profile(tf_memory):
    for n in range(3):
        with tf_memory.step(n):
            step()
    prof = tf_memory.profile
    (summary,) = prof.summary()
    assert summary.peak_bytes == 8 * 2**20
    assert sorted(prof.steps["step"].tolist()) == [0, 1, 2]
    assert tf_memory.check(max_peak="1GiB")[0].status == "pass"


@pytest.mark.tf_memory(max_peak="1MiB")
def test_marker_and_fixture_share_one_capture(tf_memory):
    step()
    assert tf_memory.profile.summary()[0].peak_bytes == 8 * 2**20


def test_check_fails_the_test(tf_memory):
    step()
    tf_memory.check(max_peak="4MiB")
"""
    )
    result = pytester.runpytest_subprocess("-rf")  # a clean allocator, as above
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*tf_memory: 1 of 1 budget breached in *test_marker_and_fixture_share_one_capture",
            "*tf_memory: 1 of 1 budget breached in *test_check_fails_the_test",
        ],
        consecutive=False,
    )


def test_bad_marker_arguments_and_empty_captures(pytester: pytest.Pytester, tf: object) -> None:
    pytester.makepyfile(
        MODEL
        + """

@pytest.mark.tf_memory(max_peak="lots")
def test_bad_size():
    step()


@pytest.mark.tf_memory(max_peek="1GiB")
def test_typo():
    step()


@pytest.mark.tf_memory(max_peak="1GiB")
def test_too_small_to_record():
    tf.ones((8, 8))


@pytest.mark.tf_memory(max_peak="1GiB", allow_empty=True)
def test_allowed_empty():
    tf.ones((8, 8))
"""
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*tf_memory: invalid size 'lots'*",
            "*tf_memory: unknown argument max_peek; it takes max_peak, *",
            "*tf_memory: *no memory events, so no budget can be checked*",
        ],
        consecutive=False,
    )
