"""Options several subcommands take, each defined once: the capture to read, a
batch size, the capacity, one allocator, the output format and file, a port;
and what the predicting commands do first with them (load, check the batch
record, refuse an allocator it has no answer for).

``predict``, ``advise`` and ``serve`` build their parsers from these, so an
option means and checks the same in each.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from traceparse.cli.base import count_type, size_type
from traceparse.errors import UsageError

if TYPE_CHECKING:
    from traceparse.core.profile import Profile
    from traceparse.output.terminal import Terminal

CAPTURE_HELP = "log directory, run directory or capture"
PATHS_HELP = "log directory, run directory or capture file"
TO_FILE_HELP = "write to FILE (atomically) instead of stdout"


def batch_type(text: str) -> int:
    """An argparse type: a batch size, a whole number from 1 to the largest the
    capacity search tries (``analysis.predict.checked_batch``)."""
    from traceparse.analysis.predict import MAX_BATCH

    value = count_type(text)
    if not 1 <= value <= MAX_BATCH:
        shown = f"{value:,}" if value < 10**30 else f"a {len(str(value))}-digit number"
        raise argparse.ArgumentTypeError(f"a batch size is from 1 to {MAX_BATCH:,}, not {shown}")
    return value


def port_type(text: str) -> int:
    """An argparse type: a TCP port, 0 (a free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def add_capture(
    parser: argparse.ArgumentParser,
    name: str = "path",
    metavar: str = "PATH",
    help: str = CAPTURE_HELP,
) -> None:
    """The positional capture (or log directory) the command reads."""
    parser.add_argument(name, metavar=metavar, help=help)


def add_captures(parser: argparse.ArgumentParser) -> None:
    """The positional captures (one or more) the command reads, as ``paths``."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help=PATHS_HELP)


def add_batch(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """A batch size option (``batch_type``), ``N``."""
    parser.add_argument(flag, type=batch_type, metavar="N", help=help)


def add_capacity(parser: argparse.ArgumentParser, help: str) -> None:
    """``--capacity SIZE``: the memory to fit in (``size_type``)."""
    parser.add_argument("--capacity", type=size_type, metavar="SIZE", help=help)


def add_allocator(parser: argparse.ArgumentParser) -> None:
    """``--allocator NAME``: only that allocator (``no_allocator`` refuses one)."""
    parser.add_argument("--allocator", metavar="NAME", help="only this allocator")


def add_format(parser: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    """``--format``, ``table`` by default."""
    parser.add_argument("--format", choices=list(choices), default="table", help="output format")


def add_output(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    metavar: str = "FILE",
    help: str = TO_FILE_HELP,
) -> None:
    """``-o/--output``: where the command writes its file."""
    parser.add_argument("-o", "--output", metavar=metavar, help=help)


def load_to_predict(path: str, term: Terminal, batch_given: bool) -> Profile:
    """The newest run under ``path``; without a batch given, a batch record beside
    it that was refused is said on stderr (the prediction falls back to the shapes)."""
    from traceparse.cli._loading import load_newest, warn_refused_batch

    profile = load_newest(path, term)
    if not batch_given:
        warn_refused_batch(profile, term)
    return profile


def no_allocator(profile: Profile, name: str | None) -> UsageError:
    """The refusal of ``--allocator name`` when the command has no answer for it."""
    return UsageError(
        f"{profile.path}: no allocator named {name!r} "
        f"(there are: {', '.join(profile.allocators) or 'none'})"
    )
