"""``traceparse check``: memory budgets as a CI gate (exit code 4 on a breach)."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from traceparse.cli._options import PATHS_HELP, add_capture
from traceparse.cli.base import Command, percent_type, size_type
from traceparse.errors import TraceparseError, UsageError

if TYPE_CHECKING:
    from traceparse.core.profile import Profile
    from traceparse.gate.budgets import Result, Tolerance
    from traceparse.gate.verdict import Verdict
    from traceparse.output.terminal import Terminal

CHECK_SCHEMA_VERSION = 1
_NO_BUDGET = (
    "no budget to check: give at least one of --max-peak, --max-utilisation, "
    "--max-padding, --no-leaks or --baseline"
)


# How a PCT reads (units.parse_percent): "1" is 100%, not 1%.
_PERCENT_HELP = "90%%, 90 and 0.9 all mean 90%% (a bare number up to 1 is a fraction: 1 is 100%%)"


def tolerance_type(text: str) -> Tolerance:
    """An argparse type: ``5%``, ``0.05`` or a size such as ``64MiB``."""
    from traceparse.gate.budgets import Tolerance

    try:
        return Tolerance.parse(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class CheckCommand(Command):
    """Check memory budgets for CI: one line per breach, exit code 4 if any budget is breached.

    Judges each budget for every allocator of each host in the newest run under
    PATH (or only --allocator's): the peak in use (reserved + allocated), the
    utilisation of the allocator's capacity, the padding share, step-over-step
    growth, and the peak against a baseline. Each breach prints one line: the
    budget, the allocator, what was measured, what is allowed, and the largest
    contributors. A budget that cannot be judged (capacity unknown, too few
    steps) is reported as skipped and does not fail the check. A capture with no
    memory events fails with exit code 3 unless --allow-empty is given, since
    nothing was measured. A run that ended in out-of-memory (its failure record
    beside the capture) fails with exit code 5 whatever the budgets, also with
    none given. --baseline compares the bytes requested at the peak unless
    --compare allocated: a passing line says so when the peak in use grew past
    the tolerance meanwhile.
    """

    name = "check"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse check logs/ --max-peak 2GiB --max-utilisation 90%\n"
            "  traceparse check logs/ --allocator GPU_0_bfc --max-padding 25% --no-leaks\n"
            "  traceparse baseline logs/ -o memory-baseline.json      # once, then commit it\n"
            "  traceparse check logs/ --baseline memory-baseline.json --tolerance 5% \\\n"
            "      --junit memory.xml --github-summary"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_capture(parser, help=PATHS_HELP)
        parser.add_argument(
            "--allocator", metavar="NAME", help="check only this allocator (default: every one)"
        )
        budgets = parser.add_argument_group("budgets (at least one)")
        budgets.add_argument(
            "--max-peak",
            type=size_type,
            metavar="SIZE",
            help="most bytes in use (reserved + allocated) at the allocator's peak, "
            "such as 2GiB or 512MB",
        )
        budgets.add_argument(
            "--max-utilisation",
            "--max-utilization",
            dest="max_utilisation",
            type=percent_type,
            metavar="PCT",
            help="most of the allocator's capacity in use at the peak (peak / (in use + "
            f"available)), such as 90%%; {_PERCENT_HELP}",
        )
        budgets.add_argument(
            "--max-padding",
            type=percent_type,
            metavar="PCT",
            help="most padding at the peak: padding bytes (allocated minus requested) over "
            "the allocated bytes of the allocations live at the peak, such as 25%%; "
            + _PERCENT_HELP,
        )
        budgets.add_argument(
            "--no-leaks",
            action="store_true",
            help="fail when memory grows step over step (needs 3 or more marked steps; "
            "skipped otherwise)",
        )
        budgets.add_argument(
            "--baseline",
            metavar="FILE",
            help="a baseline from 'traceparse baseline' (or a capture): the peak may not "
            "grow beyond it plus --tolerance",
        )
        budgets.add_argument(
            "--tolerance",
            type=tolerance_type,
            metavar="PCT|SIZE",
            help="how much the peak may grow over the baseline: a percentage (default 5%%) "
            "or a size such as 64MiB",
        )
        budgets.add_argument(
            "--compare",
            choices=["requested", "allocated"],
            default="requested",
            help="what --baseline compares: the bytes requested at the peak (default: the "
            "peak less the allocator's padding, so a bigger chunk handed out by chance does "
            "not fail CI) or the bytes in use at the peak",
        )
        budgets.add_argument(
            "--allow-empty",
            action="store_true",
            help="pass a capture with no memory events instead of failing with exit code 3",
        )
        output = parser.add_argument_group("results")
        output.add_argument(
            "--junit",
            metavar="FILE",
            help="write JUnit XML (one test case per budget and allocator) for CI test reports",
        )
        output.add_argument(
            "--github-summary",
            action="store_true",
            help="append a Markdown report to $GITHUB_STEP_SUMMARY when that variable is set",
        )
        output.add_argument(
            "--format",
            choices=["text", "json"],
            default="text",
            help="text (default: one line per breach) or json (every result)",
        )
        output.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            help="also print a line for each budget within its limit",
        )

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        from traceparse.gate.budgets import DEFAULT_TOLERANCE, Budgets
        from traceparse.gate.verdict import judge

        if args.tolerance is not None and args.baseline is None:
            raise UsageError("--tolerance applies to --baseline: give both, or neither")
        budgets = Budgets(
            max_peak=args.max_peak,
            max_utilisation=args.max_utilisation,
            max_padding=args.max_padding,
            no_leaks=args.no_leaks,
            tolerance=args.tolerance or DEFAULT_TOLERANCE,
            allocator=args.allocator,
            allow_empty=args.allow_empty,
            compare=args.compare,
        )
        # No budget is a usage error, except that a run that died of out-of-memory
        # fails the check whatever the budgets (README, docs/oom.md): look first.
        unbudgeted = budgets.empty and args.baseline is None
        try:
            from traceparse.cli._loading import load_baseline, load_newest

            if args.baseline is not None:
                budgets = replace(budgets, baseline=load_baseline(args.baseline, term))

            profile = load_newest(args.path, term)
            if unbudgeted and not any(f.out_of_memory for f in profile.failures()):
                raise UsageError(_NO_BUDGET)
            verdict = judge(profile, budgets, args.path)
        except UsageError:
            raise
        except TraceparseError as exc:
            # CI pages should say why the gate failed, not only that it did.
            try:
                self._publish(args, term, [], None, error=str(exc))
            except TraceparseError as also:
                term.warn(str(also))
            raise
        self._publish(args, term, verdict.results, profile)
        return self._print(args, term, verdict, profile)

    def _publish(
        self,
        args: argparse.Namespace,
        term: Terminal,
        results: list[Result],
        profile: Profile | None,
        error: str | None = None,
    ) -> None:
        from traceparse.output.export import write_output

        if args.junit:
            from traceparse.gate.junit import junit_xml

            write_output(junit_xml(results, source=args.path, error=error), args.junit)
            term.note(f"Wrote {args.junit}")
        if args.github_summary:
            target = os.environ.get("GITHUB_STEP_SUMMARY")
            if not target:
                term.note("GITHUB_STEP_SUMMARY is not set (not on GitHub Actions): no job summary")
                return
            append_summary(target, summary_markdown(args.path, results, profile, error))

    def _print(
        self,
        args: argparse.Namespace,
        term: Terminal,
        verdict: Verdict,
        profile: Profile,
    ) -> int:
        results = verdict.results
        if args.format == "json":
            from traceparse.output.jsonvalues import inert

            data = {
                "schema_version": CHECK_SCHEMA_VERSION,
                "source": args.path,
                "run": profile.run,
                "passed": verdict.passed,
                "verdict": verdict.line,
                "results": [r.to_dict() for r in results],
            }
            term.raw(inert(json.dumps(data, indent=2, ensure_ascii=False)))
        else:
            for result in results:
                if result.failed:
                    term.line(f"FAIL {result.line()}", style="bold red")
                elif result.status == "skip":
                    term.warn(f"skipped {result.budget}: {result.where}: {result.message}")
                elif args.verbose:
                    term.line(f"ok   {result.line()}")
                if result.caveat and not result.failed:
                    term.warn(f"note {result.budget}: {result.where}: {result.caveat}")
            if not results:
                term.warn(f"{args.path}: no memory events, nothing checked (--allow-empty)")
            elif verdict.passed:
                term.line(f"ok: {verdict.line} ({args.path})")
        if not verdict.passed:
            raise verdict.error()
        return 0


def summary_markdown(
    source: str, results: list[Result], profile: Profile | None, error: str | None
) -> str:
    """The check's Markdown, then the memory report folded away under it."""
    from traceparse.gate.render import check_markdown

    text = check_markdown(results, source, error=error)
    if profile is not None and error is None and results:
        from traceparse.report import render_markdown

        report = render_markdown([profile])
        text += "\n<details><summary>Memory report</summary>\n\n" + report + "\n</details>\n"
    return text + "\n"


def append_summary(path: str, text: str) -> None:
    """Append to the job summary file (GitHub reads it after the step)."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(
            f"{path}: cannot append the job summary ($GITHUB_STEP_SUMMARY): {reason}", path
        ) from exc
