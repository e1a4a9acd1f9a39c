"""The record of each allocator (``records/allocator.py``) on every fixture: the gate's
figures are the breakdown's, the rows add up, every output shows the same
figures, and ``--top`` means what it says.

The records' JSON is kept per fixture in ``tests/golden/records/``; regenerate
with ``TRACEPARSE_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import warnings

import pytest
from conftest import FIXTURES
from helpers.trace import GPU, alloc, trace_of

import traceparse
from traceparse import Profile
from traceparse.gate.baseline import Baseline, baseline_of
from traceparse.gate.figures import NO_OP, figures_of
from traceparse.output.jsonvalues import json_value
from traceparse.output.units import format_bytes
from traceparse.records import LIVE_PARTS, LeakVerdict, Part, StepUnit, owned

GOLDEN = FIXTURES.parent / "tests" / "golden" / "records"
MiB = 1 << 20

# Every fixture that is a readable capture (corrupt and not_a_capture are not).
CAPTURES = sorted(
    p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name not in ("corrupt", "not_a_capture")
)
# Fixtures whose allocators ran compiled programs (the gate used to miss their buffers).
COMPILED = ["jax08_gemm", "jax08_attention", "layers_cnn_xla", "xla_keras", "xla_function"]


@functools.cache
def profiles(name: str) -> tuple[Profile, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(traceparse.load_all(FIXTURES / name))


def records(name: str) -> list:
    return [r for p in profiles(name) for r in p.summary()]


def test_the_fixture_list_has_compiled_captures() -> None:
    assert set(COMPILED) <= set(CAPTURES)
    for name in COMPILED:
        assert any(r.attribution.get(Part.XLA_BUFFER, 0) for r in records(name)), name


@pytest.mark.parametrize("name", CAPTURES)
def test_gate_figures_equal_the_breakdown(name: str) -> None:
    """Live at the peak and per op: the gate counts what the breakdown counts."""
    live_parts = {str(p) for p in LIVE_PARTS}
    for profile in profiles(name):
        breakdown = profile.breakdown
        for figures in figures_of(profile):
            mine = owned(breakdown, figures.host, figures.allocator)
            live = mine[mine["part"].astype(str).isin(live_parts).to_numpy(dtype=bool)]
            assert figures.live_at_peak_bytes == int(live["bytes"].sum())
            assert figures.peak_bytes == int(mine["bytes"].sum())
            ops = live.assign(op=live["op"].astype(object).fillna(NO_OP))
            by_op = {k: int(v) for k, v in ops.groupby("op")["bytes"].sum().items() if v}
            gate = {k: v.live_at_peak_bytes for k, v in figures.ops.items() if v.live_at_peak_bytes}
            assert gate == by_op


def test_a_baseline_of_a_compiled_capture_counts_its_programs() -> None:
    (gpu, _host) = baseline_of(profiles("jax08_gemm")[0]).allocators
    assert gpu.allocator == "GPU_0_bfc"
    assert format_bytes(gpu.live_at_peak_bytes) == format_bytes(gpu.peak_bytes) == "460 MiB"
    (cnn,) = baseline_of(profiles("layers_cnn_xla")[0]).allocators
    record = records("layers_cnn_xla")[0]
    assert cnn.live_at_peak_bytes == record.live_at_peak_bytes
    # The XLA parts are in it: 54 MiB was the figure without them.
    assert (
        cnn.live_at_peak_bytes
        - record.attribution[Part.XLA_BUFFER]
        - record.attribution[Part.XLA_SLACK]
        < cnn.live_at_peak_bytes // 2
    )


def test_an_old_baseline_loads_and_says_what_changed_meaning() -> None:
    data = baseline_of(profiles("jax08_gemm")[0]).to_dict()
    data["version"] = 1
    old = Baseline.from_dict(data, "old.json")
    assert old.version == 1 and len(old.allocators) == 2
    assert list(old.changed_meaning) == ["live_at_peak_bytes"]
    (note,) = old.meaning_notes()
    assert "old.json" in note and "live_at_peak_bytes" in note and "XLA" in note
    current = Baseline.from_json(baseline_of(profiles("jax08_gemm")[0]).to_json())
    assert current.meaning_notes() == []


@pytest.mark.parametrize("name", CAPTURES)
def test_rows_add_up_and_none_is_negative(name: str) -> None:
    """The parts sum to the peak, no part is negative, and what is left from before
    the capture is at most what the allocator's own counter held on its first event."""
    for profile in profiles(name):
        for r in profile.summary():
            assert sum(r.attribution.values()) == r.peak_bytes
            assert min(r.attribution.values()) >= 0, r.attribution
            assert r.live_at_peak_bytes == sum(r.attribution.get(p, 0) for p in LIVE_PARTS)
            before = sum(
                r.attribution.get(p, 0)
                for p in (Part.VARIABLE, Part.XLA_PARAMETER, Part.BEFORE_CAPTURE)
            )
            first = owned(profile.timeline, r.host, r.allocator)["heap_bytes"].iloc[0]
            assert before <= int(first)
            # The rows every view groups (breakdown, layers) are never negative either.
            assert (owned(profile.breakdown, r.host, r.allocator)["bytes"] >= 0).all()
            layers = r.layers if r.layers is not None else profile.layers().iloc[:0]
            assert (layers["live_at_peak_bytes"] >= 0).all()
            assert int(layers["live_at_peak_bytes"].sum()) in (0, r.peak_bytes)
            assert isinstance(r.leak_verdict, LeakVerdict)
            assert isinstance(r.step_unit, StepUnit)


