"""One JSON per allocator: ``summary``, ``report``, ``oom``, ``predict`` and
``baseline`` write each allocator as its record (``AllocatorRecord.to_dict()``
with its sentences), every key present, and docs/record-schema.json is what
``traceparse.output.schema`` generates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES
from test_record import CAPTURES, profiles

from traceparse.cli import main
from traceparse.cli._json import failures_as_dicts, summaries_as_dicts
from traceparse.gate.baseline import Baseline, baseline_of
from traceparse.output.schema import render, schema
from traceparse.records import RECORD_VERSION, SECTIONS
from traceparse.report.jsonreport import report_dict

SCHEMA = FIXTURES.parent / "docs" / "record-schema.json"
KEYS = list(schema()["properties"])


def test_the_committed_schema_is_the_generated_one() -> None:
    assert SCHEMA.read_text(encoding="utf-8") == render(), (
        "docs/record-schema.json is stale: run `make schema`"
    )


def test_the_schema_names_every_key_in_order() -> None:
    (record,) = summaries_as_dicts(profiles("leak"))[0]["allocators"]
    assert list(record) == KEYS
    assert record["record_version"] == RECORD_VERSION
    assert all(record[name] is None for name in SECTIONS)


def _key_sets(allocators: list[dict]) -> set[tuple[str, ...]]:
    return {tuple(a) for a in allocators}


@pytest.mark.parametrize("name", CAPTURES)
def test_every_command_writes_the_same_allocator_keys(name: str) -> None:
    """summary, report, oom and baseline: the same keys in the same order, and the
    same figures, for every allocator of every fixture."""
    profs = list(profiles(name))
    written = {
        "summary": [a for d in summaries_as_dicts(profs) for a in d["allocators"]],
        "report": [a for p in report_dict(profs)["profiles"] for a in p["summary"]],
        "oom": [a for d in failures_as_dicts(profs) for a in d["allocators"]],
        "baseline": [a for p in profs for a in baseline_of(p).to_dict()["allocators"]],
    }
    records = [r for p in profs for r in p.summary()]
    for command, allocators in written.items():
        assert len(allocators) == len(records), command
        assert _key_sets(allocators) <= {tuple(KEYS)}, command
        for a, r in zip(allocators, records, strict=True):
            assert (a["host"], a["allocator"]) == (r.host, r.allocator), command
            assert a["peak_bytes"] == r.peak_bytes and a["attribution"] == dict(r.attribution)
    # A section is made where asked, and null elsewhere.
    assert all(a["gate"] is not None for a in written["baseline"])
    assert all(a["gate"] is None and a["prediction"] is None for a in written["summary"])


def test_a_baseline_reads_back_its_records_and_older_layouts() -> None:
    (prof,) = profiles("batch_128")
    text = baseline_of(prof).to_json()
    again = Baseline.from_json(text)
    assert again.to_json() == text
    # Version 2 kept the gate's figures beside the peak: it still loads, the same.
    data = json.loads(text)
    kept = ("host", "allocator", "peak_bytes", "capacity_bytes", "live_at_peak_bytes")
    for entry in data["allocators"]:
        gate = entry.pop("gate")
        for key in [k for k in entry if k not in (*kept, "allocations")]:
            del entry[key]
        entry.update(gate)
    data["version"] = 2
    old = Baseline.from_dict(data)
    assert old.allocators == again.allocators


def test_predict_json_carries_the_record_with_its_prediction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["predict", str(FIXTURES / "batch_128"), "--batch", "256", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (record,) = data["allocators"]
    assert list(record) == KEYS
    curve = record["prediction"]["curve"]
    assert record["prediction"]["captured_batch"] == 128 and len(curve) > 1
    assert record["peak_bytes"] == data["predictions"][0]["captured_peak_bytes"]


def test_oom_json_has_the_failures_and_the_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["oom", str(FIXTURES / "oom_run_graph"), "--format", "json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["failures"] and doc["allocators"]
    assert all(list(a) == KEYS for a in doc["allocators"])
