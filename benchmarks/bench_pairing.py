"""Pairing allocations with their frees on addresses chosen to collide (issue 37,
item 2): the compiled pair_events against a flood, and its scaling.

The compiled loop keeps (allocator, address) in an open-addressing table. Its
slot hash used to be a fixed bijection of the address, so addresses could be
chosen whose hashes share their low 32 bits: every one in one slot, and linear
probing then costs n^2/2 (120,000 such allocations: 23 s of ``summary``). The
hash is now keyed per process (``_native.c``, ``slot_hash``). This writes the
addresses that flood the old hash (``colliding_addresses``) and times
``native.pair_events`` on them and on random addresses, at n and 10n, and the
numpy path (a sort) on the same.

    python benchmarks/bench_pairing.py [--events 120000 1200000]

Wants: colliding / random <= 2 at 120,000; time(10n) / time(n) <= 12.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from traceparse.decode import native
from traceparse.tables.build import _pair_by_sorting

_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def _unshift(y: int, s: int) -> int:
    x = y
    for _ in range(64 // s + 1):
        x = y ^ (x >> s)
    return x


def _unmix(h: int) -> int:
    """The inverse of the splitmix64 finalizer the unkeyed slot hash used."""
    x = _unshift(h, 31)
    x = x * pow(_M2, -1, 1 << 64) & _MASK
    x = _unshift(x, 27)
    x = x * pow(_M1, -1, 1 << 64) & _MASK
    return _unshift(x, 30)


def colliding_addresses(n: int, owner: int = 0) -> np.ndarray:
    """``n`` distinct addresses (int64) whose unkeyed slot hash (before issue 37)
    has 32 low zero bits: one slot in any table of up to 2**32 slots."""
    offset = _GOLDEN * (owner + 1)
    out = [(_unmix((j + 1) << 32) - offset) & _MASK for j in range(n)]
    return np.array(out, dtype=np.uint64).view(np.int64)


def random_addresses(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-(2**63), 2**63 - 1, n, dtype=np.int64)


def events(addresses: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each address allocated, then all freed in the same order: the table holds
    every address at once (the worst case for probing)."""
    n = len(addresses)
    owner = np.zeros(2 * n, dtype=np.int32)
    address = np.concatenate([addresses, addresses])
    known = np.ones(2 * n, dtype=bool)
    is_alloc = np.zeros(2 * n, dtype=bool)
    is_alloc[:n] = True
    return owner, address, known, is_alloc


def timed(pair: object, args: tuple[np.ndarray, ...], turns: int = 3) -> float:
    """Least CPU seconds of ``turns`` calls."""
    best = float("inf")
    for _ in range(turns):
        start = time.process_time()
        pair(*args)  # type: ignore[operator]
        best = min(best, time.process_time() - start)
    return best


def measure(sizes: list[int]) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = {}
    kinds = {"colliding": colliding_addresses, "random": random_addresses}
    for name, make in kinds.items():
        for n in sizes:
            args = events(make(n))
            if native.available():
                found.setdefault(f"compiled {name}", {})[n] = timed(native.pair_events, args)
            found.setdefault(f"numpy {name}", {})[n] = timed(_pair_by_sorting, args)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs=2, default=[120_000, 1_200_000])
    args = parser.parse_args(argv)
    small, large = args.events
    found = measure([small, large])
    print(json.dumps({k: {str(n): round(s, 4) for n, s in v.items()} for k, v in found.items()}))
    for kind, times in found.items():
        ratio = times[large] / max(times[small], 1e-6)
        print(
            f"{kind}: {times[small]:.4f} s at {small:,}, {times[large]:.4f} s at {large:,}: "
            f"{ratio:.1f}x for {large / small:.0f}x the allocations"
        )
    for path in ("compiled", "numpy"):
        if f"{path} colliding" in found:
            flood = found[f"{path} colliding"][large] / max(found[f"{path} random"][large], 1e-6)
            print(f"{path}: colliding / random at {large:,}: {flood:.2f}x (want <= 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
