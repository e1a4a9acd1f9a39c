"""The subcommands of ``traceparse``, one module each.

To add a subcommand: write ``traceparse/cli/NAME.py`` with a
:class:`~traceparse.cli.base.Command` subclass (its docstring is the help
text; ``prepare_parser`` adds arguments; ``run`` does the work and returns the
exit code), then add the class to ``COMMANDS`` below. Command modules import
only argparse-level code at the top; heavy imports go inside ``run``.
"""

from __future__ import annotations

from traceparse.cli.advise import AdviseCommand
from traceparse.cli.allocations import AllocationsCommand
from traceparse.cli.base import Command
from traceparse.cli.baseline import BaselineCommand
from traceparse.cli.batch import BatchCommand
from traceparse.cli.breakdown import BreakdownCommand
from traceparse.cli.check import CheckCommand
from traceparse.cli.demo import DemoCommand
from traceparse.cli.diff import DiffCommand
from traceparse.cli.layers import LayersCommand
from traceparse.cli.lines import LinesCommand
from traceparse.cli.oom import OomCommand
from traceparse.cli.ops import OpsCommand
from traceparse.cli.peak import PeakCommand
from traceparse.cli.predict import PredictCommand
from traceparse.cli.report import ReportCommand
from traceparse.cli.run import RunCommand
from traceparse.cli.scopes import ScopesCommand
from traceparse.cli.serve import ServeCommand
from traceparse.cli.steps import StepsCommand
from traceparse.cli.summary import SummaryCommand
from traceparse.cli.xla import XlaCommand

__all__ = ["COMMANDS", "Command"]

# In the order `traceparse --help` lists them: the main tasks first.
COMMANDS: dict[str, type[Command]] = {
    command.name: command
    for command in (
        RunCommand,
        SummaryCommand,
        ReportCommand,
        BatchCommand,
        ServeCommand,
        CheckCommand,
        BaselineCommand,
        DiffCommand,
        PredictCommand,
        AdviseCommand,
        PeakCommand,
        BreakdownCommand,
        OomCommand,
        AllocationsCommand,
        OpsCommand,
        ScopesCommand,
        LayersCommand,
        LinesCommand,
        StepsCommand,
        XlaCommand,
        DemoCommand,
    )
}
