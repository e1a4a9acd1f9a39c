"""``traceparse diff``: what changed in memory between two captures, per op or name scope."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from traceparse.cli._options import add_output
from traceparse.cli.base import Command, count_type
from traceparse.errors import InputError, UsageError

if TYPE_CHECKING:
    from traceparse.gate.figures import AllocatorFigures
    from traceparse.output.terminal import Terminal

DIFF_FORMATS = ("table", "md", "html", "json")


def depth_type(text: str) -> int:
    value = count_type(text)
    if value < 1:
        raise argparse.ArgumentTypeError("the scope depth is 1 or more")
    return value


class DiffCommand(Command):
    """Compare two captures: per op or name scope, what changed at the peak and overall.

    A and B are captures (log directory, run directory or capture file; the
    newest run of each) or baselines from 'traceparse baseline'. For each
    allocator: bytes live at the peak and bytes allocated over the capture,
    before and after, and the change; ops (or scopes) that are new or vanished
    say so. Rows are sorted by impact: the change at the peak, then the change
    in bytes allocated. The headline says how the peak moved and which rows
    explain it. Ops are matched by name, scopes by their name prefix (--depth
    levels); hosts by name, or the single host of each side when the names
    differ.
    """

    name = "diff"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse diff logs/main/ logs/branch/\n"
            "  traceparse diff memory-baseline.json logs/ --by scope --depth 2\n"
            '  traceparse diff before/ after/ --format md >> "$GITHUB_STEP_SUMMARY"\n'
            "  traceparse diff before/ after/ -o diff.html"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("before", metavar="A", help="the earlier capture or a baseline file")
        parser.add_argument("after", metavar="B", help="the later capture or a baseline file")
        parser.add_argument(
            "--by", choices=["op", "scope"], default="op", help="one row per op (default) or scope"
        )
        parser.add_argument(
            "--depth",
            type=depth_type,
            default=1,
            metavar="N",
            help="scope levels for --by scope (default 1: the layer, as in `scopes`)",
        )
        parser.add_argument("--allocator", metavar="NAME", help="only this allocator")
        parser.add_argument(
            "--compare",
            choices=["requested", "allocated"],
            default="requested",
            help="rank and explain by what the program requested (default: shape × dtype "
            "and requested bytes, which do not depend on which chunk the allocator handed "
            "out) or by the bytes allocated at the peak",
        )
        parser.add_argument(
            "--top",
            type=count_type,
            default=20,
            metavar="N",
            help="changed rows per allocator in table, md and html (default 20; 0 shows all); "
            "json has every row",
        )
        parser.add_argument(
            "--format",
            choices=DIFF_FORMATS,
            help="table, md, html or json (default: from -o's extension, else table)",
        )
        add_output(parser)

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        import io

        from traceparse.gate.diff import diff_figures
        from traceparse.gate.diff_render import (
            diff_html,
            diff_json,
            diff_markdown,
            print_diff,
        )
        from traceparse.output.export import format_from_path, write_output
        from traceparse.report.formats import FILE_SUFFIXES

        implied = format_from_path(args.output, FILE_SUFFIXES)
        fmt = args.format or (implied if implied in DIFF_FORMATS else "table")
        if fmt == "html" and args.output is None and term.interactive:
            raise UsageError("an HTML diff is a file: add -o diff.html")
        before, before_info = _side(args.before, term)
        after, after_info = _side(args.after, term)
        if args.allocator is not None:
            known = sorted({f.allocator for f in [*before, *after]})
            if args.allocator not in known:
                raise UsageError(
                    f"no allocator named {args.allocator!r} in either capture; their "
                    f"allocators are: {', '.join(known) or 'none (no memory events)'}"
                )
        if not before and not after:
            raise InputError(
                f"neither {args.before} nor {args.after} has memory events: there is "
                "nothing to compare"
            )
        diffs = diff_figures(
            before,
            after,
            by=args.by,
            depth=args.depth,
            allocator=args.allocator,
            compare=args.compare,
        )
        title = f"Memory diff: {before_info['label']} → {after_info['label']}"
        if fmt == "json":
            text = diff_json(diffs, before_info, after_info, args.by)
        elif fmt == "md":
            text = diff_markdown(diffs, args.top, title)
        elif fmt == "html":
            text = diff_html(diffs, args.top, title)
        elif args.output is not None:
            from traceparse.output.terminal import Terminal

            buffer = io.StringIO()
            print_diff(diffs, Terminal(stream=buffer, err=term.err, quiet=True), args.top, title)
            text = buffer.getvalue()
        else:
            print_diff(diffs, term, args.top, title)
            return 0
        if args.output is None:
            term.raw(text)
        else:
            write_output(text, args.output)
            term.note(f"Wrote {args.output}")
        return 0


def _side(path: str, term: Terminal) -> tuple[list[AllocatorFigures], dict[str, Any]]:
    """The figures of one side: a baseline file, or the newest run of a capture."""
    from traceparse.gate.baseline import is_baseline_file, read_baseline

    if is_baseline_file(path):
        baseline = read_baseline(path)
        for note in baseline.meaning_notes():
            term.warn(note)
        info: dict[str, Any] = {"label": path, "path": path, "kind": "baseline"}
        if baseline.changed_meaning:
            info["changed_meaning"] = dict(baseline.changed_meaning)
        return baseline.allocators, info
    from traceparse.cli._loading import load_newest
    from traceparse.gate.figures import figures_of

    profile = load_newest(path, term)
    for note in profile.diagnostics():
        if "no memory events" in note:
            term.warn(note)
    return figures_of(profile), {
        "label": path,
        "path": profile.path,
        "run": profile.run,
        "kind": "capture",
    }
