"""DataFrames out as CSV, JSON or Parquet, for other tools.

Values stay raw here (bytes as integers, times as integer picoseconds, NA as an
empty CSV cell or JSON ``null``); human units are for the terminal only.

CSV is made safe to open in a spreadsheet: a text cell that starts with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return gets a leading apostrophe, so it
is never run as a formula. Numeric columns are written as numbers (a negative
number is not a formula). A carriage return inside a text cell is written as a
line feed: lines end in ``\n``, so the writer quotes only cells holding that,
and a bare ``\r`` would end the row for every reader, starting a new one with
whatever follows it (``"x\r=cmd()"``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from traceparse.errors import UsageError
from traceparse.files.atomic import atomic_write

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EXPORT_FORMATS",
    "format_from_path",
    "neutralise_cell",
    "to_csv",
    "to_json",
    "to_parquet",
    "write_output",
]

EXPORT_FORMATS = ("csv", "json", "parquet")
# The table exports' file suffixes -> format; the reports' are report.formats'
# (its FILE_SUFFIXES holds both, for the command line).
TABLE_SUFFIXES = {
    ".csv": "csv",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".txt": "table",
}
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def format_from_path(path: str | None, suffixes: Mapping[str, str] = TABLE_SUFFIXES) -> str | None:
    """The format a file name asks for (``ops.csv`` -> ``"csv"``), or None; ``suffixes``
    maps the suffixes known (``report.formats.FILE_SUFFIXES``: the reports' too)."""
    if not path:
        return None
    return suffixes.get(os.path.splitext(path)[1].lower())


def check_extension(
    path: str | None,
    fmt: str,
    explicit: bool,
    formats: tuple[str, ...],
    suffixes: Mapping[str, str] = TABLE_SUFFIXES,
) -> None:
    """Refuse an output name whose extension says another format than the one written.

    ``-o x.pdf`` would otherwise get Markdown, and ``--format md -o x.html`` a
    file no browser shows. An extension this tool does not know is fine when
    ``--format`` is given (``-o notes.txt --format md``).
    """
    if not path:
        return
    extension = os.path.splitext(path)[1].lower()
    if not extension or path.startswith("/dev/"):
        return
    implied = suffixes.get(extension)
    if implied is None and explicit:
        return
    if implied is None or (implied != fmt and implied in formats):
        wanted = f"--format {fmt}" if explicit else f"one of {', '.join(formats)}"
        raise UsageError(
            f"{path}: the extension {extension} does not match the format written "
            f"({fmt}); name the file for {wanted}, or give --format",
            path,
        )


def neutralise_cell(value: Any) -> Any:
    """Prefix an apostrophe to text a spreadsheet would read as a formula; turn
    carriage returns into line feeds, which the CSV writer quotes."""
    if not isinstance(value, str):
        return value
    if value.startswith(_FORMULA_STARTS):
        value = "'" + value
    return value.replace("\r\n", "\n").replace("\r", "\n")


def _is_text_column(column: pd.Series) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return not (is_numeric_dtype(column.dtype) or is_bool_dtype(column.dtype))


def to_csv(frame: pd.DataFrame) -> str:
    """CSV with a header row, no index, NA as an empty cell, formulas neutralised."""
    safe = frame.copy()
    for name in safe.columns:
        column = safe[name]
        if _is_text_column(column):
            safe[name] = column.astype(object).map(neutralise_cell)
    safe.columns = [neutralise_cell(str(c)) for c in safe.columns]
    return str(safe.to_csv(index=False, lineterminator="\n"))


def records(frame: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """The rows as plain dicts (JSON-ready values), columns in frame order."""
    from traceparse.output.jsonvalues import json_records

    yield from json_records(frame)


def json_default(value: Any) -> Any:
    """``json.dumps(default=...)`` for numpy, pandas and DataFrame values."""
    from traceparse.output.jsonvalues import json_default as convert

    return convert(value)


def to_json(frame: pd.DataFrame) -> str:
    """A JSON array with one object per row; NA is ``null``; stable key order."""
    from traceparse.output.jsonvalues import dumps, json_records

    return dumps(json_records(frame)) + "\n"


def to_parquet(frame: pd.DataFrame) -> bytes:
    """Parquet bytes (pyarrow); categoricals and nullable integers keep their types."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            "--format parquet needs pyarrow: pip install 'traceparse[report]' "
            "(or choose --format csv or json)"
        ) from exc
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def write_output(data: str | bytes, path: str | None, stream: Any = None) -> None:
    """Write to ``path`` atomically, or to ``stream`` (stdout) when path is None.

    A failure to write is a ``UsageError`` that names the path.
    """
    if path is None:
        import sys

        out = stream if stream is not None else sys.stdout
        if isinstance(data, bytes):
            out.flush()
            binary = getattr(out, "buffer", None)
            if binary is None:
                raise UsageError("binary output (parquet) needs a file: add -o FILE.parquet")
            binary.write(data)
            binary.flush()
        else:
            out.write(data)
        return
    try:
        atomic_write(path, data)
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory; give a file name for -o", path) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(
            f"{path}: cannot write the output ({reason}); choose another -o", path
        ) from exc
