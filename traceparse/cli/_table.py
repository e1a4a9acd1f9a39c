"""The shared shape of the table commands (allocations, ops, scopes, steps, peak).

Each reads the newest run under PATH, builds one DataFrame, then filters
(``--allocator``, ``--host``), sorts (``--sort``, ``--reverse``), cuts
(``--top``), picks columns (``--columns``) and writes it as a terminal table
or as CSV, JSON or Parquet (``--format``, ``-o``).
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from traceparse.cli._options import PATHS_HELP, add_capture, add_output
from traceparse.cli.base import Command, count_type
from traceparse.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile
    from traceparse.output.terminal import Terminal

TABLE_FORMATS = ("table", "csv", "json", "parquet")
# Rows a terminal table shows unless --top says otherwise; exports get every row.
DEFAULT_TABLE_ROWS = 20


class TableCommand(Command):
    """Base class: subclasses set the class attributes and implement :meth:`frame`."""

    #: What the rows are, for the title ("Allocations", "Ops", ...).
    noun: ClassVar[str] = "Rows"
    #: Candidate sort columns, first present wins.
    default_sort: ClassVar[tuple[str, ...]] = ()
    #: Columns the terminal table shows by default, those present, in this order.
    display_columns: ClassVar[tuple[str, ...]] = ()
    #: Candidate name columns, first present wins: a terminal always shows it.
    name_columns: ClassVar[tuple[str, ...]] = ("layer", "op", "scope", "program")
    #: The columns a terminal keeps longest after the name, the first longest:
    #: what the table is for (default: the columns' declared priorities).
    keep_columns: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            f"  traceparse {cls.name} logs/\n"
            f"  traceparse {cls.name} logs/ --top 5 --sort {(cls.default_sort or ('step',))[0]}\n"
            f"  traceparse {cls.name} logs/ --format csv -o {cls.name}.csv"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_capture(parser, help=PATHS_HELP)
        self.add_arguments(parser)
        group = parser.add_argument_group("table options")
        group.add_argument(
            "--sort",
            metavar="COLUMN",
            help="sort by COLUMN: sizes, counts and durations largest first, the rest in "
            "ascending order (a table shows times in words under the column's name without "
            "_ps: --sort start means start_ps)",
        )
        group.add_argument("--reverse", action="store_true", help="reverse the sort order")
        group.add_argument(
            "--top",
            type=count_type,
            metavar="N",
            help=f"keep the first N rows (default {DEFAULT_TABLE_ROWS} for a table, all for "
            "csv/json/parquet; 0 keeps all)",
        )
        group.add_argument("--allocator", metavar="NAME", help="only this allocator's rows")
        group.add_argument("--host", metavar="NAME", help="only this host's rows")
        group.add_argument(
            "--columns",
            metavar="A,B,...",
            help="the columns to show, in order (default: a readable subset for a table, "
            "every column for exports)",
        )
        group.add_argument(
            "--format",
            choices=TABLE_FORMATS,
            help="table (default), csv, json or parquet; -o FILE.csv/.json/.parquet implies it",
        )
        add_output(group)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Arguments of this command besides the shared table options."""

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        """The full table for ``profile``."""
        raise NotImplementedError

    def describe(self, profile: Profile, args: argparse.Namespace) -> str:
        """The title of the terminal table."""
        return f"{self.noun} in run {profile.run} ({profile.host})"

    def empty_message(self, profile: Profile) -> str:
        if profile.allocations.empty:
            return f"No {self.noun.lower()}: the capture has no memory events."
        return f"No {self.noun.lower()} match."

    def before_table(self, profile: Profile, args: argparse.Namespace, term: Terminal) -> None:
        """Print anything that belongs above the terminal table."""

    def table_headers(self, table: pd.DataFrame, args: argparse.Namespace) -> dict[str, str]:
        """Terminal headers of this command's own columns (column name -> header)."""
        return {}

    def kept_columns(self, args: argparse.Namespace) -> tuple[str, ...]:
        """The columns a narrow terminal keeps longest (``keep_columns``), for a
        command whose options change what the table is for."""
        return self.keep_columns

    def table_notes(self, table: pd.DataFrame, args: argparse.Namespace) -> list[str]:
        """Lines under the terminal table that say what its columns mean."""
        return []

    # -- the pipeline --------------------------------------------------------

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.cli._loading import load_newest
        from traceparse.output.export import check_extension, format_from_path
        from traceparse.report.formats import FILE_SUFFIXES

        fmt = args.format or format_from_path(args.output, FILE_SUFFIXES) or "table"
        if fmt not in TABLE_FORMATS:
            fmt = "table"  # -o report.md: a plain text table
        formats = (*TABLE_FORMATS, "html")
        check_extension(args.output, fmt, args.format is not None, formats, FILE_SUFFIXES)
        if fmt == "parquet" and args.output is None and term.interactive:
            raise UsageError("parquet is binary: add -o FILE.parquet (or redirect stdout)")
        profile = load_newest(args.path, term)
        with term.progress(f"Building the {self.noun.lower()} table"):
            table = self.frame(profile, args)
        table = filter_rows(table, "allocator", args.allocator)
        table = filter_rows(table, "host", args.host)
        total = len(table)
        table = sort_rows(
            table, args.sort or _first_present(table, self.default_sort), args.reverse
        )
        top = args.top if args.top is not None else (DEFAULT_TABLE_ROWS if fmt == "table" else 0)
        if top:
            table = table.head(top)
        if args.columns:
            table = table[pick_columns(table, args.columns)]
        elif fmt == "table":
            table = table[self._display(table, args)]
        if fmt == "table":
            self._print_table(profile, args, term, table, total)
        else:
            self._export(table, fmt, args.output, term)
        if total == 0:
            for note in profile.diagnostics():
                term.note(note)
        return 0

    def _display(self, table: pd.DataFrame, args: argparse.Namespace) -> list[str]:
        from traceparse.tables.columns import COLUMNS

        present = [c for c in self.display_columns if c in table.columns]
        # Without a choice of the command's: the columns shown by default (bookkeeping,
        # such as event numbers, means nothing to a reader; exports keep it).
        columns = (
            present
            if len(present) >= 2
            else [c for c in table.columns if c not in COLUMNS or COLUMNS[c].shown]
        )
        # One host or one allocator: a column repeating it adds nothing.
        for single in ("host", "allocator"):
            if single in columns and table[single].nunique(dropna=True) <= 1:
                columns.remove(single)
        for lead in ("allocator", "host"):
            if lead in table.columns and lead not in columns and table[lead].nunique() > 1:
                columns.insert(0, lead)
        return columns

    def _print_table(
        self,
        profile: Profile,
        args: argparse.Namespace,
        term: Terminal,
        table: pd.DataFrame,
        total: int,
    ) -> None:
        from traceparse.output.export import write_output
        from traceparse.output.terminal import Terminal

        out = term
        buffer: io.StringIO | None = None
        if args.output:
            buffer = io.StringIO()
            out = Terminal(
                stream=buffer, err=term.err, quiet=term.quiet, color=False, wide=term.wide
            )
        if total == 0:
            out.line(self.empty_message(profile))
        else:
            self.before_table(profile, args, out)
            hidden = total - len(table)
            footers = self.table_notes(table, args)
            if hidden > 0:
                rows = "row" if hidden == 1 else "rows"
                footers.append(
                    f"… {hidden} more {rows} (--top 0 shows all, --format csv exports them)"
                )
            out.table(
                table,
                title=self.describe(profile, args),
                footer="\n".join(footers) or None,
                headers={
                    **word_headers(table.columns),
                    **_step_header(profile, table),
                    **self.table_headers(table, args),
                },
                key=_first_present(table, self.name_columns),
                hidden_hint="--columns A,B,... picks the columns, --wide shows them all",
                keep=self.kept_columns(args),
            )
        if buffer is not None:
            write_output(buffer.getvalue(), args.output)
            term.note(f"Wrote {args.output}")

    def _export(self, table: pd.DataFrame, fmt: str, path: str | None, term: Terminal) -> None:
        from traceparse.output.export import to_csv, to_json, to_parquet, write_output

        data: str | bytes
        if fmt == "csv":
            data = to_csv(table)
        elif fmt == "json":
            data = to_json(table)
        else:
            data = to_parquet(table)
        write_output(data, path, term.stream)
        if path:
            term.note(f"Wrote {len(table)} rows to {path}")


