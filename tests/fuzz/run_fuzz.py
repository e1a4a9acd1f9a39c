"""The long fuzz run: mutated fixtures through load, the analyses and the renderers.

    nice .venv/bin/python tests/fuzz/run_fuzz.py --cases 10000 --seed 1

Each case is made here (``mutations.make_case`` from ``random.Random(f"{seed}:{i}")``,
so ``--seed S --first I --cases 1`` replays case I) and run in a worker process
that has a limit on its address space (``RLIMIT_AS``: what the worker had after
its imports plus ``--memory-mib``) and a per-case alarm (``--timeout``). A case
fails when anything but a ``TraceparseError`` naming the file escapes, when it
runs past the time bound, or when the worker runs out of memory or dies; the
worker is then restarted. The first input of each distinct failure (exception
type and the innermost traceparse frame) goes to ``--corpus`` with a short name,
and its details to ``corpus/INDEX.json``; tests/test_hostile_corpus.py replays
every file there.

``--replay DIR`` runs the files of a corpus through the same worker instead.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fuzz.mutations import SUFFIXES, make_case  # noqa: E402

CORPUS = HERE / "corpus"
INDEX = "INDEX.json"


# -- worker ---------------------------------------------------------------------------


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException so no ``except Exception`` swallows it."""


def _on_alarm(signum: int, frame: object) -> None:
    raise CaseTimeout


def _vm_size() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _where(exc: BaseException) -> str:
    """The innermost frame in traceparse (else the innermost frame at all)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/traceparse/" in f.filename] or frames
    if not ours:
        return "?"
    frame = ours[-1]
    return f"{Path(frame.filename).stem}.{frame.name}:{frame.lineno}"


def worker(timeout: float, memory_mib: int, cli: bool = False) -> None:
    """Read case paths from stdin (one per line), answer one JSON line each."""
    from fuzz.harness import exercise, exercise_cli
    from fuzz.mutations import FIXTURES

    # One real capture first, so the lazy imports (plots, reports) are in the
    # baseline and the limit is what a case itself may use.
    exercise(FIXTURES / "leak")
    if cli:
        with tempfile.TemporaryDirectory(prefix="traceparse-warm-") as warm:
            (Path(warm) / "out").mkdir()
            exercise_cli(["summary", str(FIXTURES / "leak")], Path(warm))
    limit = _vm_size() + memory_mib * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _on_alarm)
    print(json.dumps({"ready": True, "address_space_limit": limit}), flush=True)
    for line in sys.stdin:
        started = time.perf_counter()
        reply: dict[str, Any]
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            if line.startswith("{"):  # a command line (--cli): {"argv": [...], "root": DIR}
                request = json.loads(line)
                reply = {"outcome": exercise_cli(request["argv"], Path(request["root"]))}
            else:
                reply = {"outcome": exercise(Path(line.strip()))}
        except CaseTimeout:
            reply = {"outcome": "failure", "type": "Timeout", "where": "-", "message": ""}
        except BaseException as exc:  # everything else is what we are looking for
            reply = {
                "outcome": "failure",
                "type": type(exc).__name__,
                "where": _where(exc),
                "message": str(exc)[:500],
                "traceback": traceback.format_exc()[-4000:],
            }
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        reply["seconds"] = time.perf_counter() - started
        reply["max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(reply), flush=True)


# -- parent ---------------------------------------------------------------------------


class Worker:
    def __init__(self, timeout: float, memory_mib: int, cli: bool = False) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        env["MPLBACKEND"] = "Agg"
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--timeout",
                str(timeout),
                "--memory-mib",
                str(memory_mib),
                *(["--cli"] if cli else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        hello = self._reply(120)
        if not hello or not hello.get("ready"):
            raise RuntimeError("the fuzz worker did not start")
        self.limit = int(hello["address_space_limit"])

    def _reply(self, wait: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], wait)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return dict(json.loads(line)) if line else None

    def run(self, path: Path | str) -> dict[str, Any]:
        """Run one case: a capture's path, or a command line as a JSON line."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{path}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return {"outcome": "failure", "type": "WorkerDied", "where": "-", "message": ""}
        # The worker's own alarm fires first; this catches a hang in C code.
        reply = self._reply(self.timeout + 30)
        if reply is None:
            self.close()
            code = self.proc.returncode
            kind = "Hang" if code in (None, -signal.SIGKILL) else f"WorkerDied({code})"
            return {"outcome": "failure", "type": kind, "where": "-", "message": ""}
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def _signature(reply: dict[str, Any]) -> str:
    where = re.sub(r":\d+$", "", str(reply.get("where", "-")))
    return f"{reply['type']} at {where}"


