"""What the variable matching gives at the peak, and the big kernel's bytes."""

from __future__ import annotations

from collections import Counter

from traceparse import Profile
from traceparse.analysis.variable_match import (
    covered_at,
    match_variables,
    named_at,
)

BIG = 1024 * 4096 * 4  # the big kernel, and each of its Adam slots


BIAS = 4096 * 4


def roles_at_peak(prof: Profile) -> dict[tuple[str, str], int]:
    """(layer, role) -> bytes at each allocator's peak, as ``Profile.breakdown`` is to
    count them: named allocations live then (their request), plus the variables that
    were allocated before the capture and are not held by one of those."""
    variables = prof.variables
    match = match_variables(prof.allocations, variables, prof.frees_without_allocation)
    live = prof.live_at_peak()
    out: Counter[tuple[str, str]] = Counter()
    for _, peak in prof.peak.iterrows():
        time_ps, allocator = int(peak["time_ps"]), peak["allocator"]
        mine = live.index[live["allocator"].astype(object) == allocator]
        named = named_at(match.named, time_ps)
        named = named[named.index.isin(mine)]
        for (layer, role), size in (
            named.join(prof.allocations["requested_bytes"])
            .groupby(["layer", "role"], observed=True)["requested_bytes"]
            .sum()
            .items()
        ):
            out[(str(layer), str(role))] += int(size)
        before = (
            variables["at_start"].to_numpy(dtype=bool)
            & variables["at_stop"].to_numpy(dtype=bool)
            & variables["traced"].to_numpy(dtype=bool)
            & (variables["allocator"].astype(object) == allocator).to_numpy(dtype=bool)
            & ~covered_at(variables, match.covered, time_ps)
        )
        for (layer, role), size in (
            variables[before]
            .groupby(["layer", "role"], observed=True)["estimated_bytes"]
            .sum()
            .items()
        ):
            out[(str(layer), str(role))] += int(size)
    return dict(out)


def assert_big(roles: dict[tuple[str, str], int]) -> None:
    """The issue's answer: 16 MiB of weights, 32 MiB of optimizer state (within the
    biases' bytes, which CPU captures never trace)."""
    assert BIG <= roles.get(("big", "weight"), 0) <= BIG + BIAS, roles
    assert 2 * BIG <= roles.get(("big", "optimizer"), 0) <= 2 * (BIG + BIAS), roles
