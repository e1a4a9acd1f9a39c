"""How close ``Profile.predict`` comes to the real peak at other batch sizes (issue 40).

Four small Keras models (benchmarks/predict_models.py: an eager CNN, an MLP
compiled with ``jit_compile=True``, a transformer block, a CNN with batch
normalization and dropout) are captured on CPU at batch sizes B, 2B and 4B,
each in a process of its own. For each model:

- the peak at 4B predicted from the B capture, and at B from the 4B capture
  (one capture), and at 4B from the B and 2B captures (two captures), against
  the real peak of the capture at that batch; whether the real peak lies
  within the predicted bounds;
- the capacity answer: with the capacity halfway between the real peaks at 2B
  and 4B, the largest batch N that fits by the prediction from the B capture;
  the model is then captured at N and N + 1 to check that N fits and N + 1
  does not (or lies within the stated bounds).

Captures are cached under benchmarks/.captures/predict/ (not committed).

    python benchmarks/bench_predict.py [--models cnn_eager ...] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from predict_models import COMPILED, HELD_OUT, MODELS  # noqa: E402

CACHE = HERE / ".captures" / "predict"
GOALS = {"one": {False: 0.05, True: 0.10}, "two": 0.02}


def capture(model: str, batch: int) -> Path:
    """The cached capture of ``model`` at ``batch``, made if missing."""
    logdir = CACHE / f"{model}_{batch}"
    if not any(logdir.rglob("*.xplane.pb")):
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
        cmd = [sys.executable, str(HERE / "predict_models.py"), model, str(batch), str(logdir)]
        subprocess.run(cmd, check=True, env=env, capture_output=True)
    return logdir


def real_peak(profile) -> int:  # type: ignore[no-untyped-def]
    return int(profile.peak["in_use_bytes"].max())


def mib(n: float) -> str:
    return f"{n / 2**20:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--out", type=Path, default=HERE / "PREDICT_RESULTS.md")
    parser.add_argument("--no-capacity", action="store_true", help="skip the capacity check")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="only the models never tuned on (HELD_OUT): every pair of B, 2B, 4B",
    )
    args = parser.parse_args(argv)
    if args.held_out:
        out = args.out if args.out != HERE / "PREDICT_RESULTS.md" else HERE / "PREDICT_HELD_OUT.md"
        out.write_text(_held_out_markdown())
        print(f"wrote {out}")
        return 0

    import traceparse
    from traceparse.analysis.predict_capacity import capacity_fit
    from traceparse.core.profile import predictor_of

    rows, fits = [], []
    for model in args.models:
        b = MODELS[model]
        compiled = model in COMPILED
        profiles = {k: traceparse.load(str(capture(model, b * k))) for k in (1, 2, 4)}
        real = {k: real_peak(p) for k, p in profiles.items()}
        cases = [
            ("one", 1, 4, None),
            ("one", 4, 1, None),
            ("two", 1, 4, 2),
        ]
        for kind, src, dst, other in cases:
            start = time.perf_counter()
            other_profile = profiles[other] if other else None
            table = profiles[src].predict(b * dst, other=other_profile)
            seconds = time.perf_counter() - start
            row = table.iloc[0]
            pred, low, high = (
                int(row["predicted_peak_bytes"]),
                int(row["low_bytes"]),
                int(row["high_bytes"]),
            )
            error = pred / real[dst] - 1
            goal = GOALS["two"] if kind == "two" else GOALS["one"][compiled]
            source = f"{b * src}" + (f" + {b * other}" if other else "")
            rows.append(
                {
                    "model": model,
                    "compiled": compiled,
                    "from": source,
                    "to": b * dst,
                    "found_batch": row["found_batch"],
                    "real": real[dst],
                    "predicted": pred,
                    "low": low,
                    "high": high,
                    "error": error,
                    "goal": goal,
                    "within_goal": abs(error) <= goal,
                    "in_bounds": low <= real[dst] <= high,
                    "seconds": seconds,
                }
            )
            print(
                f"{model:12s} {source:>9s} -> {b * dst:<4d} real {mib(real[dst])} MiB "
                f"predicted {mib(pred)} [{mib(low)}, {mib(high)}] error {error:+.1%}",
                flush=True,
            )
        if args.no_capacity:
            continue
        capacity = (real[2] + real[4]) // 2
        predictor = predictor_of(profiles[1], 4 * b)
        key = (profiles[1].hosts[0], str(profiles[1].peak["allocator"].iloc[0]))
        fit = capacity_fit(predictor, key, capacity, 4 * b)
        if fit.largest is None:
            fits.append({"model": model, "capacity": capacity, "largest": None})
            continue
        n = fit.largest
        at_n = real_peak(traceparse.load(str(capture(model, n))))
        at_next = real_peak(traceparse.load(str(capture(model, n + 1))))
        _, low_next, high_next = _bounds(predictor, key, n + 1)
        fits.append(
            {
                "model": model,
                "capacity": capacity,
                "largest": n,
                "predicted_at_n": fit.largest_peak_bytes,
                "real_at_n": at_n,
                "real_next": at_next,
                "low_next": low_next,
                "high_next": high_next,
                "n_fits": at_n <= capacity,
                "next_ok": at_next > capacity or low_next <= at_next <= high_next,
            }
        )
        print(
            f"{model:12s} capacity {mib(capacity)} MiB: largest {n}; real at N {mib(at_n)}, "
            f"at N+1 {mib(at_next)}",
            flush=True,
        )
    pairs = _all_pairs(args.models)
    args.out.write_text(
        _markdown(rows, fits) + _pairs_markdown(pairs) + _model_markdown(args.models)
    )
    print(f"wrote {args.out}")
    return 0


def _all_pairs(models: list[str]) -> list[dict]:  # type: ignore[type-arg]
    """Every ordered pair of the cached captures of each model: one predicts the other."""
    import re

    import traceparse
    from traceparse.core.profile import predictor_of

    found: dict[str, dict[int, object]] = {}
    for path in sorted(CACHE.iterdir()):
        match = re.fullmatch(r"(\w+?)_(\d+)", path.name)
        if match and match.group(1) in models and any(path.rglob("*.xplane.pb")):
            found.setdefault(match.group(1), {})[int(match.group(2))] = traceparse.load(str(path))
    out = []
    for model, captures in found.items():
        for src, source in captures.items():
            predictor = predictor_of(source)  # type: ignore[arg-type]
            for dst, target in captures.items():
                if dst == src:
                    continue
                row = predictor.at(dst).iloc[0]
                real = real_peak(target)
                out.append(
                    {
                        "model": model,
                        "error": row["predicted_peak_bytes"] / real - 1,
                        "in_bounds": row["low_bytes"] <= real <= row["high_bytes"],
                        "batches": sorted(captures),
                    }
                )
    return out


def _pairs_markdown(pairs: list[dict]) -> str:  # type: ignore[type-arg]
    import numpy as np

    lines = [
        "",
        "## Every pair of captures",
        "",
        "Each cached capture of a model (B, 2B, 4B and capacity checks' N and N + 1, "
        "of this and earlier runs) "
        "predicting each other one from itself alone.",
        "",
        "| model | batch sizes | pairs | real in bounds | mean abs error | largest abs error |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for model in dict.fromkeys(p["model"] for p in pairs):
        mine = [p for p in pairs if p["model"] == model]
        errors = np.abs([p["error"] for p in mine])
        lines.append(
            f"| {model} | {', '.join(map(str, mine[0]['batches']))} | {len(mine)} "
            f"| {sum(p['in_bounds'] for p in mine)} | {errors.mean():.1%} | {errors.max():.1%} |"
        )
    return "\n".join(lines) + "\n"


def _held_out_markdown() -> str:
    """Each held-out model at B, 2B and 4B: every ordered pair from one capture, and
    4B from B and 2B."""
    import traceparse

    lines = [
        "# Predicting the peak: models not tuned on",
        "",
        "Made by `python benchmarks/bench_predict.py --held-out`: the models of "
        "`HELD_OUT` in `benchmarks/predict_models.py`, captured like the benchmark's. "
        "Sizes in MiB; error = predicted / real - 1.",
        "",
        "| model | from batch | to batch | real | predicted | low | high | error "
        "| real in bounds |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for model, b in HELD_OUT.items():
        profiles = {k: traceparse.load(str(capture(model, b * k))) for k in (1, 2, 4)}
        real = {k: real_peak(p) for k, p in profiles.items()}
        cases = [(s, d, None) for s in (1, 2, 4) for d in (1, 2, 4) if s != d]
        for src, dst, other in [*cases, (1, 4, 2)]:
            other_profile = profiles[other] if other else None
            row = profiles[src].predict(b * dst, other=other_profile).iloc[0]
            pred, low, high = (
                int(row[c]) for c in ("predicted_peak_bytes", "low_bytes", "high_bytes")
            )
            source = f"{b * src}" + (f" + {b * other}" if other else "")
            lines.append(
                f"| {model} | {source} | {b * dst} | {mib(real[dst])} | {mib(pred)} "
                f"| {mib(low)} | {mib(high)} | {pred / real[dst] - 1:+.1%} "
                f"| {'yes' if low <= real[dst] <= high else 'no'} |"
            )
    return "\n".join(lines) + "\n"


def _model_markdown(models: list[str]) -> str:
    """How closely the allocator model (analysis/bfc.py) replays each cached capture
    at its own requests, and how fast it runs."""
    import re

    import numpy as np

    import traceparse
    from traceparse.analysis.liveness import held_bytes
    from traceparse.analysis.peak import in_use
    from traceparse.analysis.predict_bfc import simulate
    from traceparse.core.profile import predictor_of

    lines = [
        "",
        "## The allocator model against the captures",
        "",
        "Each cached capture replayed through the BFC model at its own requests, after "
        "the history it rebuilds (chunks held before the capture, a warm-up step, free "
        "regions the capture shows: `ghosts`): allocations whose chunk is the captured "
        "`allocation_bytes`, events after which the counter is the captured "
        "`bytes_allocated`, and the peak.",
        "",
        "| capture | allocations | chunks equal | events | counter equal | captured peak "
        "| model's peak | error | ghosts (MiB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for path in sorted(CACHE.iterdir()):
        match = re.fullmatch(r"(\w+?)_(\d+)", path.name)
        if not (match and match.group(1) in models and any(path.rglob("*.xplane.pb"))):
            continue
        profile = traceparse.load(str(path))
        predictor = predictor_of(profile)
        held = held_bytes(profile.allocations)
        counter = in_use(profile.timeline)
        for key, program in predictor.programs.items():
            history = predictor.histories[key]
            ghosts = history.ghosts
            run = simulate(
                program, predictor._sent(predictor.requested), ghosts, history.first_region
            )
            rows = np.flatnonzero(run.chunks)
            chunks = run.chunks[rows]
            captured = counter[predictor.rows[key]]
            peak, model = int(captured.max()), int(run.in_use.max())
            lines.append(
                f"| {path.name} | {len(rows)} | {int((chunks == held[rows]).sum())} "
                f"| {len(captured)} | {int((run.in_use == captured).sum())} | {mib(peak)} "
                f"| {mib(model)} | {model / peak - 1:+.1%} "
                f"| {', '.join(mib(g) for g in ghosts) or 'none'} |"
            )
    events, seconds = _model_speed()
    lines += [
        "",
        f"Speed: {events:,} events (a synthetic allocator workload, 500,000 allocations "
        f"of 256 KiB to 64 MiB, each freed within 200 events) in {seconds:.2f} s: "
        f"{seconds / events * 1e5:.2f} s per 100,000 events.",
        "",
    ]
    return "\n".join(lines)


def _model_speed() -> tuple[int, float]:
    import numpy as np

    from traceparse.analysis.predict_bfc import ALLOC, FREE, Program, simulate

    rng = np.random.default_rng(0)
    n = 500_000
    sizes = np.exp(rng.uniform(np.log(256 << 10), np.log(64 << 20), n))
    life = rng.integers(1, 200, n)
    when = np.concatenate([2 * np.arange(n), 2 * (np.arange(n) + life) + 1])
    order = np.argsort(when, kind="stable")
    kinds = np.concatenate([np.full(n, ALLOC), np.full(n, FREE)])[order].tolist()
    refs = np.concatenate([np.arange(n), np.arange(n)])[order].tolist()
    program = Program(
        events=np.arange(2 * n),
        kinds=kinds,
        refs=refs,
        places=list(range(2 * n)),
        pre=[],
        held=[],
        before=0,
        capacity=0,
        warm=[],
        reserved=np.zeros(2 * n),
    )
    start = time.perf_counter()
    simulate(program, sizes)
    return 2 * n, time.perf_counter() - start


def _bounds(predictor, key, batch):  # type: ignore[no-untyped-def]
    from traceparse.analysis.predict_capacity import curve

    row = curve(predictor, key, [batch]).iloc[0]
    return int(row["peak_bytes"]), int(row["low_bytes"]), int(row["high_bytes"])


def _markdown(rows: list[dict], fits: list[dict]) -> str:  # type: ignore[type-arg]
    import tensorflow as tf  # only for the version line

    lines = [
        "# Predicting the peak at another batch size (issue 40)",
        "",
        "Made by `python benchmarks/bench_predict.py` with TensorFlow "
        f"{tf.__version__} on CPU (the `mklcpu` BFC allocator, oneDNN on); models in "
        "`benchmarks/predict_models.py`, each captured at B, 2B and 4B in a process of its "
        "own (a warm-up step, then 3 marked `train_on_batch` steps). Sizes in MiB; error = "
        "predicted / real - 1. Goal: 5% (eager) or 10% (compiled) from one capture, 2% "
        "from two.",
        "",
        "| model | from batch | to batch | found B | real | predicted | low | high | error "
        "| within goal | real in bounds | seconds |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | :---: | ---: |",
    ]
    for r in rows:
        name = r["model"] + (" (XLA)" if r["compiled"] else "")
        lines.append(
            f"| {name} | {r['from']} | {r['to']} | {r['found_batch']} | {mib(r['real'])} "
            f"| {mib(r['predicted'])} | {mib(r['low'])} | {mib(r['high'])} "
            f"| {r['error']:+.1%} | {'yes' if r['within_goal'] else 'no'} "
            f"| {'yes' if r['in_bounds'] else 'no'} | {r['seconds']:.2f} |"
        )
    inside = sum(r["in_bounds"] for r in rows)
    met = sum(r["within_goal"] for r in rows)
    lines += [
        "",
        f"Real peak within the predicted bounds: {inside} of {len(rows)} cases; "
        f"within the goal: {met} of {len(rows)}.",
        "",
    ]
    if fits:
        lines += [
            "## Capacity answers",
            "",
            "Capacity halfway between the real peaks at 2B and 4B; N = the largest batch "
            "that fits by the prediction from the B capture; the model then captured at N "
            "and N + 1.",
            "",
            "| model | capacity | N | predicted at N | real at N | N fits | real at N+1 "
            "| bounds at N+1 | N+1 over, or within bounds |",
            "| --- | ---: | ---: | ---: | ---: | :---: | ---: | ---: | :---: |",
        ]
        for f in fits:
            if f["largest"] is None:
                lines.append(f"| {f['model']} | {mib(f['capacity'])} | none | | | | | | |")
                continue
            lines.append(
                f"| {f['model']} | {mib(f['capacity'])} | {f['largest']} "
                f"| {mib(f['predicted_at_n'])} | {mib(f['real_at_n'])} "
                f"| {'yes' if f['n_fits'] else 'no'} | {mib(f['real_next'])} "
                f"| {mib(f['low_next'])} to {mib(f['high_next'])} "
                f"| {'yes' if f['next_ok'] else 'no'} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