def _save(
    corpus: Path, case_data: bytes, suffix: str, reply: dict[str, Any], info: dict[str, Any]
) -> str:
    corpus.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(case_data).hexdigest()[:8]
    where = str(reply.get("where", "-")).split(":")[0]
    name = f"{_slug(reply['type'])}-{_slug(where)}-{digest}{suffix}"
    (corpus / name).write_bytes(case_data)
    index_path = corpus / INDEX
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    index[name] = {
        "failure": _signature(reply),
        "message": reply.get("message", ""),
        "fixed": "",  # say how, once it is: tests/test_hostile_corpus.py checks
        **info,
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return name


def fuzz(args: argparse.Namespace) -> dict[str, Any]:
    outcomes: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    failures: dict[str, dict[str, Any]] = {}
    slowest = 0.0
    max_rss = 0
    started = time.monotonic()
    worker_ = Worker(args.timeout, args.memory_mib)
    limit = worker_.limit
    with tempfile.TemporaryDirectory(prefix="traceparse-fuzz-") as tmp:
        for index in range(args.first, args.first + args.cases):
            if not worker_.alive():
                worker_ = Worker(args.timeout, args.memory_mib)
            case = make_case(random.Random(f"{args.seed}:{index}"))
            path = Path(tmp) / f"case{case.suffix}"
            path.write_bytes(case.data)
            reply = worker_.run(path)
            kinds[case.kind] += 1
            outcomes[reply["outcome"] if reply["outcome"] != "failure" else "FAILURE"] += 1
            slowest = max(slowest, float(reply.get("seconds", 0.0)))
            max_rss = max(max_rss, int(reply.get("max_rss", 0)))
            if reply["outcome"] == "failure":
                if not worker_.alive():
                    worker_ = Worker(args.timeout, args.memory_mib)
                signature = _signature(reply)
                info = {"seed": args.seed, "case": index, "kind": case.kind, "source": case.source}
                entry = failures.setdefault(signature, {"count": 0, "first": info})
                entry["count"] += 1
                if entry["count"] == 1:
                    entry["saved"] = _save(args.corpus, case.data, case.suffix, reply, info)
                    print(
                        f"case {index}: {signature}: {reply.get('message', '')[:200]}", flush=True
                    )
            done = index - args.first + 1
            if done % args.every == 0:
                rate = done / (time.monotonic() - started)
                print(
                    f"{done} cases ({rate:.1f}/s): {dict(outcomes)}; "
                    f"{len(failures)} distinct failures",
                    flush=True,
                )
    worker_.close()
    return {
        "cases": args.cases,
        "seed": args.seed,
        "first": args.first,
        "seconds": round(time.monotonic() - started, 1),
        "outcomes": dict(outcomes),
        "kinds": dict(kinds),
        "failures": failures,
        "slowest_case_seconds": round(slowest, 3),
        "time_bound_seconds": args.timeout,
        "address_space_limit_mib": limit // 2**20,
        "max_rss_mib": max_rss // 2**20,
    }


def fuzz_cli(args: argparse.Namespace) -> dict[str, Any]:
    """--cli: each case a damaged run directory and one command over it."""
    from fuzz.cli_cases import COMMANDS, make_cli_case

    commands = tuple(args.command or COMMANDS)
    slowest_case: dict[str, Any] = {}
    per_command: dict[str, collections.Counter[str]] = {}
    failures: dict[str, dict[str, Any]] = {}
    slowest = 0.0
    max_rss = 0
    started = time.monotonic()
    worker_ = Worker(args.timeout, args.memory_mib, cli=True)
    limit = worker_.limit
    for index in range(args.first, args.first + args.cases):
        if not worker_.alive():
            worker_ = Worker(args.timeout, args.memory_mib, cli=True)
        rng = random.Random(f"{args.seed}:{index}")
        with tempfile.TemporaryDirectory(prefix="traceparse-fuzz-cli-") as tmp:
            case = make_cli_case(rng, Path(tmp), rng.choice(commands))
            reply = worker_.run(json.dumps({"argv": case.argv, "root": tmp}))
        outcome = reply["outcome"] if reply["outcome"] != "failure" else "FAILURE"
        per_command.setdefault(case.command, collections.Counter())[outcome] += 1
        seconds = float(reply.get("seconds", 0.0))
        if seconds > slowest:
            slowest_case = {"case": index, "argv": case.argv[:1], "damaged": case.damaged}
        slowest = max(slowest, seconds)
        max_rss = max(max_rss, int(reply.get("max_rss", 0)))
        if reply["outcome"] == "failure":
            if not worker_.alive():
                worker_ = Worker(args.timeout, args.memory_mib, cli=True)
            signature = f"{case.command}: {_signature(reply)}"
            info = {
                "seed": args.seed,
                "case": index,
                "argv": [a.replace(tmp, "$CASE") for a in case.argv],
                "fixture": case.fixture,
                "damaged": case.damaged,
                "message": reply.get("message", "")[:500],
            }
            entry = failures.setdefault(signature, {"count": 0, "first": info})
            entry["count"] += 1
            if entry["count"] == 1:
                said = f"{info['damaged']}: {info['message'][:200]}"
                print(f"case {index}: {signature}: {said}", flush=True)
        done = index - args.first + 1
        if done % args.every == 0:
            rate = done / (time.monotonic() - started)
            print(f"{done} cases ({rate:.1f}/s); {len(failures)} distinct failures", flush=True)
    worker_.close()
    return {
        "mode": "cli",
        "cases": args.cases,
        "seed": args.seed,
        "first": args.first,
        "seconds": round(time.monotonic() - started, 1),
        "per_command": {name: dict(counts) for name, counts in sorted(per_command.items())},
        "failures": failures,
        "slowest_case_seconds": round(slowest, 3),
        "slowest_case": slowest_case,
        "time_bound_seconds": args.timeout,
        "address_space_limit_mib": limit // 2**20,
        "max_rss_mib": max_rss // 2**20,
    }


def replay(args: argparse.Namespace) -> dict[str, Any]:
    files = sorted(p for p in Path(args.replay).iterdir() if p.name.endswith(SUFFIXES))
    worker_ = Worker(args.timeout, args.memory_mib)
    results: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="traceparse-replay-") as tmp:
        for file in files:
            if not worker_.alive():
                worker_ = Worker(args.timeout, args.memory_mib)
            path = Path(tmp) / file.name
            path.write_bytes(file.read_bytes())
            reply = worker_.run(path)
            results[file.name] = (
                _signature(reply) if reply["outcome"] == "failure" else reply["outcome"]
            )
    worker_.close()
    return {"replayed": len(files), "results": results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", default="1")
    parser.add_argument("--first", type=int, default=0, help="index of the first case")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    parser.add_argument("--memory-mib", type=int, default=1024, help="address space per case")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--every", type=int, default=500, help="progress line every N cases")
    parser.add_argument("--report", type=Path, help="write the figures here as JSON")
    parser.add_argument("--replay", type=Path, help="run a corpus directory instead")
    parser.add_argument(
        "--cli",
        action="store_true",
        help="run the commands over damaged run directories (fuzz/cli_cases.py) instead",
    )
    parser.add_argument(
        "--command",
        action="append",
        help="with --cli: only this command (repeat for more)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.timeout, args.memory_mib, args.cli)
        return 0
    result = replay(args) if args.replay else fuzz_cli(args) if args.cli else fuzz(args)
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    failed = result.get("failures") or [
        r for r in result.get("results", {}).values() if r not in ("ok",) and " at " in r
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
