"""``traceparse check``, ``baseline`` and ``diff`` as users run them.

The exit-code tests run the real command in a subprocess; the rest call
``traceparse.cli.app.main`` in this process (the same code, faster).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import FIXTURES, MANIFEST, REPO

from traceparse.cli.app import main
from traceparse.gate.baseline import BASELINE_VERSION

TWO_RUNS = MANIFEST["fixtures"]["two_runs"]
SMALL = str(FIXTURES / "two_runs" / "plugins" / "profile" / TWO_RUNS["runs"][0]["run"])
LARGE = str(FIXTURES / "two_runs" / "plugins" / "profile" / TWO_RUNS["runs"][1]["run"])
KERAS = str(FIXTURES / "keras_train")
MiB = 1 << 20


def traceparse(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    environment.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [sys.executable, "-m", "traceparse", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )


@pytest.fixture(autouse=True)
def _no_job_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# -- check: exit codes, end to end ----------------------------------------------


def test_check_exit_codes() -> None:
    within = traceparse("check", SMALL, "--max-peak", "2MiB")
    assert within.returncode == 0, within.stderr
    assert within.stdout.startswith("ok: the budget is within its limit")

    over = traceparse("check", SMALL, "--max-peak", "1MiB", "--max-utilisation", "90%")
    assert over.returncode == 4, over.stderr
    (line,) = over.stdout.splitlines()  # one line per breach: only max-peak is breached
    assert line.startswith("FAIL max-peak: mklcpu on localhost: peak 2 MiB > allowed 1 MiB")
    assert "top: " in line and "Fill 1 MiB" in line and "Mul 1 MiB" in line
    assert over.stderr.strip() == f"traceparse: error: 1 of 2 budgets breached in {SMALL}"

    corrupt = traceparse("check", str(FIXTURES / "corrupt"), "--max-peak", "1GiB")
    assert corrupt.returncode == 3
    assert "localhost.xplane.pb" in corrupt.stderr and "Traceback" not in corrupt.stderr

    missing = traceparse("check", str(FIXTURES / "nope"), "--max-peak", "1GiB")
    assert missing.returncode == 3

    usage = traceparse("check", SMALL)
    assert usage.returncode == 2 and "no budget to check" in usage.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--max-peak", "lots"],
        ["--max-utilisation", "much"],
        ["--max-peak", "1GiB", "--tolerance", "5%"],  # without --baseline
        ["--baseline", "b.json", "--tolerance", "5 parsecs"],
        ["--max-peak", "1GiB", "--allocator", "GPU_0_bfc"],
    ],
)
def test_check_usage_errors_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", SMALL, *args]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_check_no_memory_events(capsys: pytest.CaptureFixture[str]) -> None:
    empty = str(FIXTURES / "no_memory")
    assert main(["check", empty, "--max-peak", "1GiB"]) == 3
    assert "no memory events" in capsys.readouterr().err
    assert main(["check", empty, "--max-peak", "1GiB", "--allow-empty"]) == 0


def test_check_json_and_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", KERAS, "--max-peak", "1GiB", "--no-leaks", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is True
    assert [(r["budget"], r["status"]) for r in data["results"]] == [
        ("max-peak", "pass"),
        ("no-leaks", "pass"),
    ]
    assert main(["check", KERAS, "--max-peak", "1GiB", "-v"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ok   max-peak: mklcpu on localhost: peak 28 MiB <= allowed 1 GiB")


def test_check_leak_fixture_fails_no_leaks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(FIXTURES / "leak"), "--no-leaks"]) == 4
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("FAIL no-leaks: mklcpu on localhost: growing +1 MiB per step")
    assert "Fill 4 MiB (4 allocations still live)" in line


# -- check: JUnit and the job summary -------------------------------------------


def test_check_junit_xml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "reports" / "memory.xml"
    code = main(
        [
            "check",
            KERAS,
            "--max-peak",
            "20MiB",
            "--max-utilisation",
            "90%",
            "--no-leaks",
            "--junit",
            str(junit),
        ]
    )
    assert code == 4
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "0")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {
        "max-peak (mklcpu on localhost)",
        "max-utilisation (mklcpu on localhost)",
        "no-leaks (mklcpu on localhost)",
    }
    failure = cases["max-peak (mklcpu on localhost)"].find("failure")
    assert failure is not None
    assert "peak 28 MiB > allowed 20 MiB" in failure.get("message", "")
    assert "top contributors:" in (failure.text or "")


def test_check_junit_reports_an_unreadable_capture(tmp_path: Path) -> None:
    junit = tmp_path / "memory.xml"
    code = main(["check", str(FIXTURES / "corrupt"), "--max-peak", "1GiB", "--junit", str(junit)])
    assert code == 3
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "localhost.xplane.pb" in error.get("message", "")


def test_check_github_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["check", SMALL, "--max-peak", "1MiB", "--github-summary"]) == 4
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n## ❌ traceparse check: ")  # appended
    assert "| max-peak | `mklcpu` | `localhost` | 2 MiB | 1 MiB | ❌ fail |" in text
    assert "| `Fill` | 1 MiB |" in text
    assert "<details><summary>Memory report</summary>" in text
    # Without the variable (not on GitHub Actions) there is nothing to append to.
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert main(["check", SMALL, "--max-peak", "4MiB", "--github-summary"]) == 0
    assert "GITHUB_STEP_SUMMARY is not set" in capsys.readouterr().err


# -- baseline ---------------------------------------------------------------------


def test_baseline_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    own = tmp_path / "large.json"
    smaller = tmp_path / "small.json"
    assert main(["baseline", LARGE, "-o", str(own)]) == 0
    assert main(["baseline", SMALL, "-o", str(smaller)]) == 0
    data = json.loads(own.read_text())
    assert data["format"] == "traceparse-baseline" and data["version"] == BASELINE_VERSION
    assert data["allocators"][0]["peak_bytes"] == 8 * MiB
    # The same capture gives the same bytes.
    assert main(["baseline", LARGE]) == 0
    assert capsys.readouterr().out == own.read_text()

    assert main(["check", LARGE, "--baseline", str(own)]) == 0
    assert main(["check", LARGE, "--baseline", str(smaller), "--tolerance", "5%"]) == 4
    out = capsys.readouterr().out
    # Requests at the peak by default (two_runs has no padding: the same figures).
    assert (
        "FAIL baseline: mklcpu on localhost: requested at the peak 8 MiB vs baseline 2 MiB "
        "(+6 MiB" in out
    )
    assert "Fill +3 MiB" in out
    assert main(["check", LARGE, "--baseline", str(smaller), "--compare", "allocated"]) == 4
    assert "FAIL baseline: mklcpu on localhost: peak 8 MiB vs baseline 2 MiB (+6 MiB" in (
        capsys.readouterr().out
    )
    # A smaller baseline edited by hand fails too; a generous tolerance passes.
    data["allocators"][0]["peak_bytes"] = 8 * MiB - 1
    own.write_text(json.dumps(data))
    assert main(["check", LARGE, "--baseline", str(own), "--tolerance", "0%"]) == 4
    assert main(["check", LARGE, "--baseline", str(smaller), "--tolerance", "7MiB"]) == 0
    # A capture directory works as a baseline as well.
    assert main(["check", LARGE, "--baseline", SMALL, "--tolerance", "300%"]) == 0


def test_baseline_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", str(FIXTURES / "no_memory")]) == 3
    assert main(["check", SMALL, "--baseline", str(tmp_path / "none.json")]) == 3
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    assert main(["check", SMALL, "--baseline", str(bad)]) == 3
    assert "not a traceparse baseline" in capsys.readouterr().err


# -- diff ---------------------------------------------------------------------------


def test_diff_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", SMALL, LARGE, "--compare", "allocated"]) == 0
    out = capsys.readouterr().out
    assert (
        "mklcpu on localhost: peak 2 MiB → 8 MiB (+6 MiB, +300.0%); "
        "explained by Fill (+3 MiB), Mul (+3 MiB)." in out
    )
    rows = [line.split("  ") for line in out.splitlines() if line.startswith(("Fill", "Mul"))]
    cells = [[c.strip() for c in row if c.strip()] for row in rows]
    shape = "float32[256,1024] → float32[1024,1024]"  # what each op asked for, before → after
    numbers = [shape, "+6 MiB", "1 MiB", "4 MiB", "+3 MiB", "+6 MiB"]
    assert cells == [["Fill", "changed", *numbers], ["Mul", "changed", *numbers]]


def test_diff_json_and_baseline_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "small.json"
    assert main(["baseline", SMALL, "-o", str(base)]) == 0
    assert main(["diff", str(base), LARGE, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["before"]["kind"] == "baseline" and data["after"]["kind"] == "capture"
    (allocator,) = data["allocators"]
    assert allocator["peak_delta_bytes"] == 6 * MiB
    assert allocator["explained_by"] == ["Fill", "Mul"]
    assert allocator["rows"][0] == {
        "key": "Fill",
        "status": "changed",
        "peak_before_bytes": MiB,
        "peak_after_bytes": 4 * MiB,
        "peak_delta_bytes": 3 * MiB,
        "allocated_before_bytes": 2 * MiB,
        "allocated_after_bytes": 8 * MiB,
        "allocated_delta_bytes": 6 * MiB,
        "count_before": 2,
        "count_after": 2,
        "requested_before_bytes": 2 * MiB,
        "requested_after_bytes": 8 * MiB,
        "requested_delta_bytes": 6 * MiB,
        "peak_requested_delta_bytes": 3 * MiB,
        "shapes_before": ["float32[256,1024]"],
        "shapes_after": ["float32[1024,1024]"],
        "per_step": False,  # two steps on each side
    }


def test_diff_markdown_and_html_files(tmp_path: Path) -> None:
    md, page = tmp_path / "diff.md", tmp_path / "diff.html"
    callback = str(FIXTURES / "keras_callback")
    assert main(["diff", KERAS, callback, "--by", "scope", "--depth", "2", "-o", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("## Memory diff: ")
    # Scopes count from the layer: hidden's forward and backward ops are one row.
    # 4 steps -> 2, so the bytes over the capture compare per step: requested
    # 18 MiB / 4 -> 4 MiB / 2, allocated 18 MiB / 4 -> 7 MiB / 2.
    assert "| Δ requested per step |" in text and "| Δ allocated per step |" in text
    assert (
        "| `hidden/MatMul` | changed | float32[32,4096] → float32[512,1024] | -2.5 MiB "
        "| 4.5 MiB | 3.5 MiB | -1 MiB | -1 MiB |" in text
    )
    assert main(["diff", KERAS, callback, "-o", str(page), "--top", "3"]) == 0
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "</html>" in html
    assert html.count("<tr>") == 4  # the header and the top 3 rows
    assert "more changed ops not shown" in html


def test_diff_errors(capsys: pytest.CaptureFixture[str]) -> None:
    empty = str(FIXTURES / "no_memory")
    assert main(["diff", empty, empty]) == 3
    assert main(["diff", SMALL, LARGE, "--allocator", "GPU_0_bfc"]) == 2
    assert main(["diff", SMALL, str(FIXTURES / "corrupt")]) == 3
    assert main(["diff", SMALL, LARGE, "--depth", "0"]) == 2
