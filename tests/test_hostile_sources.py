"""Crafted source records (``<host>.sources.json.gz``, docs/sources.md): a bad one
is one diagnostic and the capture loads without it; text in a good one is
escaped; no file a record names is ever opened; a record of another run is
ignored.

Each case is the real ``sources_fit`` capture with its record replaced.
"""

from __future__ import annotations

import builtins
import gzip
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.sources_record import IGNORED, SOURCE, capture_with, packed, real_record

import traceparse
from traceparse.cli import main
from traceparse.decode.sources import MAX_DEPTH, MAX_FRAMES, SourcesProblem, decode_sources


def edited(change: Callable[[dict[str, Any]], None]) -> bytes:
    document = real_record()
    change(document)
    return packed(document)


def deep(document: dict[str, Any]) -> None:
    document["stacks"][0] = [0] * (MAX_DEPTH + 1)


def unknown_frame(document: dict[str, Any]) -> None:
    document["stacks"][0] = [len(document["frames"])]


def many_frames(document: dict[str, Any]) -> None:
    document["frames"] = [["a.py", 1, "f", 1]] * (MAX_FRAMES + 1)


def bad_eager(document: dict[str, Any]) -> None:
    document["eager"]["time_ns"] = ["soon"]


def stale(document: dict[str, Any]) -> None:
    # Another run in the same directory: its clock window is an hour later.
    document["started_ns"] += 3600 * 10**9
    document["stopped_ns"] += 3600 * 10**9


CASES: dict[str, bytes] = {
    "truncated": (SOURCE / "localhost.sources.json.gz").read_bytes()[:200],
    "not gzip": b'{"format": "traceparse.sources"}',
    "not json": gzip.compress(b"\x00\x01 not json"),
    "wrong kind": packed({"format": "traceparse.variables", "version": 1, "variables": []}),
    "future version": edited(lambda d: d.update(version=99)),
    "a list": packed([1, 2, 3]),
    "deep stack": edited(deep),
    "unknown frame": edited(unknown_frame),
    "millions of frames": edited(many_frames),
    "bad eager times": edited(bad_eager),
    "nested": gzip.compress(b"[" * 100_000 + b"]" * 100_000),
    "stale": edited(stale),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_record_is_one_diagnostic(case: str, tmp_path: Path) -> None:
    prof = traceparse.load(capture_with(tmp_path, CASES[case]))
    notes = [n for n in prof.diagnostics() if IGNORED in n]
    assert len(notes) == 1, prof.diagnostics()
    assert "localhost.sources.json.gz" in notes[0]
    assert "traceparse.profile()" in notes[0]
    assert len(notes[0]) < 500
    # The capture loads without sources; every other table is there.
    assert prof.allocations["source"].isna().all()
    assert len(prof.allocations) and len(prof.breakdown) and prof.stacks.empty
    assert prof.lines()["source"].isna().all()


def test_the_commands_say_it_and_succeed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = capture_with(tmp_path, CASES["truncated"])
    assert main(["lines", str(path)]) == 0
    assert main(["summary", str(path)]) == 0
    assert IGNORED in capsys.readouterr().out


def test_unsafe_text_is_escaped(tmp_path: Path) -> None:
    document = real_record()
    evil = "/abs/\x1b]0;pwned\x07\u202egnp.py\x00\r\n"
    for frame in document["frames"]:
        if frame[3]:
            frame[0] = evil + frame[0]
            frame[2] = "f\x1b[2J"
    prof = traceparse.load(capture_with(tmp_path, packed(document)))
    sources = [s for s in prof.allocations["source"].astype(object) if isinstance(s, str)]
    assert sources
    for text in [*sources, *prof.stacks["frame"]]:
        assert not any(ch in text for ch in "\x1b\x07\u202e\x00\r\n"), repr(text)
    assert any("\\x1b]0;pwned" in s and "\\u202e" in s for s in sources)


def test_no_file_named_is_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The frames name real files (absolute, outside the project): loading and
    every view reads them as text only."""
    trap = tmp_path / "trap.py"
    trap.write_text("raise SystemExit('executed')\n")
    document = real_record()
    for frame in document["frames"]:
        if frame[3]:
            frame[0] = str(trap)
    logs = capture_with(tmp_path, packed(document))
    opened: list[str] = []
    real_open, real_os_open, real_io_open = builtins.open, os.open, io.open

    def watch(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(file: Any, *args: Any, **kwargs: Any) -> Any:
            opened.append(os.fspath(file) if isinstance(file, (str, os.PathLike)) else str(file))
            return real(file, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(builtins, "open", watch(real_open))
    monkeypatch.setattr(io, "open", watch(real_io_open))
    monkeypatch.setattr(os, "open", watch(real_os_open))
    prof = traceparse.load(logs)
    lines = prof.lines(by_stack=True)
    out = io.StringIO()
    from traceparse.report.flame import flame_html

    out.write(flame_html(prof))
    assert any(str(trap) in str(s) for s in lines["source"])
    assert str(trap) not in opened
    assert trap.read_text() == "raise SystemExit('executed')\n"


def test_decode_refuses_with_reasons() -> None:
    with pytest.raises(SourcesProblem, match="frames deep"):
        decode_sources(gzip.decompress(edited(deep)), "x")
    with pytest.raises(SourcesProblem, match="not listed"):
        decode_sources(gzip.decompress(edited(unknown_frame)), "x")
    record = decode_sources(gzip.decompress(edited(lambda d: None)), "x")
    assert record.stack_count > 0 and record.ops
