"""The JSON report: every number, machine-readable, with a ``schema_version``.

Layout (``schema_version`` 1)::

    {"schema_version": 1,
     "generator": {"name": "traceparse", "version": "..."},
     "generated_at": "YYYY-MM-DDTHH:MM:SSZ",
     "profiles": [{"run", "hosts", "paths", "diagnostics",
                   "summary": [AllocatorRecord.to_dict(), ...],
                   "whatif": WhatIfRecord.to_dict() or null,
                   "tables": {"peak": [...], "attribution": [...],
                              "ops": [...], "layers": [...], "steps": [...]}}]}

Tables are lists of records with the columns in table order; unknown values
(pandas NA, NaN) are ``null``; bytes and picoseconds are exact integers.
Bump ``SCHEMA_VERSION`` when a key is renamed or removed (adding keys is fine).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

# One converter for every JSON output; the names here are what report users import.
from traceparse.output.jsonvalues import dumps
from traceparse.output.jsonvalues import json_records as frame_records
from traceparse.output.jsonvalues import json_value as jsonable
from traceparse.output.sentences import summary_record
from traceparse.report.source import ProfileLike
from traceparse.report.view import generated_at

__all__ = ["SCHEMA_VERSION", "TABLES", "frame_records", "jsonable", "render_json", "report_dict"]

SCHEMA_VERSION = 1
TABLES = ("peak", "attribution", "ops", "layers", "steps")


def render_json(profiles: Sequence[ProfileLike], version: str | None = None) -> str:
    """The JSON report over ``profiles``, as text (UTF-8, two-space indent)."""
    return dumps(report_dict(profiles, version)) + "\n"


def _table(profile: ProfileLike, name: str) -> pd.DataFrame:
    """A table of the Profile: a property, or a method called with its defaults."""
    found = getattr(profile, name)
    return found() if callable(found) else found


def report_dict(profiles: Sequence[ProfileLike], version: str | None = None) -> dict[str, Any]:
    from traceparse.version import __version__

    return {
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": "traceparse", "version": version or __version__},
        "generated_at": generated_at(),
        "profiles": [_profile(p) for p in profiles],
    }


def _profile(profile: ProfileLike) -> dict[str, Any]:
    from traceparse.report.failure import failure_records
    from traceparse.report.whatif import whatif_json

    failures = failure_records(profile)  # issue 39: a key only when the capture failed
    return {
        "run": profile.run,
        **({"failures": failures} if failures else {}),
        "hosts": [str(h) for h in profile.hosts],
        "paths": [str(p) for p in profile.paths],
        "diagnostics": [str(d) for d in profile.diagnostics()],
        "summary": [summary_record(s) for s in profile.summary(predict=True)],
        # Issue 50: the what-if section (report/whatif.py), null where not made.
        "whatif": whatif_json(profile),
        "tables": {name: frame_records(_measured(_table(profile, name))) for name in TABLES}
        | _xla_tables(profile)
        | _parameter_table(profile),
    }


def _measured(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """``frame`` without the columns it says were not measured (an attribution part
    whose source the capture lacks, such as ``variable_bytes`` without an inventory)."""
    if frame is None:
        return None
    absent = [c for c in frame.attrs.get("not_measured", ()) if c in frame.columns]
    return frame.drop(columns=absent) if absent else frame


def _xla_tables(profile: ProfileLike) -> dict[str, list[dict[str, Any]]]:
    """``xla_programs`` and ``xla_buffers`` live at the peak, only when a linked
    program holds memory there (so reports of other captures keep their keys)."""
    programs, buffers = profile.xla_at_peak()
    if programs.empty:
        return {}
    return {"xla_programs": frame_records(programs), "xla_buffers": frame_records(buffers)}


def _parameter_table(profile: ProfileLike) -> dict[str, list[dict[str, Any]]]:
    """``xla_parameters``, only when ``xla_parameter_bytes`` was measured (no
    inventory, an XLA program that ran), so reports of other captures keep their keys."""
    if "xla_parameter_bytes" in profile.attribution.attrs.get(
        "not_measured", ("xla_parameter_bytes",)
    ):
        return {}
    table = getattr(profile, "xla_parameters", None)
    return {} if table is None else {"xla_parameters": frame_records(table)}
