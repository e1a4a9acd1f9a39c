"""The batch summary: one row per (capture, host, allocator), as CSV, Parquet and Markdown.

Rows are sorted by path, host and allocator, and nothing in them depends on
when or where the batch ran, so a resumed batch, or the same batch on a Dask
cluster, writes byte-identical files.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_args

from traceparse.batching.records import Status
from traceparse.files.atomic import atomic_write
from traceparse.files.confined import own_file
from traceparse.files.names import printable
from traceparse.output.units import format_bytes, format_count, format_percent, plural
from traceparse.records.terms import PARTS
from traceparse.report.escape import md_code, md_text
from traceparse.report.markdown import md_sentence

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "STATUSES", "summary_frame", "write_summaries"]

STATUSES: tuple[str, ...] = get_args(Status)

# Column -> pandas dtype. Bytes are integers; unknown values are NA.
COLUMNS: dict[str, str] = {
    "path": "string",  # the capture file: absolute, or a URL
    "run": "string",
    "host": "string",
    "format": "string",  # xplane, memory_profile.json, memory_profile
    "allocator": "string",
    "status": "string",  # ok, empty (no memory events), error or out_of_memory
    "message": "string",  # the error, or why the capture is empty
    "peak_bytes": "Int64",  # reserved + allocated at the allocator's peak
    "capacity_bytes": "Int64",
    "utilisation": "Float64",  # peak / capacity
    "peak_step": "Int64",
    "top_op": "string",  # the op holding the most bytes at the peak
    "top_op_bytes": "Int64",
    **dict.fromkeys(PARTS, "Int64"),  # the attribution: parts that sum to peak_bytes
    "leak_verdict": "string",
    "allocations": "Int64",
    "live_at_peak": "Int64",
    "report": "string",  # the capture's directory under OUTDIR, with its reports
}

SUMMARY_FILES = ("summary.csv", "summary.parquet", "summary.md")


def summary_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The summary table: ``COLUMNS`` in order, sorted by path, host and allocator."""
    import pandas as pd

    ordered = sorted(rows, key=lambda r: (r["path"], r.get("host") or "", r.get("allocator") or ""))
    # Paths of files whose names are not UTF-8 are stored with those bytes as \xNN.
    data = {name: [_shown(row.get(name)) for row in ordered] for name in COLUMNS}
    frame = pd.DataFrame(data, columns=list(COLUMNS))
    return frame.astype(COLUMNS)


def _shown(value: Any) -> Any:
    return printable(value) if isinstance(value, str) else value


def write_summaries(frame: pd.DataFrame, outdir: str) -> tuple[list[str], list[str]]:
    """Write ``summary.csv``, ``summary.parquet`` and ``summary.md`` atomically.

    Returns (paths written, notes). Without pyarrow the Parquet file is left
    out, with a note, rather than failing a finished batch.
    """
    from traceparse.output.export import to_csv, to_parquet

    written: list[str] = []
    notes: list[str] = []
    path = own_file(os.path.join(outdir, "summary.csv"))
    atomic_write(path, to_csv(frame))
    written.append(path)
    path = own_file(os.path.join(outdir, "summary.parquet"))
    if importlib.util.find_spec("pyarrow") is None:
        notes.append(
            "summary.parquet was not written: it needs pyarrow (pip install 'traceparse[report]')"
        )
    else:
        atomic_write(path, to_parquet(frame))
        written.append(path)
    path = own_file(os.path.join(outdir, "summary.md"))
    atomic_write(path, render_markdown(frame))
    written.append(path)
    return written, notes


def render_markdown(frame: pd.DataFrame) -> str:
    """The summary as Markdown: counts, then failures, empty captures, and every allocator."""
    # A ROOT that could not be searched is a row without a host.
    captures = frame[frame["host"].notna()].drop_duplicates("path")
    statuses = captures["status"].astype(object)
    counts = {status: int((statuses == status).sum()) for status in STATUSES}
    line = (
        f"{plural(len(captures), 'capture')}: {counts['ok']} ok, "
        f"{counts['empty']} without memory events, {counts['error']} failed"
    )
    if counts["out_of_memory"]:  # issue 39: said only when a capture ended so
        line += f", {counts['out_of_memory']} ended in out-of-memory"
    roots = int(frame["host"].isna().sum())
    if roots:
        line += f"; {plural(roots, 'root')} could not be searched"
    out = ["# traceparse batch summary", "", line + ".", ""]
    failed = frame[frame["status"] == "error"]
    if len(failed):
        out += ["## Failed", "", "| capture | reason |", "|---|---|"]
        out += [f"| {md_code(r.path)} | {md_sentence(r.message)} |" for r in _rows(failed)]
        out.append("")
    oom = frame[frame["status"] == "out_of_memory"].drop_duplicates("path")
    if len(oom):
        out += ["## Ended in out-of-memory", "", "| capture | failure |", "|---|---|"]
        out += [f"| {md_code(r.path)} | {md_sentence(r.message)} |" for r in _rows(oom)]
        out.append("")
    empty = frame[frame["status"] == "empty"]
    if len(empty):
        out += ["## Without memory events", "", "| capture | diagnostic |", "|---|---|"]
        out += [f"| {md_code(r.path)} | {md_sentence(r.message)} |" for r in _rows(empty)]
        out.append("")
    ok = frame[frame["status"].isin(["ok", "out_of_memory"]) & frame["allocator"].notna()]
    if len(ok):
        out += [
            "## Allocators",
            "",
            "| capture | run | host | allocator | peak | capacity | utilisation "
            "| top op at the peak | leak check | allocations | report |",
            "|---|---|---|---|--:|--:|--:|---|---|--:|---|",
        ]
        for r in _rows(ok):
            top = (
                "-"
                if _missing(r.top_op)
                else f"{md_code(r.top_op)} ({format_bytes(r.top_op_bytes)})"
            )
            cells = [
                md_code(r.path),
                md_code(r.run),
                md_code(r.host),
                md_code(r.allocator),
                format_bytes(_value(r.peak_bytes)),
                format_bytes(_value(r.capacity_bytes)),
                format_percent(_value(r.utilisation)),
                top,
                md_text(r.leak_verdict) if not _missing(r.leak_verdict) else "-",
                format_count(_value(r.allocations)),
                _links(r.report),
            ]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def _rows(frame: pd.DataFrame) -> Any:
    return frame.astype(object).itertuples(index=False)


def _missing(value: Any) -> bool:
    from traceparse.output.units import is_missing

    return bool(is_missing(value))


def _value(value: Any) -> Any:
    return None if _missing(value) else value


def _links(directory: Any) -> str:
    if _missing(directory):
        return "-"
    # Our own directory names: [A-Za-z0-9._-] and "/", safe in a link target.
    return f"[{md_text(os.path.basename(str(directory)))}]({directory}/)"
