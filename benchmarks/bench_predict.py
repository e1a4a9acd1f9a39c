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

``--repeats K`` measures the run-to-run noise instead: each model is captured
K times at B, 2B and 4B, each in a fresh process (the benchmark's own capture
is repeat 0, the others are cached as ``<model>_<batch>_r<i>``); the spread of
the real peak, and each of the 12 cases predicted from every repeat of its
input against the median and every repeat of the real peak, replace the
section ``## Run-to-run noise`` of the output (the other sections are kept).
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


def capture(model: str, batch: int, repeat: int = 0) -> Path:
    """The cached capture of ``model`` at ``batch``, made if missing.

    ``repeat`` > 0 names another run of the same program in a fresh process
    (``<model>_<batch>_r<repeat>``); repeat 0 is the benchmark's own capture.
    """
    logdir = CACHE / (f"{model}_{batch}" + (f"_r{repeat}" if repeat else ""))
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
    parser.add_argument(
        "--repeats",
        type=int,
        default=0,
        metavar="K",
        help="capture each model K times at B, 2B, 4B and report the run-to-run spread",
    )
    args = parser.parse_args(argv)
    if args.repeats:
        section = _repeats_markdown(args.models, args.repeats)
        _write_section(args.out, REPEATS_HEADING, section)
        print(f"wrote {args.out}")
        return 0
    if args.held_out:
        out = args.out if args.out != HERE / "PREDICT_RESULTS.md" else HERE / "PREDICT_HELD_OUT.md"
        out.write_text(_held_out_markdown())
        print(f"wrote {out}")
        return 0

    import traceparse
    from traceparse.analysis.predict import capacity_fit
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
    kept = _section(args.out, REPEATS_HEADING)  # the --repeats run's section stays
    args.out.write_text(
        _markdown(rows, fits) + _pairs_markdown(pairs) + _model_markdown(args.models) + kept
    )
    print(f"wrote {args.out}")
    return 0


REPEATS_HEADING = "## Run-to-run noise"


def _section(out: Path, heading: str) -> str:
    """The part of ``out`` from ``heading`` to the end ("" when absent): that section
    and any written by hand after it."""
    if not out.exists():
        return ""
    text = out.read_text()
    at = text.find("\n" + heading + "\n")
    return "" if at < 0 else text[at:]


def _write_section(out: Path, heading: str, section: str) -> None:
    """``out`` with the section under ``heading`` (up to the next ``## `` heading, so a
    section written by hand after it stays) replaced by ``section``, or added at the
    end."""
    text = out.read_text() if out.exists() else ""
    at = text.find("\n" + heading + "\n")
    before, after = (text, "") if at < 0 else (text[:at], text[at + 1 :])
    nxt = after.find("\n## ", len(heading))
    rest = "" if at < 0 or nxt < 0 else after[nxt:]
    out.write_text(before.rstrip("\n") + "\n\n" + section.strip("\n") + "\n" + rest)


def _repeats(models: list[str], k: int) -> dict[tuple[str, int], list]:  # type: ignore[type-arg]
    """Each model at B, 2B and 4B, captured ``k`` times (repeat 0 first), loaded.

    The captures are made repeat by repeat, so an interrupted run leaves whole
    repeats of every model."""
    import traceparse

    paths: dict[tuple[str, int], list[Path]] = {}
    for r in range(k):
        for model in models:
            for m in (1, 2, 4):
                start = time.perf_counter()
                paths.setdefault((model, MODELS[model] * m), []).append(
                    capture(model, MODELS[model] * m, r)
                )
                print(
                    f"{model:12s} {MODELS[model] * m:4d} repeat {r} "
                    f"({time.perf_counter() - start:.0f} s)",
                    flush=True,
                )
    return {key: [traceparse.load(str(p)) for p in ps] for key, ps in paths.items()}


def _requested_at_peak(profile) -> int:  # type: ignore[no-untyped-def]
    """The requested bytes of the capture's allocations live at its peak."""
    a = profile.allocations
    at = profile.peak["time_ps"].iloc[int(profile.peak["in_use_bytes"].argmax())]
    live = (a["alloc_ps"] <= at) & (a["free_ps"].isna() | (a["free_ps"] > at))
    return int(a.loc[live, "requested_bytes"].sum())


