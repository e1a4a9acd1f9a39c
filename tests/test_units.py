"""Human units, atomic writes and table export: the helpers every output uses."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from traceparse.errors import UsageError
from traceparse.files.atomic import atomic_write
from traceparse.output.export import format_from_path, neutralise_cell, to_csv, to_json, to_parquet
from traceparse.output.units import (
    format_bytes,
    format_count,
    format_duration_ps,
    format_percent,
    parse_bytes,
    parse_duration_s,
    parse_percent,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (256 * 1024, "256 KiB"),
        (1024**2 - 1, "1 MiB"),
        (int(1.5 * 1024**2), "1.5 MiB"),
        (33_554_432, "32 MiB"),
        (80 * 1024**3, "80 GiB"),
        (3 * 1024**4, "3 TiB"),
        (-2048, "-2 KiB"),
        (None, "-"),
        (float("nan"), "-"),
        (pd.NA, "-"),
    ],
)
def test_format_bytes(value: object, text: str) -> None:
    assert format_bytes(value) == text


def test_format_bytes_signed() -> None:
    assert format_bytes(1536, signed=True) == "+1.5 KiB"
    assert format_bytes(-1536, signed=True) == "-1.5 KiB"
    assert format_bytes(0, signed=True) == "0 B"


@pytest.mark.parametrize(
    ("ps", "text"),
    [
        (12_300_000_000, "12.3 ms"),
        (999, "999 ps"),
        (1_500, "1.50 ns"),
        (2_500_000, "2.50 µs"),
        (3 * 10**12, "3.00 s"),
        (123_456_000_000_000, "123 s"),
        (pd.NA, "-"),
    ],
)
def test_format_duration_ps(ps: object, text: str) -> None:
    assert format_duration_ps(ps) == text


def test_format_percent_and_count() -> None:
    assert format_percent(0.912) == "91.2%"
    assert format_percent(1) == "100.0%"
    assert format_percent(None) == "-"
    assert format_count(1234567) == "1,234,567"
    assert format_count(pd.NA) == "-"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5GiB", 1610612736),
        ("1.5 gib", 1610612736),
        ("2GB", 2_000_000_000),
        ("2 gb", 2_000_000_000),
        ("512MiB", 512 * 1024**2),
        ("512mb", 512_000_000),
        ("10KiB", 10240),
        ("10kb", 10_000),
        ("1TiB", 1024**4),
        ("1TB", 10**12),
        ("100", 100),
        ("100B", 100),
        ("0", 0),
        (4096, 4096),
    ],
)
def test_parse_bytes(text: str | int, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("junk", ["", "abc", "1.5 furlongs", "GiB", "-1GiB", "1..5GB", "1e999GB"])
def test_parse_bytes_rejects_junk(junk: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_bytes(junk)
    assert info.value.exit_code == 2
    assert "GiB" in str(info.value) or "too large" in str(info.value)


def test_parse_bytes_rejects_negative_int() -> None:
    with pytest.raises(UsageError):
        parse_bytes(-5)


def test_parse_bytes_round_trips_format_bytes() -> None:
    for n in (1024, 1536, 3 * 1024**2, 80 * 1024**3):
        assert parse_bytes(format_bytes(n).replace(" ", "")) == n


@pytest.mark.parametrize(
    ("text", "value"), [("90%", 0.9), ("90 %", 0.9), ("0.9", 0.9), ("50", 0.5), (0.25, 0.25)]
)
def test_parse_percent(text: str | float, value: float) -> None:
    assert parse_percent(text) == pytest.approx(value)


@pytest.mark.parametrize("junk", ["ninety", "%", "-5%", ""])
def test_parse_percent_rejects_junk(junk: str) -> None:
    with pytest.raises(UsageError):
        parse_percent(junk)


@pytest.mark.parametrize(
    ("text", "seconds"), [("2", 2.0), ("1.5s", 1.5), ("500ms", 0.5), ("2m", 120.0), (3, 3.0)]
)
def test_parse_duration(text: str | float, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


def test_parse_duration_rejects_junk() -> None:
    with pytest.raises(UsageError):
        parse_duration_s("soon")


# -- atomic_write ------------------------------------------------------------


def test_atomic_write_creates_parents_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.txt"
    atomic_write(target, "first")
    assert target.read_text() == "first"
    atomic_write(str(target), b"second")
    assert target.read_bytes() == b"second"
    assert os.listdir(target.parent) == ["out.txt"]


def test_atomic_write_keeps_the_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.txt"]  # no temporary file left behind


def test_atomic_write_gives_ordinary_permissions(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    atomic_write(target, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


# -- export --------------------------------------------------------------------


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "op": pd.Categorical(["=HYPERLINK(1)", "model/dense/MatMul", "+x", "-y", "@z"]),
            "note": ["\tcmd", "plain", None, "a,b", 'quote"d'],
            "bytes": pd.array([1, None, -3, 4, 5], dtype="Int64"),
            "fraction": [0.5, float("nan"), 0.25, 1.0, 0.0],
        }
    )


def test_csv_neutralises_formulas(frame: pd.DataFrame) -> None:
    text = to_csv(frame)
    rows = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert rows["op"].tolist() == ["'=HYPERLINK(1)", "model/dense/MatMul", "'+x", "'-y", "'@z"]
    assert rows["note"].tolist() == ["'\tcmd", "plain", "", "a,b", 'quote"d']
    # Numbers stay numbers, negative ones included; NA is an empty cell.
    assert text.splitlines()[3].split(",")[2] == "-3"
    assert rows["bytes"].tolist()[1] == ""


def test_neutralise_cell_leaves_other_values() -> None:
    assert neutralise_cell("ok") == "ok"
    assert neutralise_cell(-5) == -5
    assert neutralise_cell(None) is None


def test_json_records(frame: pd.DataFrame) -> None:
    rows = json.loads(to_json(frame))
    assert rows[0] == {"op": "=HYPERLINK(1)", "note": "\tcmd", "bytes": 1, "fraction": 0.5}
    assert rows[1]["bytes"] is None and rows[1]["fraction"] is None
    assert rows[2]["note"] is None
    assert "\\/" not in to_json(frame)  # slashes are not escaped


def test_parquet_round_trip(frame: pd.DataFrame) -> None:
    back = pd.read_parquet(io.BytesIO(to_parquet(frame)))
    assert back["bytes"].dtype == "Int64"
    assert back["op"].astype(str).tolist() == frame["op"].astype(str).tolist()


@pytest.mark.parametrize(
    ("path", "fmt"),
    [("a.csv", "csv"), ("A.JSON", "json"), ("x.parquet", "parquet"), ("r.md", "md"), ("x", None)],
)
def test_format_from_path(path: str, fmt: str | None) -> None:
    from traceparse.report.formats import FILE_SUFFIXES

    # The report formats' suffixes are the report registry's (report/formats.py).
    assert format_from_path(path, FILE_SUFFIXES) == fmt
    assert format_from_path(path) == (None if fmt == "md" else fmt)
