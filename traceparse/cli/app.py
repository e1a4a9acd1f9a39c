"""The ``traceparse`` command: one subcommand per user task.

Each subcommand is a class in ``traceparse/cli/`` (registered in
``traceparse/cli/commands.py``). This module builds the parser from the
registry and reports every failure in one place: a ``TraceparseError`` becomes
one line on stderr and its exit code; anything else is an internal error (exit
1). ``--debug`` adds the traceback.

Importing this module is cheap: pandas analyses, TensorFlow, matplotlib and
pyarrow are imported by the command that needs them.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from traceparse.cli.base import Command, add_common_options
from traceparse.cli.commands import COMMANDS
from traceparse.errors import (
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    TraceparseError,
)

__all__ = ["EXIT_CODES_HELP", "build_parser", "main"]

PROG = "traceparse"

EXIT_CODES_HELP = """\
exit codes:
  0  success
  1  internal error (a bug: please report it with the output of --debug)
  2  usage error (unknown option, bad value, unwritable output file)
  3  input problem (capture missing, unreadable or corrupt)
  4  a memory budget was breached (traceparse check)
  5  the capture ended in out-of-memory (traceparse check, whatever the budgets)"""

DESCRIPTION = """\
Which tensors hold your TensorFlow memory: reads profiler captures
(*.xplane.pb) without TensorFlow and attributes every allocation to its op,
shape, dtype, name scope and step.

PATH is a log directory, a run directory (.../plugins/profile/<run>) or a
capture file."""


class ParserError(Exception):
    """A command line argparse rejected (exit code 2)."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise ParserError(message, self.prog)


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=30)


def build_parser() -> argparse.ArgumentParser:
    """The parser for every subcommand in the registry."""
    from traceparse import __version__

    parser = _Parser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP + f"\n\nRun '{PROG} COMMAND --help' for a command's options.",
        formatter_class=_formatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    add_common_options(parser, top_level=True)
    subparsers = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", parser_class=_Parser
    )
    for name, command_class in COMMANDS.items():
        command = command_class()
        epilog = command_class.epilog()
        sub = subparsers.add_parser(
            name,
            aliases=list(command_class.aliases),
            help=command_class.summary_line(),
            description=command_class.description(),
            epilog=(epilog + "\n\n" if epilog else "") + EXIT_CODES_HELP,
            formatter_class=_formatter,
        )
        command.prepare_parser(sub)
        add_common_options(sub, top_level=False)
        sub.set_defaults(command_object=command)
    return parser


def _protect_streams() -> None:
    # Never die on a character the terminal's encoding cannot show (µs, …).
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def _one_line(text: str) -> str:
    # Paths and names in messages come from users and captures: shown, not obeyed.
    from traceparse.output.cells import visible

    return visible(" ".join(str(text).split()))


def _error(message: str) -> None:
    print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (the console script exits with it)."""
    _protect_streams()
    arguments = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in arguments  # until the parser has read the command line
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(arguments)
        debug = bool(getattr(args, "debug", False))
        command: Command | None = getattr(args, "command_object", None)
        if extra:  # the command's help lists what it takes, not the top level's
            prog = f"{PROG} {command.name}" if command is not None else PROG
            raise ParserError(f"unrecognized arguments: {' '.join(extra)}", prog)
        if command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        # An unsupported protobuf, numpy or pandas would fail inside their code
        # and read as a bug of ours: say which one, before it is used.
        from traceparse.version import check_installed

        check_installed()
        if command.reads_captures:
            from traceparse.cli.process import settle_for_captures

            settle_for_captures()
        from traceparse.output.terminal import Terminal

        term = Terminal(
            quiet=bool(args.quiet), color=not args.no_color, wide=bool(getattr(args, "wide", False))
        )
        code = command.run(args, term)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
        return code
    except ParserError as exc:
        print(
            f"{exc.prog}: error: {_one_line(str(exc))} (see '{exc.prog} --help')",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except TraceparseError as exc:
        if debug:
            traceback.print_exc()
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`traceparse ops x | head`): not an error of ours.
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:
        if exc.errno not in _WRITE_ERRNOS:
            return _internal(exc, debug)
        # Writing the results failed (stdout on a full disk, /dev/full, an I/O
        # error): the environment's doing, said in one line.
        if debug:
            traceback.print_exc()
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}cannot write the output ({exc.strerror or exc})")
        _silence_stdout()
        return EXIT_USAGE
    except MemoryError:
        if debug:
            traceback.print_exc()
        _error("ran out of memory; read fewer captures at once, or use a larger machine")
        return EXIT_INPUT
    except Exception as exc:
        return _internal(exc, debug)


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def _internal(exc: Exception, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    _error(
        f"internal error: {type(exc).__name__}: {exc} "
        f"(rerun with --debug for the traceback, and please report it)"
    )
    return EXIT_INTERNAL


def _silence_stdout() -> None:
    # Python would otherwise complain again when it flushes stdout at exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def run() -> NoReturn:
    """Entry point for ``python -m traceparse``."""
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
