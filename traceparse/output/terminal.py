"""Terminal output: tables, headings and progress, with rich or as plain text.

One ``Terminal`` per command. On a terminal, with rich installed (the
``traceparse[report]`` extra), tables are rich tables that fit the width and
progress shows as a bar; otherwise (a pipe, a file, no rich) the output is
plain aligned text that does not depend on the terminal, so scripts and golden
files can rely on it. Cells are formatted in human units by ``cells``.

rich is imported only when something is rendered with it, so importing this
module stays cheap.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from traceparse.output.cells import (
    MAX_NOTE_WIDTH,
    NUMERIC_KINDS,
    Kind,
    column_kind,
    formatted_rows,
    note_line,
    render_plain_table,
    shorten,
    visible,
)
from traceparse.output.fit import fit_columns, render_fitted

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Progress", "Terminal"]

# A progress display appears only for work that lasts longer than this.
PROGRESS_DELAY_S = 1.0


def rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@dataclass
class Terminal:
    """Where a command's output goes, and how it looks.

    ``stream`` gets the results (stdout for most commands); notes, warnings and
    progress go to ``err``. ``quiet`` drops notes and progress, never results
    or errors.
    """

    stream: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    quiet: bool = False
    color: bool = True
    use_rich: bool | None = None
    width: int | None = None
    #: Never fit tables to the width: every column, names whole (``--wide``).
    wide: bool = False
    _console: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if os.environ.get("NO_COLOR"):
            self.color = False
        if self.use_rich is None:
            self.use_rich = _isatty(self.stream) and rich_available()

    @property
    def interactive(self) -> bool:
        """True when results go to a terminal (so their layout may follow its width)."""
        return _isatty(self.stream)

    def for_stream(self, stream: TextIO) -> Terminal:
        """The same settings, writing results to ``stream`` instead."""
        return Terminal(
            stream=stream, err=self.err, quiet=self.quiet, color=self.color, wide=self.wide
        )

    # -- rich plumbing -------------------------------------------------------

    def _rich(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                file=self.stream,
                no_color=not self.color,
                color_system="auto" if self.color else None,
                highlight=False,
                emoji=False,
                width=self.width,
            )
        return self._console

    def _fit_width(self) -> int | None:
        """The width tables are fitted to: a terminal's (or the one given), else none."""
        if self.wide:
            return None
        if self.width is not None:
            return self.width
        if not self.interactive:
            return None
        if self.use_rich:
            return int(self._rich().width)
        return shutil.get_terminal_size((100, 24)).columns

    def _write(self, text: str) -> None:
        self.stream.write(visible(text) + "\n")

    # -- results -------------------------------------------------------------

    def line(self, text: str = "", style: str | None = None) -> None:
        """One line of text (``style`` is a rich style, ignored in plain output)."""
        if self.use_rich:
            from rich.text import Text

            # Words wrap at the terminal's width (a diff's headline is one long sentence).
            self._rich().print(Text(visible(text), style=style or ""), soft_wrap=self.wide)
        else:
            self._write(text)

    def heading(self, text: str, level: int = 1) -> None:
        """A section title: level 1 for a capture, level 2 for a part of it."""
        text = visible(text, cell=True)
        if self.use_rich:
            if level == 1:
                from rich.rule import Rule

                self._rich().print(Rule(f"[bold]{_escape(text)}[/]", align="left", style="cyan"))
            else:
                self._rich().print(f"[bold cyan]{_escape(text)}[/]")
            return
        self._write(text)
        self._write(("=" if level == 1 else "-") * len(visible(text)))

    def fields(
        self, rows: Sequence[tuple[str, str]], styles: Mapping[str, str] | None = None
    ) -> None:
        """Label/value lines, aligned."""
        if not rows:
            return
        if self.use_rich:
            from rich.table import Table
            from rich.text import Text

            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold", no_wrap=True)
            grid.add_column(overflow="fold")
            for label, value in rows:
                grid.add_row(
                    Text(visible(label, cell=True)),
                    Text(visible(value, cell=True), style=(styles or {}).get(label, "")),
                )
            self._rich().print(grid)
            return
        pad = max(len(label) for label, _ in rows)
        for label, value in rows:
            self._write(f"{label.ljust(pad)}  {visible(value, cell=True)}".rstrip())

    def bullets(self, items: Sequence[str], style: str | None = None) -> None:
        for item in items:
            if self.use_rich:
                from rich.text import Text

                self._rich().print(Text("• " + note_line(item), style=style or ""))
            else:
                self._write(f"- {note_line(item)}")

    def table(
        self,
        frame: pd.DataFrame,
        *,
        title: str | None = None,
        footer: str | None = None,
        kinds: Mapping[str, Kind] | None = None,
        headers: Mapping[str, str] | None = None,
        key: str | None = None,
        hidden_hint: str = "--wide shows them all",
        keep: Sequence[str] = (),
    ) -> None:
        """A DataFrame as a table, cells in human units; ``key`` is its name column.

        When it must drop columns to fit, the declared ones go by their priority
        (``tables.columns.Column``), and a dropped part of a column still shown
        (``Column.part_of``) is said: the parts left no longer add up. ``keep``
        names the columns this table is for, kept longest after the name, the
        first longest (the declared priorities are the same in every table)."""
        from traceparse.tables.columns import COLUMNS, PLAIN

        kinds = {**{c: column_kind(str(c), frame[c].dtype) for c in frame.columns}, **(kinds or {})}
        names = [str(c) for c in frame.columns]
        shown = [(headers or {}).get(n, n) for n in names]
        declared = [COLUMNS.get(n) for n in names]
        whole = {n: (headers or {}).get(n, n) for n in names}
        self.text_table(
            shown,
            formatted_rows(frame, kinds),
            right=[kinds[c] in NUMERIC_KINDS for c in frame.columns],
            title=title,
            footer=footer,
            key=None if key is None else (headers or {}).get(key, key),
            hidden_hint=hidden_hint,
            priority=_priorities(
                names, [PLAIN if c is None else c.priority for c in declared], keep
            ),
            part_of=[
                whole.get(c.part_of) if c is not None and c.part_of else None for c in declared
            ],
        )

    def text_table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        right: Sequence[bool],
        title: str | None = None,
        footer: str | None = None,
        key: str | None = None,
        hidden_hint: str = "--wide shows them all",
        priority: Sequence[int] | None = None,
        part_of: Sequence[str | None] | None = None,
    ) -> None:
        """A table of already formatted cells; ``right`` aligns numeric columns;
        ``priority`` orders the columns to drop, ``part_of`` names for each column
        the column it is a part of (None: none).

        On a terminal the table fits its width (see ``output.fit``): ``key`` names
        the column that is always shown (default: the first text column), and
        the columns dropped to fit are named in one line with ``hidden_hint``.
        """
        width = self._fit_width()
        partial: dict[str, list[str]] = {}  # a total shown -> its parts not shown
        if width is None:
            lines = render_plain_table(headers, rows, right)
            head, body, hidden = lines[:1], lines[1:], []
        else:
            key_index = list(headers).index(key) if key is not None and key in headers else None
            layout = fit_columns(headers, rows, right, width, key_index, priority)
            head, body = render_fitted(headers, rows, right, layout)
            hidden = [visible(headers[i], cell=True) for i in layout.hidden]
            shown_headers = {headers[i] for i in layout.shown}
            for i in layout.hidden:
                total = part_of[i] if part_of is not None else None
                if total is not None and total in shown_headers:
                    partial.setdefault(total, []).append(visible(headers[i], cell=True))
        notes = _wrapped(footer, width)
        if hidden and width is not None:
            which = ", ".join(hidden)
            notes += textwrap.wrap(
                f"Not shown at {width} columns: {which} ({hidden_hint}).",
                width=width,
                break_on_hyphens=False,
            )
            for total, parts in sorted(partial.items()):
                notes += textwrap.wrap(
                    f"The parts shown do not add up to {visible(total, cell=True)}: "
                    f"{', '.join(parts)} not shown.",
                    width=width,
                    break_on_hyphens=False,
                )
        if self.use_rich:
            from rich.text import Text

            console = self._rich()
            for text in _wrapped(title, width):
                console.print(Text(visible(text), style="bold"), soft_wrap=True)
            for text in head:
                console.print(Text(visible(text), style="bold"), soft_wrap=True)
            for text in [*body, *notes]:
                console.print(Text(visible(text)), soft_wrap=True)
            return
        for text in [*_wrapped(title, width), *head, *body, *notes]:
            self._write(text)

    def raw(self, data: str) -> None:
        """Text exactly as given (CSV, JSON, a report) with no styling."""
        self.stream.write(data)
        if data and not data.endswith("\n"):
            self.stream.write("\n")

    # -- messages on stderr --------------------------------------------------

    def note(self, text: str) -> None:
        """A hint on stderr; dropped by ``--quiet``."""
        if not self.quiet:
            print(shorten(visible(text), MAX_NOTE_WIDTH), file=self.err)

    def warn(self, text: str) -> None:
        """A warning on stderr, shown even with ``--quiet``; one line whatever names it holds."""
        print(f"traceparse: warning: {note_line(' '.join(text.split()))}", file=self.err)

    # -- progress ------------------------------------------------------------

    @contextmanager
    def progress(self, description: str, total: int | None = None) -> Iterator[Progress]:
        """A progress display on stderr for work that lasts more than a second.

        Nothing is shown with ``--quiet``, when stderr is not a terminal, or when
        the work ends within :data:`PROGRESS_DELAY_S`.
        """
        enabled = not self.quiet and _isatty(self.err)
        bar = Progress(description, total, self.err, enabled=enabled, color=self.color)
        bar.begin()
        try:
            yield bar
        finally:
            bar.end()


