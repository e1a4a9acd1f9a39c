"""CPU time and peak RSS of ``summary``, ``report -o r.html`` and ``predict
--batch 64 --capacity`` on ``make_dense.py`` captures, this checkout against a
baseline checkout (main), in one run; and the import time of the ``summary``
command. The captured batch (56) is read off the captures' input, activation and
gradient shapes, as on a real training step; ``predict`` must print it.

Each command is a fresh ``python -m traceparse`` process; its CPU time (user +
system) and peak RSS come from ``os.wait4`` (the machine is shared: CPU time
moves far less with the load than wall time). Runs are sequential. The
baseline's slow commands on the largest capture can be left out
(``--baseline-upto``); the note says which.

    python benchmarks/make_dense.py --events 250000 1000000 4000000
    python benchmarks/bench_replay.py --baseline /work/main --events 250000 1000000 4000000
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from make_dense import capture_path  # noqa: E402

COMMANDS = {
    "summary": ["summary"],
    "report": ["report", "-o", "{out}/r.html"],
    "predict": ["predict", "--batch", "64", "--capacity", "80GiB"],
}


def _env(code: Path) -> dict[str, str]:
    # Bytecode written and read (as an install has it): a checkout without its
    # __pycache__ would pay for compiling every module on every run.
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(code: Path, args: list[str], capture: Path) -> tuple[float, float, str]:
    """(CPU seconds, peak RSS in MiB, stdout) of one ``traceparse`` process."""
    env = _env(code)
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "traceparse", *[a.format(out=out) for a in args]]
        process = subprocess.Popen(
            [*argv, str(capture)],
            env=env,
            cwd=out,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        text = process.stdout.read() if process.stdout else ""
        _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} {capture}: exit status {status}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text


def import_times(codes: dict[str, Path], capture: Path, repeat: int = 15) -> dict[str, float]:
    """Per checkout, the least seconds (of ``repeat``, the checkouts interleaved) of
    the imports ``traceparse summary`` makes (``-X importtime``, top level summed)."""
    totals: dict[str, list[float]] = {label: [] for label in codes}
    for _ in range(repeat):
        for label, code in codes.items():
            done = subprocess.run(
                [sys.executable, "-X", "importtime", "-m", "traceparse", "summary", str(capture)],
                env=_env(code),
                cwd=tempfile.gettempdir(),  # not a checkout: -m finds the code on PYTHONPATH
                capture_output=True,
                text=True,
                check=True,
            )
            top = re.findall(r"import time:\s+\d+ \|\s+(\d+) \| [^ ]", done.stderr)
            totals[label].append(sum(int(us) for us in top) / 1e6)
    return {label: min(found) for label, found in totals.items()}


def largest(text: str) -> str:
    found = re.search(r"largest batch size that fits: (\d+)", text)
    return found.group(1) if found else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--events", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument(
        "--baseline-upto",
        type=int,
        default=1_000_000,
        help="the baseline's report and predict only up to this many events",
    )
    parser.add_argument("--label", default="main", help="the baseline's name in the tables")
    parser.add_argument("--out", type=Path, default=HERE / "REPLAY_RESULTS.md")
    args = parser.parse_args()
    tiny = (REPO / "fixtures" / "leak").resolve()
    for code in (args.baseline, REPO):  # writes each checkout's bytecode first
        run(code, ["summary"], tiny)
    rows = []
    for events in args.events:
        capture = capture_path(events)
        if not capture.exists():
            raise SystemExit(f"{capture}: missing; run make_dense.py --events {events}")
        for name, command in COMMANDS.items():
            for label, code in ((args.label, args.baseline), ("this", REPO)):
                if label != "this" and name != "summary" and events > args.baseline_upto:
                    rows.append((events, name, label, None, None, "not run"))
                    continue
                cpu, rss, text = run(code, command, capture)
                if name == "predict" and "The captured batch size 56:" not in text:
                    raise SystemExit(f"{label}: predict did not read batch 56 off {capture}")
                rows.append((events, name, label, cpu, rss, largest(text)))
                print(f"{events:>9,} {name:8} {label:5} {cpu:8.2f} s {rss:8.0f} MiB", flush=True)
    imports = import_times({args.label: args.baseline, "this": REPO}, tiny)
    write(args.out, rows, imports, args.label)


def write(
    path: Path,
    rows: list[tuple[int, str, str, float | None, float | None, str]],
    imports: dict[str, float],
    baseline: str = "main",
) -> None:
    lines = [
        "| events | command | code | CPU s | peak RSS MiB | largest that fits |",
        "|---:|---|---|---:|---:|---:|",
    ]
    for events, name, label, cpu, rss, fits in rows:
        c = "-" if cpu is None else f"{cpu:.2f}"
        r = "-" if rss is None else f"{rss:.0f}"
        lines.append(f"| {events:,} | {name} | {label} | {c} | {r} | {fits} |")
    lines.append("")
    lines.append("| events | report / summary CPU | report / summary RSS | code |")
    lines.append("|---:|---:|---:|---|")
    table = {(e, n, lab): (c, r) for e, n, lab, c, r, _ in rows}
    for events in sorted({r[0] for r in rows}):
        for label in (baseline, "this"):
            s, rep = table.get((events, "summary", label)), table.get((events, "report", label))
            if s and rep and rep[0] is not None and s[0] and s[1] and rep[1] is not None:
                lines.append(
                    f"| {events:,} | {rep[0] / s[0]:.2f}x | {rep[1] / s[1]:.2f}x | {label} |"
                )
    lines.append("")
    lines += scaling(rows, baseline)
    lines.append("")
    lines.append(
        "Imports of `traceparse summary fixtures/leak` (`-X importtime`, top level "
        f"summed, least of 15): {baseline} {imports[baseline]:.3f} s, this {imports['this']:.3f} s."
    )
    path.with_suffix(".table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def scaling(
    rows: list[tuple[int, str, str, float | None, float | None, str]], baseline: str
) -> list[str]:
    """Per command and code, the CPU time from the fewest events to the most: the
    issue's pace is 12x the time for 10x the events (so 12 * (ratio / 10) for
    another ratio of events)."""
    lines = [
        "| command | code | events | CPU s | CPU ratio | events ratio | allowed |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for name in COMMANDS:
        for label in (baseline, "this"):
            found = sorted(
                (e, c) for e, n, lab, c, _, _ in rows if n == name and lab == label and c
            )
            if len(found) < 2:
                continue
            (e0, c0), (e1, c1) = found[0], found[-1]
            lines.append(
                f"| {name} | {label} | {e0:,} -> {e1:,} | {c0:.2f} -> {c1:.2f} | "
                f"{c1 / c0:.1f}x | {e1 / e0:.0f}x | {12 * e1 / e0 / 10:.1f}x |"
            )
    return lines


if __name__ == "__main__":
    main()