def _normalise(text: str) -> str:
    return text.replace(str(FIXTURES), "fixtures")


@pytest.mark.parametrize("name", CAPTURES)
def test_records_json_golden(name: str) -> None:
    data = [json_value(r.to_dict()) for r in records(name)]
    text = _normalise(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)) + "\n"
    path = GOLDEN / f"{name}.json"
    if os.environ.get("TRACEPARSE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with TRACEPARSE_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name}: records differ from {path}"


def _terminal(profs: tuple[Profile, ...], top: int = 10) -> str:
    from traceparse.cli._summary_view import print_summaries
    from traceparse.output.terminal import Terminal

    buffer = io.StringIO()
    print_summaries(list(profs), Terminal(stream=buffer, color=False, wide=True), top=top)
    return buffer.getvalue()


@pytest.mark.parametrize("name", CAPTURES)
def test_every_output_shows_the_same_figures(name: str) -> None:
    """Terminal, Markdown, HTML, notebook and JSON: each allocator's peak and
    attribution parts, in the same units, from the same record."""
    from traceparse.report import render_html, render_json, render_markdown
    from traceparse.report.notebook import profile_html

    profs = profiles(name)
    texts = {
        "terminal": _terminal(profs),
        "markdown": render_markdown(list(profs), "test"),
        "html": render_html(list(profs), "test"),
        "notebook": "".join(profile_html(p) for p in profs),
    }
    data = json.loads(render_json(list(profs), "test"))
    summaries = [s for p in data["profiles"] for s in p["summary"]]
    rs = records(name)
    assert len(summaries) == len(rs)
    for r, s in zip(rs, summaries, strict=True):
        assert s["peak_bytes"] == r.peak_bytes
        assert s["live_at_peak_bytes"] == r.live_at_peak_bytes
        assert s["attribution"] == {str(k): v for k, v in r.attribution.items()}
        figures = [format_bytes(r.peak_bytes)]
        figures += [format_bytes(v) for v in r.attribution.values() if v]
        for output, text in texts.items():
            for figure in figures:
                assert figure in text, f"{output} lacks {figure} of {r.name}"


def _many_tensors(n: int) -> Profile:
    events = [alloc(10 + i, i, MiB + i, op=f"model/dense{i}/MatMul", shape="[1]") for i in range(n)]
    return Profile([trace_of(events, before={GPU: 0}, markers=[(0, 0, 10_000)])])


def _tensor_rows(text: str) -> int:
    head = text.index("Largest tensors live at the peak")
    block = text[head:].split("\n\n", 1)[0]
    return len(re.findall(r"^\s*model/dense\d+/MatMul", block, flags=re.M))


def test_top_means_what_it_says() -> None:
    profile = _many_tensors(60)
    (record,) = profile.summary()
    assert len(record.top_tensors) == len(record.top_ops) == 60  # the record is whole
    text = _terminal((profile,), top=50)
    assert _tensor_rows(text) == 50
    assert "… 10 more rows (--top 0 shows all)" in text
    every = _terminal((profile,), top=0)
    assert _tensor_rows(every) == 60 and "more rows" not in every


# Each table command's name column and the byte column that answers its question.
HEADLINES = {
    "layers": ("layer", "live_at_peak_bytes"),
    "ops": ("op", "live_at_peak_bytes"),
    "scopes": ("scope", "live_at_peak_bytes"),
    "allocations": ("op", "allocated_bytes"),
    "peak": ("op", "allocated_bytes"),
    "steps": ("step", "peak_in_use_bytes"),
    "breakdown": ("op", "bytes"),
}


def _command_output(command: str, path: str, width: int) -> str:
    import argparse

    from traceparse.cli.commands import COMMANDS
    from traceparse.output.terminal import Terminal

    cmd = COMMANDS[command]()
    parser = argparse.ArgumentParser()
    cmd.prepare_parser(parser)
    buffer = io.StringIO()
    cmd.run(parser.parse_args([path]), Terminal(stream=buffer, color=False, width=width))
    return buffer.getvalue()


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("command", sorted(HEADLINES))
def test_a_narrow_terminal_keeps_the_name_and_the_headline_column(command: str, width: int) -> None:
    text = _command_output(command, str(FIXTURES / "layers_cnn_xla"), width)
    name, headline = HEADLINES[command]
    header = "\n".join(text.split("\n---")[0].split("\n")[-3:])  # the wrapped header lines
    assert re.search(rf"(^|\s){name}(\s|$)", header, flags=re.M), (command, width, text)
    pieces = [p for p in re.split(r"(?<=_)", headline) if p]
    assert all(p in header for p in pieces), (command, width, text)
    assert all(len(line) <= width for line in text.splitlines()), (command, width)


def test_a_table_that_drops_a_part_says_the_rest_do_not_add_up() -> None:
    text = _command_output("layers", str(FIXTURES / "layers_cnn"), 80)
    assert "live_at_" in text and "peak_bytes" in text
    note = " ".join(text.split("The parts shown", 1)[1].split())
    assert note.startswith("do not add up to live_at_peak_bytes:")
    assert "other_bytes" in note
    wide = _command_output("layers", str(FIXTURES / "layers_cnn"), 200)
    assert "The parts shown" not in wide


def test_a_new_section_is_one_function_per_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """How issue 38-40's sections plug in (records/allocator.py's docstring): a fact said
    first (LEADS) and a table (TABLES) reach every output that walks the view."""
    from traceparse.report import render_html, render_markdown, view
    from traceparse.report.notebook import profile_html

    def failure(record: object) -> list[view.Fact]:
        return [view.Fact("Failure", "out of memory", "a test section")]

    def extra(record: object, top: int) -> view.TableView:
        ops = record.top_ops  # type: ignore[attr-defined]
        return view._table("extra", "A section of its own", ops, ["op"], limit=top)

    monkeypatch.setattr(view, "LEADS", [failure])
    monkeypatch.setattr(view, "TABLES", [*view.TABLES, extra])
    profs = profiles("keras_train")
    terminal = _terminal(profs)
    assert terminal.index("out of memory") < terminal.index("Peak in use")
    for text in (terminal, render_markdown(list(profs)), render_html(list(profs))):
        assert "out of memory" in text and "A section of its own" in text
    assert "out of memory" in profile_html(profs[0])


def test_diff_and_check_with_an_old_baseline_say_what_changed_meaning(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    from traceparse.cli.app import main

    data = baseline_of(profiles("jax08_gemm")[0]).to_dict()
    data["version"] = 1
    old = tmp_path / "old.json"  # type: ignore[operator]
    old.write_text(json.dumps(data))
    gemm = str(FIXTURES / "jax08_gemm")
    assert main(["diff", str(old), gemm, "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "baseline version 1" in captured.err and "live_at_peak_bytes" in captured.err
    before = json.loads(captured.out)["before"]
    assert list(before["changed_meaning"]) == ["live_at_peak_bytes"]
    assert main(["check", gemm, "--baseline", str(old)]) == 0
    assert "live_at_peak_bytes" in capsys.readouterr().err