class Progress:
    """Counts work done; draws itself (rich bar or a plain line) after a delay."""

    def __init__(
        self,
        description: str,
        total: int | None,
        stream: TextIO,
        *,
        enabled: bool = True,
        color: bool = True,
        delay_s: float = PROGRESS_DELAY_S,
    ) -> None:
        self.description = visible(description)
        self.total = total
        self.completed = 0
        self._stream = stream
        self._enabled = enabled
        self._color = color
        self._delay_s = delay_s
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._shown = False
        self._finished = False
        self._rich: Any = None
        self._task: Any = None

    def begin(self) -> None:
        if not self._enabled:
            return
        self._timer = threading.Timer(self._delay_s, self._show)
        self._timer.daemon = True
        self._timer.start()

    def advance(self, amount: int = 1) -> None:
        """Mark ``amount`` more units of work as done."""
        with self._lock:
            self.completed += amount
            self._redraw()

    def update(self, description: str | None = None, total: int | None = None) -> None:
        """Change what the bar says (and its total)."""
        with self._lock:
            if description is not None:
                self.description = visible(description)
            if total is not None:
                self.total = total
            self._redraw()

    def _show(self) -> None:
        with self._lock:
            if self._finished or self._shown:
                return
            self._shown = True
            if rich_available():
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    SpinnerColumn,
                    TextColumn,
                    TimeElapsedColumn,
                )
                from rich.progress import Progress as RichProgress

                console = Console(file=self._stream, no_color=not self._color)
                columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
                if self.total is not None:  # a bar only when there is a total to fill
                    columns += [BarColumn(), MofNCompleteColumn()]
                columns.append(TimeElapsedColumn())
                self._rich = RichProgress(*columns, console=console, transient=True)
                self._task = self._rich.add_task(
                    _escape(self.description), total=self.total, completed=self.completed
                )
                self._rich.start()
            else:
                self._redraw()

    def _redraw(self) -> None:
        if not self._shown or self._finished:
            return
        if self._rich is not None:
            self._rich.update(
                self._task,
                description=_escape(self.description),
                total=self.total,
                completed=self.completed,
            )
            return
        count = f" {self.completed}/{self.total}" if self.total else ""
        self._stream.write(f"\r\x1b[K{self.description}…{count}")
        self._stream.flush()

    def end(self) -> None:
        timer = self._timer
        if timer is not None:
            timer.cancel()
        with self._lock:
            self._finished = True
            if not self._shown:
                return
            if self._rich is not None:
                self._rich.stop()
            else:
                self._stream.write("\r\x1b[K")
                self._stream.flush()


def _priorities(names: Sequence[str], declared: Sequence[int], keep: Sequence[str]) -> list[int]:
    """Each column's priority: the declared one, or above every declared one for the
    columns in ``keep`` (the first highest)."""
    from traceparse.tables.columns import NAME

    ranks = {name: NAME + len(keep) - i for i, name in enumerate(keep)}
    return [ranks.get(name, rank) for name, rank in zip(names, declared, strict=True)]


def _wrapped(text: str | None, width: int | None) -> list[str]:
    """``text`` on lines of ``width`` (its own lines without a width; none without text)."""
    if not text:
        return []
    out: list[str] = []
    for line in text.split("\n"):
        if width is None or len(line) <= width:
            out.append(line)
        else:
            out += textwrap.wrap(line, width=width, break_on_hyphens=False) or [line]
    return out


def _escape(text: str) -> str:
    return text.replace("[", r"\[")