def word_headers(columns: Sequence[object]) -> dict[str, str]:
    """Terminal headers of the picosecond columns, which a table shows in words.

    ``start_ps`` holding "52.7 µs" would read as a number of picoseconds; its
    header is ``start`` (``--sort`` and ``--columns`` take either name).
    """
    return {str(c): str(c).removesuffix("_ps") for c in columns if str(c).endswith("_ps")}


def _step_header(profile: Profile, table: pd.DataFrame) -> dict[str, str]:
    """Without step markers the step column holds executions: its header says so."""
    from traceparse.records import StepUnit, step_unit

    if "step" not in table.columns or profile.step_markers.shape[0]:
        return {}
    return {"step": "execution"} if step_unit(profile.steps) is StepUnit.EXECUTION else {}


def column_named(table: pd.DataFrame, name: str) -> str:
    """``name``, or the picosecond column a terminal header ``name`` stands for."""
    if name not in table.columns and f"{name}_ps" in table.columns:
        return f"{name}_ps"
    return name


def _first_present(table: pd.DataFrame, candidates: Sequence[str]) -> str | None:
    return next((c for c in candidates if c in table.columns), None)


def filter_rows(table: pd.DataFrame, column: str, wanted: str | None) -> pd.DataFrame:
    """Rows whose ``column`` equals ``wanted``; a value that never occurs is a usage error."""
    if wanted is None or column not in table.columns:
        return table
    values = table[column].astype(object)
    mask = values == wanted
    if not mask.any() and len(table):
        known = sorted({str(v) for v in values.dropna().unique()})
        raise UsageError(
            f"no {column} named {wanted!r} in this capture; it has: {', '.join(known) or 'none'}"
        )
    return table[mask.to_numpy(dtype=bool)]


