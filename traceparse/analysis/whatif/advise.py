"""What would save memory: the changes worth trying on a capture (``candidates``),
each predicted and ranked by bytes saved at the peak, with its cost in one line
and the largest batch it allows (``advice``; ``traceparse advise``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from traceparse.analysis.predict import Predictor
from traceparse.analysis.whatif.change import Change
from traceparse.analysis.whatif.facts import Facts, Key, facts_of, layer_names
from traceparse.analysis.whatif.replay import WhatIf


def half_policy(facts: Facts) -> str:
    """The mixed-precision policy to advise first: ``mixed_float16`` where the
    capture ran on a GPU, ``mixed_bfloat16`` elsewhere. Keras' mixed precision
    guide (keras.io/guides/mixed_precision: "on GPUs, use mixed_float16";
    bfloat16 computes natively only on TPUs, recent CPUs and GPUs of compute
    capability 8.0 and later, which the capture does not say) gives the rule;
    the bytes at the peak are the same either way, less float16's loss scaling."""
    gpu = any(str(allocator).startswith("GPU_") for _, allocator in facts.keys)
    return "mixed_float16" if gpu else "mixed_bfloat16"


# The changes ``advise`` tries alone, and the combinations it adds.
def candidates(facts: Facts) -> list[Change]:
    out: list[Change] = []
    mixed = facts.mixed
    half = half_policy(facts)
    out.append(Change(precision="float32" if mixed else half))
    if not mixed:
        out.append(
            Change(precision="mixed_bfloat16" if half == "mixed_float16" else "mixed_float16")
        )
    current = facts.optimizer or "sgd"
    for name in ("sgd", "momentum", "adafactor") if facts.trains else ():
        if name != current:
            out.append(Change(optimizer=name))
    has_layers = bool(layer_names(facts)) and facts.crosses.any()
    if has_layers:
        out.append(Change(remat=("all",)))
    out.append(
        Change(
            precision=None if mixed else half,
            optimizer="sgd" if current != "sgd" and facts.trains else None,
            remat=("all",) if has_layers else None,
        )
    )
    if facts.earlier:
        out.append(Change(fresh=True))
    # Each change once: where there is nothing else to combine the combination is
    # one of the single changes already listed.
    unique: list[Change] = []
    for change in out:
        if change and change not in unique:
            unique.append(change)
    return unique


COSTS = {
    "precision": "numerics: 16-bit activations and gradients (float16 needs loss scaling); "
    "speed gains only where the hardware has 16-bit units",
    "float32": "numerics: none lost; compute and bandwidth in float32",
    "optimizer": "convergence: a different optimizer may need other learning rates or more steps",
    "remat": "compute: the rematerialised layers run their forward pass twice (about a third "
    "more step time for all layers)",
    "fresh": "none to the program: run it in a fresh process (restart the notebook's kernel), "
    "or delete the earlier models and call keras.backend.clear_session() before building it",
}


def cost_of(change: Change) -> str:
    parts = []
    if change.precision:
        parts.append(COSTS["float32" if change.precision == "float32" else "precision"])
    if change.optimizer:
        parts.append(COSTS["optimizer"])
    if change.remat:
        parts.append(COSTS["remat"])
    if change.fresh:
        parts.append(COSTS["fresh"])
    return "; ".join(parts)


def advice(
    predictor: Predictor,
    keys: list[Key],
    capacity: int | None,
    *,
    search: bool = True,
    facts: Facts | None = None,
) -> list[dict[str, Any]]:
    """Each candidate change (``candidates``) on ``keys``: its predicted peak and
    bounds at the captured batch, bytes saved against the capture, its cost, and
    the largest batch that fits ``capacity`` (default: the allocator's), ranked by
    bytes saved (largest first) per allocator. ``search=False`` leaves the largest
    batch None: the search replays the allocator model at several batches per
    change, where the rest are counter replays at the captured batch (the report
    skips it past its replay budget). ``facts``: ``facts_of(predictor)``, when the
    caller has it already.

    The largest batch is ``capacity_fit``'s answer (the allocator model's search,
    ``_largest``, from the captured batch, on the change's shared replays) without
    the two searches of the bounds and the breakdown at the batch it also makes,
    which no row shows: a third of the replays."""
    from traceparse.analysis.predict.capacity import model_largest

    facts = facts if facts is not None else facts_of(predictor)
    batch = predictor.batch
    base = predictor.bounds(batch)
    # The capacity each allocator is fitted to: ``capacity``, else the capture's (NA
    # where its events name no allocator: None here).
    own = {
        (row.host, row.allocator): None if pd.isna(row.capacity_bytes) else row.capacity_bytes
        for row in predictor.base.peak.itertuples()
    }
    caps = {key: capacity if capacity is not None else own.get(key) for key in keys}
    caps = {key: None if cap is None or cap != cap else int(cap) for key, cap in caps.items()}

    def largest_of(made: Predictor, key: Key) -> int | None:
        cap = caps[key]
        return None if not search or cap is None else model_largest(made, key, cap, batch)

    # Each change's largest batch is read against the program's own, unchanged.
    as_captured = {key: largest_of(predictor, key) for key in keys}
    rows: list[dict[str, Any]] = []
    for change in candidates(facts):
        made = WhatIf.of(predictor, change, facts)
        found = made.bounds(batch)
        for key in keys:
            _, peak, low, high = found[key]
            rows.append(
                {
                    "host": key[0],
                    "allocator": key[1],
                    "batch_size": batch,
                    "change": change.label(),
                    "captured_peak_bytes": base[key][1],
                    "peak_bytes": peak,
                    "low_bytes": low,
                    "high_bytes": high,
                    "saved_bytes": base[key][1] - peak,
                    "largest_batch": largest_of(made, key),
                    "captured_largest_batch": as_captured[key],
                    "capacity_bytes": caps[key],
                    "cost": cost_of(change),
                    "notes": made.resized.notes,
                    "failed_request": (
                        predictor.failed[key][0].label() if key in predictor.failed else None
                    ),
                }
            )
    rows.sort(key=lambda r: (str(r["host"]), str(r["allocator"]), -r["saved_bytes"]))
    return rows
