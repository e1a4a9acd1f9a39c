"""The subcommands of ``traceparse``, one module each.

To add a subcommand: write ``traceparse/commands/NAME.py`` with a
:class:`~traceparse.commands.base.Command` subclass (its docstring is the help
text; ``prepare_parser`` adds arguments; ``run`` does the work and returns the
exit code), then add the class to ``COMMANDS`` below. Command modules import
only argparse-level code at the top; heavy imports go inside ``run``.
"""

from __future__ import annotations

from traceparse.commands.allocations import AllocationsCommand
from traceparse.commands.base import Command
from traceparse.commands.baseline import BaselineCommand
from traceparse.commands.batch import BatchCommand
from traceparse.commands.check import CheckCommand
from traceparse.commands.demo import DemoCommand
from traceparse.commands.diff import DiffCommand
from traceparse.commands.ops import OpsCommand
from traceparse.commands.peak import PeakCommand
from traceparse.commands.report import ReportCommand
from traceparse.commands.run import RunCommand
from traceparse.commands.scopes import ScopesCommand
from traceparse.commands.steps import StepsCommand
from traceparse.commands.summary import SummaryCommand

__all__ = ["COMMANDS", "Command"]

# In the order `traceparse --help` lists them: the main tasks first.
COMMANDS: dict[str, type[Command]] = {
    command.name: command
    for command in (
        RunCommand,
        SummaryCommand,
        ReportCommand,
        BatchCommand,
        CheckCommand,
        BaselineCommand,
        DiffCommand,
        PeakCommand,
        AllocationsCommand,
        OpsCommand,
        ScopesCommand,
        StepsCommand,
        DemoCommand,
    )
}
