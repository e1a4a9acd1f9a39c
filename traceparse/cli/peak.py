"""``traceparse peak``: what is live at each allocator's peak."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli._table import TableCommand
from traceparse.output.cells import ALLOCATION_COLUMNS, UNOWNED_ROWS

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.core.profile import Profile
    from traceparse.output.terminal import Terminal


class PeakCommand(TableCommand):
    """What holds the memory at the peak: every allocation live at that instant.

    For each allocator in the newest run under PATH, finds the moment with the
    most bytes in use and lists the allocations live then, largest first;
    memory allocated before the capture started, and memory the allocator
    reserved, show as their own rows, so the rows add up to the allocator's
    own counter (bytes in use at the peak). --per-allocator prints the
    peaks themselves instead: time, step, bytes in use, heap, reserved,
    available, capacity and fragmentation.

    When the peak is reached at several instants (within 1% of it, say once
    per step), the peak is the latest at the maximum, as xprof takes it;
    --at first, --at last or --at step N lists another of them.
    """

    name = "peak"
    noun = "Allocations live at the peak"
    default_sort = ("allocated_bytes", "in_use_bytes", "bytes")
    display_columns = tuple(c for c in ALLOCATION_COLUMNS if c != "lifetime_ps")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--per-allocator",
            action="store_true",
            help="one row per allocator: its peak, instead of the allocations live at it",
        )
        add_at_argument(parser)

    def frame(self, profile: Profile, args: argparse.Namespace) -> pd.DataFrame:
        at = parse_at(args.at)
        if args.per_allocator:
            return profile.peak if at is None else profile.at_instant(at)[0]
        from traceparse.analysis.attribution import attribution_table
        from traceparse.analysis.peak import live_at_peak_table, select

        if at is None:
            live = profile.live_at_peak(allocator=args.allocator, host=args.host)
            parts = select(profile.attribution, args.allocator, args.host, profile.timeline)
            return with_unowned_rows(live, parts)
        peak, rows = profile.at_instant(at)
        live = select(
            live_at_peak_table(profile.allocations, peak),
            args.allocator,
            args.host,
            profile.timeline,
        )
        measured = tuple(
            c for c in ("variable_bytes", "xla_parameter_bytes") if c in rows["part"].values
        )
        parts = select(
            attribution_table(peak, rows, measured), args.allocator, args.host, profile.timeline
        )
        return with_unowned_rows(live, parts)

    def describe(self, profile: Profile, args: argparse.Namespace) -> str:
        if args.per_allocator:
            return f"Peaks in run {profile.run} ({profile.host})"
        return f"Allocations live at the peak in run {profile.run} ({profile.host})"

    def _display(self, table: pd.DataFrame, args: argparse.Namespace) -> list[str]:
        if "in_use_bytes" in table.columns:  # --per-allocator
            single_host = "host" in table.columns and table["host"].nunique() <= 1
            return [c for c in table.columns if c != "event" and not (single_host and c == "host")]
        return super()._display(table, args)

    def before_table(self, profile: Profile, args: argparse.Namespace, term: Terminal) -> None:
        if args.per_allocator:
            return
        from traceparse.output.units import format_bytes, format_duration_ps, is_missing
        from traceparse.report.view import step_word

        at = parse_at(args.at)
        peaks = profile.peak if at is None else profile.at_instant(at)[0]
        lines = []
        for row in peaks.itertuples(index=False):
            if args.allocator is not None and str(row.allocator) != args.allocator:
                continue
            if args.host is not None and str(row.host) != args.host:
                continue
            where = f"at {format_duration_ps(row.time_ps)}"
            if not is_missing(row.step):
                word = step_word(profile.steps, str(row.host), str(row.allocator))
                where += f", {word} {row.step}"
            lines.append(
                f"{row.allocator} on {row.host}: peak {format_bytes(row.in_use_bytes)} {where}"
            )
        for line in lines:
            term.line(line, style="bold")
        if lines:
            term.line()


def add_at_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--at",
        nargs="+",
        metavar="WHEN",
        help="where the peak is reached at several instants (within 1%% of it): first, "
        "last (the default: the latest at the maximum) or step N (that step's highest)",
    )


def parse_at(values: list[str] | None) -> str | int | None:
    """``--at first``, ``--at last`` or ``--at step N`` as ``Profile.at_instant`` takes it."""
    from traceparse.errors import UsageError

    if not values:
        return None
    words = " ".join(values).strip().lower().split()
    if words in (["first"], ["last"]):
        return words[0]
    if len(words) == 2 and words[0] == "step" and words[1].lstrip("-").isdigit():
        return int(words[1])
    raise UsageError(f"--at {' '.join(values)}: give first, last or step N (a step number)")


def with_unowned_rows(live: pd.DataFrame, attribution: pd.DataFrame) -> pd.DataFrame:
    """``live`` plus one row per allocator of ``attribution`` for each non-zero unowned part.

    With them the ``allocated_bytes`` of an allocator's rows sum to its
    ``in_use_bytes`` at the peak (the attribution's parts sum to it exactly).
    """
    import pandas as pd

    rows: list[dict[str, object]] = []
    for part in attribution.itertuples(index=False):
        for column, op, region in UNOWNED_ROWS:
            found = getattr(part, column)
            value = 0 if pd.isna(found) else int(found)  # NA: not measured
            if value:
                rows.append(
                    {
                        "host": part.host,
                        "allocator": part.allocator,
                        "op": op,
                        "region": region,
                        "allocated_bytes": value,
                    }
                )
    if not rows:
        return live
    extra = pd.DataFrame(rows, columns=list(live.columns))
    merged = pd.concat([live.astype(object), extra.astype(object)], ignore_index=True)
    types: dict[str, object] = {}
    for column, dtype in live.dtypes.items():
        if str(dtype) == "int64":
            types[str(column)] = "Int64"  # the extra rows have no time or event
        elif str(dtype) == "bool":
            types[str(column)] = "boolean"
        else:
            types[str(column)] = dtype if str(dtype) != "category" else "category"
    return merged.astype(types)
