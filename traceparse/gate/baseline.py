"""Baselines: a capture's figures as versioned JSON, for later runs to be checked against.

The file is meant to be committed and reviewed: keys in a fixed order,
allocators sorted by host then name, ops sorted by name, integers as plain
numbers, one value per line, a trailing newline. Nothing in it depends on the
time it was written, so the same capture always gives the same bytes.

Each allocator is its record's JSON, as every other command writes it
(``AllocatorRecord.to_dict()``, docs/record-schema.json), with the figures the
gate compares in its ``gate`` section (version 3; versions 1 and 2 had those
beside ``peak_bytes``, and still load)::

    {
      "format": "traceparse-baseline",
      "version": 3,
      "traceparse": "0.1.0",
      "source": {"path": "logs/plugins/profile/2026_11_29_14_13_15/localhost.xplane.pb",
                 "run": "2026_11_29_14_13_15"},
      "allocators": [
        {"record_version": 1, "host": "localhost", "allocator": "mklcpu",
         "peak_bytes": 29360128, "capacity_bytes": 25276502016,
         "live_at_peak_bytes": 29360128, "allocations": 43, ...,
         "gate": {"padding_at_peak_bytes": 2752512, "allocated_bytes": 159907840,
                  "steps": 5,
                  "ops": {"AddV2": {"live_at_peak_bytes": 4194304,
                                    "allocated_bytes": 4194304, "count": 1,
                                    "requested_bytes": 4194304,
                                    "live_at_peak_requested_bytes": 4194304,
                                    "shapes": ["float32[4096,256]"]}, ...}}}
      ]
    }
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from traceparse.errors import InputError
from traceparse.gate.figures import AllocatorFigures, OpFigures, figures_of

if TYPE_CHECKING:
    from traceparse.records.source import RecordSource

__all__ = [
    "BASELINE_FORMAT",
    "BASELINE_VERSION",
    "MEANING_CHANGES",
    "Baseline",
    "baseline_of",
    "is_baseline_file",
    "read_baseline",
]

BASELINE_FORMAT = "traceparse-baseline"
# 2: live_at_peak_bytes counts compiled programs' XLA buffers and slab slack.
# 3: each allocator is its record's JSON, the gate's figures in its "gate" section.
BASELINE_VERSION = 3
# Figures whose meaning changed at a version: a baseline written before it still
# loads, and a comparison with it says which of its figures mean something else.
MEANING_CHANGES: dict[int, dict[str, str]] = {
    2: {
        "live_at_peak_bytes": "now counts the XLA buffers and slab slack of compiled "
        "programs, which baselines of version 1 left out",
    },
}

_INT_FIELDS = (
    "peak_bytes",
    "live_at_peak_bytes",
    "padding_at_peak_bytes",
    "allocated_bytes",
    "allocations",
)
_OP_FIELDS = ("live_at_peak_bytes", "allocated_bytes", "count")
# Added later (same version): what the program asked for. A baseline written
# before them compares what was handed out instead (each falls back to its pair).
_REQUEST_FIELDS = {
    "requested_bytes": "allocated_bytes",
    "live_at_peak_requested_bytes": "live_at_peak_bytes",
}


@dataclass(frozen=True)
class Baseline:
    """Figures per (host, allocator) and where they came from."""

    allocators: list[AllocatorFigures]
    source: dict[str, str] = field(default_factory=dict)
    path: str | None = None  # the file it was read from, for messages
    version: int = BASELINE_VERSION  # the version it was written with
    # Per (host, allocator): the record's JSON the file carries beside the figures
    # (output.sentences.summary_record); empty for a file of version 1 or 2.
    records: dict[tuple[str, str], dict[str, Any]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def label(self) -> str:
        return self.path or self.source.get("path", "baseline")

    @property
    def changed_meaning(self) -> dict[str, str]:
        """Figure -> how its meaning changed since this baseline was written."""
        out: dict[str, str] = {}
        for version, changes in sorted(MEANING_CHANGES.items()):
            if version > self.version:
                out.update(changes)
        return out

    def meaning_notes(self) -> list[str]:
        """One line per figure that means something else now than when written."""
        return [
            f"{self.label} was written with baseline version {self.version}: "
            f"its {figure} {what}; write the baseline again to compare like with like"
            for figure, what in self.changed_meaning.items()
        ]

    def to_dict(self) -> dict[str, Any]:
        from traceparse.version import __version__

        return {
            "format": BASELINE_FORMAT,
            "version": BASELINE_VERSION,
            "traceparse": __version__,
            "source": dict(self.source),
            "allocators": [
                self._entry(a) for a in sorted(self.allocators, key=lambda a: (a.host, a.allocator))
            ],
        }

    def _entry(self, figures: AllocatorFigures) -> dict[str, Any]:
        """An allocator's entry: its record's JSON, the gate's figures in ``gate``."""
        gate = _gate_dict(figures)
        record = self.records.get((figures.host, figures.allocator))
        if record is None:  # read from a file of version 1 or 2: only the figures
            return {
                "host": figures.host,
                "allocator": figures.allocator,
                "peak_bytes": figures.peak_bytes,
                "capacity_bytes": figures.capacity_bytes,
                "live_at_peak_bytes": figures.live_at_peak_bytes,
                "allocations": figures.allocations,
                "gate": gate,
            }
        # In the record's own key order (the section's place), whatever the figures.
        return (
            {**record, "gate": gate}
            if "gate" not in record
            else {k: gate if k == "gate" else v for k, v in record.items()}
        )

    def to_json(self) -> str:
        from traceparse.output.jsonvalues import inert

        return inert(json.dumps(self.to_dict(), indent=2, ensure_ascii=False)) + "\n"

    @classmethod
    def from_json(cls, text: str, path: str | None = None) -> Baseline:
        """Parse a baseline; ``InputError`` naming ``path`` for anything else."""
        where = path or "baseline"
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InputError(
                f"{where}: not a traceparse baseline (invalid JSON: {exc}); write one with "
                "'traceparse baseline PATH -o FILE'",
                path,
            ) from None
        return cls.from_dict(data, path)

    @classmethod
    def from_dict(cls, data: Any, path: str | None = None) -> Baseline:
        where = path or "baseline"
        if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
            raise InputError(
                f'{where}: not a traceparse baseline (no "format": "{BASELINE_FORMAT}"); '
                "write one with 'traceparse baseline PATH -o FILE'",
                path,
            )
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise InputError(f'{where}: the baseline has no valid "version"', path)
        if version > BASELINE_VERSION:
            raise InputError(
                f"{where}: baseline version {version} is newer than this traceparse reads "
                f"(up to {BASELINE_VERSION}); upgrade traceparse or rewrite the baseline",
                path,
            )
        entries = data.get("allocators")
        if not isinstance(entries, list):
            raise InputError(f'{where}: the baseline has no "allocators" list', path)
        source = data.get("source") if isinstance(data.get("source"), dict) else {}
        allocators = [_allocator_from(entry, i, where, path) for i, entry in enumerate(entries)]
        records = {
            (str(entry["host"]), str(entry["allocator"])): dict(entry)
            for entry in entries
            if "record_version" in entry
        }
        return cls(
            allocators=allocators,
            source={str(k): str(v) for k, v in (source or {}).items()},
            path=path,
            version=version,
            records=records,
        )


