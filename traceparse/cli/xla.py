"""``traceparse xla``: the XLA programs stored in a capture, and their buffers."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand
from traceparse.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile


class XlaCommand(TableCommand):
    """XLA programs: every compiled program in the capture, or one program's buffers.

    Without --program: one row per program of the newest run under PATH (its
    module, instruction count, bytes per kind of buffer allocation: temp,
    output, parameter, constant, thread-local, and how many allocator events
    were linked to it). With --program NAME (the program column, or a unique
    part of it): one row per HLO buffer, with its allocation, offset, size,
    instruction, dtype, shape and the TF op it comes from. With --program NAME
    --roles: the buffers the program holds at its own peak (entry parameters,
    the temp slab's live buffers and slack), each with its role and layer:
    what a step needs where the allocator records nothing, as with JAX on
    CPU. See docs/xla.md.
    """

    name = "xla"
    noun = "XLA programs"
    default_sort = ("temp_bytes", "size_bytes")
    display_columns = (
        "program",
        "function",
        "instructions",
        "temp_bytes",
        "output_bytes",
        "parameter_bytes",
        "runs",
        "allocation_index",
        "allocation_kind",
        "offset",
        "size_bytes",
        "instruction",
        "dtype",
        "shape",
        "tf_op",
        "role",
        "layer",
    )
    name_columns = ("program", "instruction")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--program",
            metavar="NAME",
            help="list this program's buffers (a unique part of its name)",
        )
        parser.add_argument(
            "--roles",
            action="store_true",
            help="with --program: the buffers it holds at its own peak, with role and layer",
        )

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        if not args.program:
            if args.roles:
                raise UsageError("--roles needs --program NAME (the program to break down)")
            return profile.xla_programs
        names = profile.xla_programs["program"].astype(str)
        exact = names[names == args.program]
        found = exact if len(exact) else names[names.str.contains(args.program, regex=False)]
        if len(found.unique()) != 1:
            listed = ", ".join(sorted(names.unique())) or "none"
            raise UsageError(
                f"--program {args.program!r} matches {len(found.unique())} programs; "
                f"the capture's programs are: {listed}"
            )
        args.program_name = found.iloc[0]  # the title names it once, in full
        if args.roles:
            return profile.xla_program_roles(str(found.iloc[0]))
        buffers = profile.xla_buffers
        return buffers[buffers["program"].astype(str) == found.iloc[0]].reset_index(drop=True)

    def kept_columns(self, args: argparse.Namespace) -> tuple[str, ...]:
        # --roles is a breakdown: its bytes, role and layer outlast the op's long name.
        return ("size_bytes", "role", "layer") if args.roles else self.keep_columns

    def _display(self, table: pd.DataFrame, args: argparse.Namespace) -> list[str]:
        columns = super()._display(table, args)
        if args.program and "program" in columns:
            columns.remove("program")  # one program: its name is in the title, not every row
        if args.program and "instruction" in columns:
            columns.remove("instruction")  # the name of a buffer's row leads it
            columns.insert(0, "instruction")
        return columns

    def describe(self, profile: Profile, args: argparse.Namespace) -> str:
        program = getattr(args, "program_name", args.program)
        what = f"Buffers of {program}" if args.program else "XLA programs"
        if args.program and args.roles:
            what = f"Buffers {program} holds at its own peak, by role"
        return f"{what} in run {profile.run} ({profile.host})"

    def empty_message(self, profile: Profile) -> str:
        return "The capture holds no XLA programs (nothing was compiled with XLA)."
