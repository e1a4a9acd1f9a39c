"""The schema of an allocator's JSON, generated from ``AllocatorRecord``'s fields.

Every command writes an allocator the same way (``output.sentences.summary_record``:
the record's ``to_dict()`` plus its leak check and notes in words), so one
document describes them all: ``docs/record-schema.json``, a JSON Schema written by

    python -m traceparse.output.schema docs/record-schema.json    (make schema)

The types come from the fields' annotations, the descriptions from their
``metadata["doc"]``, the columns of the ranked tables from ``records.build``;
``tests/test_record_json.py`` checks the committed file against this.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from traceparse.files.atomic import atomic_write
from traceparse.records.allocator import (
    RECORD_VERSION,
    SECTIONS,
    LeakVerdict,
    Note,
    Part,
    StepUnit,
    json_fields,
)
from traceparse.records.build import (
    TOP_OP_COLUMNS,
    TOP_SCOPE_COLUMNS,
    TOP_TENSOR_COLUMNS,
    TOP_VARIABLE_COLUMNS,
)

__all__ = ["WORDS", "render", "schema"]

# The keys summary_record adds to the record's own: its figures in sentences.
WORDS: dict[str, dict[str, Any]] = {
    "leak_message": {"type": "string", "description": "The leak check in one sentence."},
    "diagnostics": {
        "type": "array",
        "items": {"type": "string"},
        "description": "The record's notes in sentences, each naming the allocator.",
    },
}

_COLUMNS = {
    "top_tensors": [*TOP_TENSOR_COLUMNS, "source"],
    "top_ops": TOP_OP_COLUMNS,
    "top_scopes": TOP_SCOPE_COLUMNS,
    "top_variables": TOP_VARIABLE_COLUMNS,
}
_PLAIN = {"str": "string", "int": "integer", "float": "number"}
_ENUMS: dict[str, type] = {"LeakVerdict": LeakVerdict, "StepUnit": StepUnit}


def _type(name: str, annotation: str) -> dict[str, Any]:
    """A JSON Schema for one field, from its annotation (a string: the module
    postpones annotations)."""
    nullable = annotation.endswith(" | None")
    base = annotation.removesuffix(" | None")
    out: dict[str, Any]
    if base in _PLAIN:
        out = {"type": _PLAIN[base]}
    elif base in _ENUMS:
        out = {"type": "string", "enum": [str(m) for m in _ENUMS[base]]}  # type: ignore[attr-defined]
    elif base == "tuple[Note, ...]":
        out = {"type": "array", "items": {"type": "string", "enum": [str(n) for n in Note]}}
    elif base == "dict[str, int]":
        out = {
            "type": "object",
            "propertyNames": {"enum": [str(p) for p in Part]},
            "additionalProperties": {"type": "integer"},
        }
    elif base == "dict[str, Any]":
        out = {"type": "object"}
    elif base == "pd.DataFrame":
        columns = _COLUMNS.get(name, [])
        out = {
            "type": "array",
            "items": {"type": "object", "properties": {c: {} for c in columns}},
        }
    else:
        raise TypeError(f"AllocatorRecord.{name}: no JSON type for {annotation!r}")
    if nullable:
        out["type"] = [out["type"], "null"]
    return out


def schema() -> dict[str, Any]:
    """The JSON Schema of one allocator as every command writes it."""
    properties: dict[str, Any] = {
        "record_version": {
            "const": RECORD_VERSION,
            "description": "The layout's version: it changes when a key is renamed or "
            "removed, or changes meaning.",
        }
    }
    for item in json_fields():
        entry = _type(item.name, str(item.type))
        doc = item.metadata.get("doc", "")
        if item.name in SECTIONS:
            doc += " Null when not made."
        properties[item.name] = {**entry, "description": doc}
    properties.update(WORDS)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "traceparse allocator record",
        "description": "One allocator of one host, as summary, report, oom, predict and "
        "baseline write it (AllocatorRecord.to_dict() with its sentences). Every key is "
        "always present; bytes are exact integers, times picoseconds from the capture "
        "start, unknown values null.",
        "type": "object",
        "required": list(properties),
        "properties": properties,
    }


def render() -> str:
    """The schema as the committed file holds it."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m traceparse.output.schema FILE", file=sys.stderr)
        return 2
    atomic_write(args[0], render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