def _repeats_markdown(models: list[str], k: int) -> str:
    """The run-to-run spread of the real peak, and the 12 cases predicted from each
    repeat of their input against the median and every repeat of the real peak."""
    import numpy as np

    profiles = _repeats(models, k)
    real = {key: [real_peak(p) for p in ps] for key, ps in profiles.items()}
    asked = {key: [_requested_at_peak(p) for p in ps] for key, ps in profiles.items()}
    lines = [
        REPEATS_HEADING,
        "",
        f"Made by `python benchmarks/bench_predict.py --repeats {k}`: each model captured "
        f"{k} times at B, 2B and 4B, each capture in a fresh process (repeat 0 is the "
        "capture of the tables above; the others are cached as `<model>_<batch>_r<i>`). "
        "The same program at the same batch reaches a different peak from run to run: "
        "ops that run in parallel (the optimizer's updates among them) allocate and free "
        "in a different order, which leaves different free chunks. Sizes in MiB.",
        "",
        "### The real peak, run to run",
        "",
        "spread = (max - min) / median. requested at the peak: the bytes requested by the "
        "capture's allocations live at the moment of each repeat's peak (what the program "
        "asked for, before the allocator's rounding and choice of chunk; allocations held "
        "from before the capture are in the peak but not here), lowest to highest.",
        "",
        "| model | batch | peaks (repeat 0, 1, ...) | min | median | max | spread "
        "| requested at the peak |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for (model, batch), peaks in real.items():
        med = float(np.median(peaks))
        ask = asked[(model, batch)]
        lines.append(
            f"| {model} | {batch} | {', '.join(mib(p) for p in peaks)} | {mib(min(peaks))} "
            f"| {mib(med)} | {mib(max(peaks))} | {(max(peaks) - min(peaks)) / med:.1%} "
            f"| {mib(min(ask))} to {mib(max(ask))} |"
        )
    lines += [
        "",
        "### The 12 cases from each repeat",
        "",
        f"Each case predicted {k} times, once from each repeat of its input capture (from "
        "two captures: repeat i of B with repeat i of 2B), against the median real peak "
        "at the target batch. median error = the median prediction / the median real "
        "peak - 1; errors vs median: each prediction's against the median real peak "
        "(lowest to highest); errors vs every repeat: each prediction against each "
        f"repeat of the real peak ({k} x {k}); in bounds: the pairs (prediction, real "
        "repeat) whose real peak lies within that prediction's bounds.",
        "",
        "| model | from batch | to batch | predictions | low to high (widest) | real median "
        "| median error | errors vs median | errors vs every repeat | goal | median within "
        "goal | in bounds |",
        "| --- | ---: | ---: | --- | --- | ---: | ---: | --- | --- | ---: | :---: | ---: |",
    ]
    met, covered, pairs = 0, 0, 0
    cases = [("one", 1, 4, None), ("one", 4, 1, None), ("two", 1, 4, 2)]
    for model in models:
        b, compiled = MODELS[model], model in COMPILED
        for kind, src, dst, other in cases:
            reals = real[(model, b * dst)]
            med_real = float(np.median(reals))
            preds, lows, highs = [], [], []
            for r in range(k):
                other_profile = profiles[(model, b * other)][r] if other else None
                row = profiles[(model, b * src)][r].predict(b * dst, other=other_profile)
                row = row.iloc[0]
                preds.append(int(row["predicted_peak_bytes"]))
                lows.append(int(row["low_bytes"]))
                highs.append(int(row["high_bytes"]))
            error = float(np.median(preds)) / med_real - 1
            vs_median = [p / med_real - 1 for p in preds]
            vs_each = [p / q - 1 for p in preds for q in reals]
            inside = sum(lo <= q <= hi for lo, hi in zip(lows, highs, strict=True) for q in reals)
            goal = GOALS["two"] if kind == "two" else GOALS["one"][compiled]
            met += abs(error) <= goal
            covered += inside
            pairs += k * k
            source = f"{b * src}" + (f" + {b * other}" if other else "")
            name = model + (" (XLA)" if compiled else "")
            lines.append(
                f"| {name} | {source} | {b * dst} | {', '.join(mib(p) for p in preds)} "
                f"| {mib(max(lows))} to {mib(min(highs))} ({mib(min(lows))} to "
                f"{mib(max(highs))}) | {mib(med_real)} | {error:+.1%} "
                f"| {min(vs_median):+.1%} to {max(vs_median):+.1%} "
                f"| {min(vs_each):+.1%} to {max(vs_each):+.1%} | {goal:.0%} "
                f"| {'yes' if abs(error) <= goal else 'no'} | {inside} of {k * k} |"
            )
            print(
                f"{model:12s} {source:>9s} -> {b * dst:<4d} real median {mib(med_real)} "
                f"predictions {', '.join(mib(p) for p in preds)} error {error:+.1%}",
                flush=True,
            )
    lines += [
        "",
        f"The median prediction within the goal of the median real peak: {met} of "
        f"{len(models) * len(cases)} cases; real repeats within the bounds of each "
        f"prediction: {covered} of {pairs} pairs. (low to high: the bounds every "
        "prediction shares, and in brackets the widest.)",
        "",
    ]
    return "\n".join(lines)


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
    from traceparse.analysis.predict.simulate import simulate
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

    from traceparse.analysis.predict.simulate import ALLOC, FREE, Program, simulate

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
    from traceparse.analysis.predict import curve

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
