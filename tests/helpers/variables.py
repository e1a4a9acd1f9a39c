"""What the variable matching gives at the peak, and the big kernel's bytes."""

from __future__ import annotations

from traceparse import Profile

BIG = 1024 * 4096 * 4  # the big kernel, and each of its Adam slots


BIAS = 4096 * 4


def roles_at_peak(prof: Profile) -> dict[tuple[str, str], int]:
    """(layer, role) -> bytes of the variables ``Profile.breakdown`` names at each
    allocator's peak: from before the capture, and allocations of the capture that
    hold one; ``layers()`` agrees on the weights."""
    rows = prof.breakdown
    named = rows[rows["variable"].notna()]
    sums = named.groupby(["layer", "role"], observed=True)["bytes"].sum()
    out = {(str(layer), str(role)): int(size) for (layer, role), size in sums.items()}
    layers = prof.layers().set_index("layer")
    for (layer, role), size in out.items():
        if role == "weight":
            assert int(layers.loc[layer, "weight_bytes"]) == size, (layer, out)
    return out


def assert_big(roles: dict[tuple[str, str], int]) -> None:
    """The issue's answer: 16 MiB of weights, 32 MiB of optimizer state (within the
    biases' bytes, which CPU captures never trace)."""
    assert BIG <= roles.get(("big", "weight"), 0) <= BIG + BIAS, roles
    assert 2 * BIG <= roles.get(("big", "optimizer_state"), 0) <= 2 * (BIG + BIAS), roles
