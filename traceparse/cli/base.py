"""The base class of every subcommand, and the options they share."""

from __future__ import annotations

import argparse
import inspect
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from traceparse.output.terminal import Terminal


def add_common_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    """``--quiet``, ``--no-color``, ``--wide`` and ``--debug``, before or after the command.

    On subcommands the defaults are suppressed, so an option given before the
    command is not reset by the subcommand's parser.
    """
    default: Any = False if top_level else argparse.SUPPRESS
    group = parser.add_argument_group("output options")
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bars or hints on stderr",
        default=default,
    )
    group.add_argument(
        "--no-color",
        dest="no_color",
        action="store_true",
        help="no colours (also when NO_COLOR is set)",
        default=default,
    )
    group.add_argument(
        "--wide",
        action="store_true",
        help="on a terminal, print tables whole (every column, names uncut) instead of "
        "fitting them to its width; pipe to 'less -S' to scroll",
        default=default,
    )
    group.add_argument(
        "--debug",
        action="store_true",
        help="show the full traceback when something fails",
        default=default,
    )


class Command:
    """A subcommand: the class docstring is its help text.

    The first line of the docstring is the one-line summary shown by
    ``traceparse --help``; the rest is the description of ``traceparse NAME
    --help``. Subclasses add their arguments in :meth:`prepare_parser` and do
    their work in :meth:`run`, which returns the exit code. Errors are raised
    as ``TraceparseError`` subclasses and reported by ``cli.main``.
    Heavy modules (pandas analyses, TensorFlow, matplotlib, pyarrow) are
    imported inside :meth:`run`, so ``traceparse --help`` stays fast.
    """

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    # False for a command that runs the user's code or TensorFlow in this process:
    # it keeps the process's memory settings as they are (``cli.process``).
    reads_captures: ClassVar[bool] = True

    @classmethod
    def summary_line(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        return doc.splitlines()[0] if doc else ""

    @classmethod
    def description(cls) -> str:
        return inspect.getdoc(cls) or ""

    @classmethod
    def epilog(cls) -> str | None:
        """Text after the options in ``--help`` (examples)."""
        return None

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Add this command's arguments to ``parser``."""

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        """Do the work; return the exit code."""
        raise NotImplementedError


def count_type(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def size_type(text: str) -> int:
    """An argparse type: a size such as ``512MiB``, ``1.5GiB`` or ``2GB``."""
    from traceparse.errors import UsageError
    from traceparse.output.units import parse_bytes

    try:
        return parse_bytes(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_type(text: str) -> float:
    """An argparse type: seconds such as ``2``, ``1.5s`` or ``500ms``."""
    from traceparse.errors import UsageError
    from traceparse.output.units import parse_duration_s

    try:
        return parse_duration_s(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def percent_type(text: str) -> float:
    """An argparse type: a fraction given as ``90%`` or ``0.9``."""
    from traceparse.errors import UsageError
    from traceparse.output.units import parse_percent

    try:
        return parse_percent(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
