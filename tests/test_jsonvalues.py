"""One JSON converter (output/jsonvalues.py) for every JSON output, and what it makes of
the values tables and analyses hold."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest

from traceparse.output import export
from traceparse.output.jsonvalues import dumps, json_default, json_records, json_value
from traceparse.report import jsonreport


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (pd.Timedelta(seconds=1.5), 1.5),
        (dt.timedelta(seconds=1.5), 1.5),
        (np.timedelta64(1500, "ms"), 1.5),
        (pd.Timedelta(0), 0.0),
        (pd.NaT, None),
        ((1, 2), [1, 2]),
        ((np.int64(1), (2, "a")), [1, [2, "a"]]),
        (pd.NA, None),
        (None, None),
        (float("nan"), None),
        (np.float32("inf"), None),
        (np.int64(2**62 + 1), 2**62 + 1),  # exact, never through a float
        (np.uint64(2**64 - 1), 2**64 - 1),
        (np.int32(-3), -3),
        (np.float64(0.25), 0.25),
        (np.bool_(True), True),
        (pd.Categorical(["a", "b", "a"]), ["a", "b", "a"]),
        (pd.Series(["x", None], dtype="category"), ["x", None]),
        (pd.array([1, None], dtype="Int64"), [1, None]),
        ({1: np.int64(2)}, {"1": 2}),
        (pd.Timestamp("2026-12-01 12:00:00", tz="UTC"), "2026-12-01T12:00:00+00:00"),
        ("text", "text"),
    ],
    ids=repr,
)
def test_json_value(value: object, expected: object) -> None:
    got = json_value(value)
    assert got == expected
    assert type(got) is type(expected)
    json.dumps(got, allow_nan=False)


def test_a_frame_with_every_kind_of_value_reads_the_same_in_each_output() -> None:
    frame = pd.DataFrame(
        {
            "bytes": pd.array([1 << 40, None], dtype="Int64"),
            "name": pd.Categorical(["conv", None]),
            "shape": pd.Series([(2, 3), ()], dtype=object),
            "took": [pd.Timedelta(seconds=1.5), pd.NaT],
            "share": [0.5, np.nan],
        }
    )
    expected = [
        {"bytes": 1 << 40, "name": "conv", "shape": [2, 3], "took": 1.5, "share": 0.5},
        {"bytes": None, "name": None, "shape": [], "took": None, "share": None},
    ]
    assert json_records(frame) == expected
    assert json.loads(export.to_json(frame)) == expected  # `--format json` exports
    assert list(export.records(frame)) == expected
    assert jsonreport.frame_records(frame) == expected  # the JSON report's tables
    assert json.loads(json.dumps({"t": frame}, default=json_default)) == {"t": expected}
    assert json.loads(dumps({"t": frame})) == {"t": expected}
    assert json_records(frame.iloc[:0]) == [] and json_records(None) == []


def test_an_unknown_object_is_its_text_and_default_refuses_nothing_new() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert json_value(Thing()) == "thing"
    with pytest.raises(TypeError):
        json_default("already plain")