def baseline_of(profile: RecordSource) -> Baseline:
    """The baseline of ``profile``: its gate figures and every allocator's record."""
    from traceparse.output.sentences import summary_record

    figures = figures_of(profile)
    gates = {(f.host, f.allocator): _gate_dict(f) for f in figures}
    return Baseline(
        allocators=figures,
        source={"path": profile.path, "run": profile.run or ""},
        records={
            (r.host, r.allocator): summary_record(replace(r, gate=gates[(r.host, r.allocator)]))
            for r in profile.summary()
        },
    )


def is_baseline_file(path: str | os.PathLike[str]) -> bool:
    """True for a path that looks like a baseline (a ``.json`` file), not a capture."""
    text = os.fspath(path)
    return text.lower().endswith(".json") and not os.path.isdir(text)


def read_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline file; ``InputError`` (exit code 3) if missing or invalid."""
    text_path = os.fspath(path)
    try:
        with open(text_path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise InputError(
            f"{text_path}: no such baseline file; write one with "
            "'traceparse baseline PATH -o FILE'",
            text_path,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InputError(f"{text_path}: cannot read the baseline ({reason})", text_path) from exc
    return Baseline.from_json(text, text_path)


def _gate_dict(figures: AllocatorFigures) -> dict[str, Any]:
    """The record's ``gate`` section: the figures a comparison reads besides the
    record's own peak, capacity, live-at-peak bytes and allocation count."""
    return {
        "padding_at_peak_bytes": figures.padding_at_peak_bytes,
        "allocated_bytes": figures.allocated_bytes,
        "steps": figures.steps,
        "ops": {
            op: {
                **{name: getattr(values, name) for name in (*_OP_FIELDS, *_REQUEST_FIELDS)},
                "shapes": list(values.shapes),
            }
            for op, values in sorted(figures.ops.items())
        },
    }


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _allocator_from(entry: Any, index: int, where: str, path: str | None) -> AllocatorFigures:
    def bad(what: str) -> InputError:
        return InputError(f"{where}: allocator entry {index} {what}", path)

    if not isinstance(entry, dict):
        raise bad("is not an object")
    gate = entry.get("gate")
    if gate is not None and not isinstance(gate, dict):
        raise bad("has an invalid 'gate' (an object of figures)")
    # Version 3 keeps the gate's figures in "gate"; 1 and 2 beside the peak.
    entry = {**entry, **(gate or {})}
    host, allocator = entry.get("host"), entry.get("allocator")
    if not isinstance(host, str) or not isinstance(allocator, str):
        raise bad('needs "host" and "allocator" strings')
    values: dict[str, int] = {}
    if "peak_bytes" not in entry:
        raise bad('has no "peak_bytes"')
    for name in _INT_FIELDS:
        value = _int(entry.get(name, 0))
        if value is None or value < 0:
            raise bad(f"has an invalid {name!r} (a whole number of bytes, 0 or more)")
        values[name] = value
    capacity = entry.get("capacity_bytes")
    if capacity is not None and (_int(capacity) is None or capacity < 0):
        raise bad("has an invalid 'capacity_bytes'")
    steps = entry.get("steps")  # older baselines have none
    if steps is not None and (_int(steps) is None or steps < 0):
        raise bad("has an invalid 'steps' (a whole number, 0 or more)")
    ops_data = entry.get("ops", {})
    if not isinstance(ops_data, dict):
        raise bad("has an invalid 'ops' (an object keyed by op name)")
    ops: dict[str, OpFigures] = {}
    for op, figures in ops_data.items():
        if not isinstance(figures, dict):
            raise bad(f"has an invalid entry for op {op!r}")
        numbers = [_int(figures.get(name, 0)) for name in _OP_FIELDS]
        numbers += [
            _int(figures.get(name, figures.get(pair, 0))) for name, pair in _REQUEST_FIELDS.items()
        ]
        if any(n is None or n < 0 for n in numbers):
            raise bad(f"has invalid numbers for op {op!r}")
        shapes = figures.get("shapes", [])
        if not isinstance(shapes, list) or not all(isinstance(x, str) for x in shapes):
            raise bad(f"has invalid shapes for op {op!r} (a list of strings)")
        at_peak, allocated, count, requested, at_peak_requested = (int(n or 0) for n in numbers)
        ops[str(op)] = OpFigures(
            at_peak, allocated, count, requested, at_peak_requested, tuple(shapes)
        )
    return AllocatorFigures(
        host=host,
        allocator=allocator,
        peak_bytes=values["peak_bytes"],
        capacity_bytes=capacity,
        live_at_peak_bytes=values["live_at_peak_bytes"],
        padding_at_peak_bytes=values["padding_at_peak_bytes"],
        allocated_bytes=values["allocated_bytes"],
        allocations=values["allocations"],
        ops=dict(sorted(ops.items())),
        steps=steps,
    )