def sort_rows(table: pd.DataFrame, column: str | None, reverse: bool = False) -> pd.DataFrame:
    """Sort by ``column``: quantities largest first, the rest ascending; NA last."""
    from traceparse.output.cells import DESCENDING_KINDS, column_kind

    if column is None:
        return table.iloc[::-1] if reverse else table
    column = column_named(table, column)
    if column not in table.columns:
        raise UsageError(
            f"cannot sort by {column!r}: no such column; choose one of "
            f"{', '.join(map(str, table.columns))}"
        )
    descending = column_kind(column, table[column].dtype) in DESCENDING_KINDS
    if reverse:
        descending = not descending
    key = table[column].reset_index(drop=True)
    if str(key.dtype) == "category":
        key = key.astype(object)
    positions = key.sort_values(ascending=not descending, kind="stable", na_position="last").index
    return table.iloc[positions.to_numpy()]


def pick_columns(table: pd.DataFrame, spec: str) -> list[str]:
    """The columns named in ``A,B,C``; an unknown name is a usage error listing the choices."""
    wanted = [column_named(table, c.strip()) for c in spec.split(",") if c.strip()]
    repeated = sorted({c for c in wanted if wanted.count(c) > 1})
    if repeated:
        raise UsageError(f"--columns names {', '.join(repeated)} more than once; name each once")
    unknown = [c for c in wanted if c not in table.columns]
    if unknown or not wanted:
        raise UsageError(
            f"unknown column(s) {', '.join(unknown) or '(none given)'} for --columns; "
            f"choose from {', '.join(map(str, table.columns))}"
        )
    return wanted
