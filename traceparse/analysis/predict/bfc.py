"""A model of TensorFlow's BFC allocator: where each chunk goes, and so how many
bytes its in-use counter counts (tensorflow/core/common_runtime/bfc_allocator.cc).

The rules kept (those that decide chunk sizes and the counter):

- a request is rounded up to 256 bytes;
- the free chunk chosen is the smallest that fits, the lowest address among
  equals (bins by size, each ordered by size then address: the first fit found
  from the request's bin up is the global best fit);
- it is split, the request at its start, only when it is at least twice the
  rounded request or would waste 128 MiB or more; otherwise it is handed out
  whole (and the counter counts it whole);
- a freed chunk merges with its free neighbours in the same region;
- when nothing fits the allocator adds a region: an allocator that grows on
  demand starts at 2 MiB, doubles the region size until the request fits, and
  after a region it did not have to enlarge doubles it for the next one;
- each region lies below the previous one (the system maps large blocks top
  down), so among equal free chunks the newest region's comes first.

Left out: the memory limit, garbage collection and retries (an allocator near
its limit), stream-ordered frees (off by default), and region coalescing (off
for the CPU and the plain GPU sub-allocators).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import TypeVar

import numpy as np

Sizes = TypeVar("Sizes", int, np.ndarray)

GRANULE = 256
# bfc_allocator.cc kMaxInternalFragmentation: a larger waste always splits.
MAX_INTERNAL_FRAGMENTATION = 128 << 20
# The first region of an allocator that grows on demand (allow_growth).
FIRST_REGION = 2 << 20
# Free chunks are kept as one sortable int: size in the high bits, address low
# (room for regions far beyond any memory: a capacity search asks absurd sizes).
_ADDRESS_BITS = 96
_ADDRESS_MASK = (1 << _ADDRESS_BITS) - 1


def rounded_bytes(n: int) -> int:
    """``n`` rounded up to the granule (at least one granule)."""
    return max(GRANULE, -(-n // GRANULE) * GRANULE)


def is_region(size: Sizes) -> Sizes:
    """Whether ``size`` is one a growing allocator gives a region (2 MiB doubled);
    elementwise for an integer array."""
    return (size >= FIRST_REGION) & ((size & (size - 1)) == 0)


class BFC:
    """One allocator's chunks, free list and regions; ``in_use`` is its counter
    (``bytes_allocated`` in the capture's memory events)."""

    def __init__(self, first_region: int = FIRST_REGION) -> None:
        self.region = first_region  # the size of the next region it adds
        self.in_use = 0
        self.regions: list[int] = []  # sizes, in the order added
        self._free: list[int] = []  # (size << _ADDRESS_BITS) | address, sorted
        self._size: dict[int, int] = {}  # every chunk: address -> size
        self._used: set[int] = set()
        self._ends: dict[int, int] = {}  # every chunk: end address -> address
        self._next_base = 1 << (_ADDRESS_BITS - 1)

    @property
    def total(self) -> int:
        """Bytes in all regions."""
        return sum(self.regions)

    def largest_free(self) -> int:
        return self._free[-1] >> _ADDRESS_BITS if self._free else 0

    def allocate(self, requested: int) -> tuple[int, int]:
        """(address, chunk size) for a request of ``requested`` bytes."""
        need = rounded_bytes(requested)
        at = bisect_left(self._free, need << _ADDRESS_BITS)
        if at == len(self._free):
            self._extend(need)
            at = bisect_left(self._free, need << _ADDRESS_BITS)
        key = self._free.pop(at)
        size, address = key >> _ADDRESS_BITS, key & _ADDRESS_MASK
        if size >= 2 * need or size - need >= MAX_INTERNAL_FRAGMENTATION:
            self._put(address, need)
            self._put(address + need, size - need)
            insort(self._free, ((size - need) << _ADDRESS_BITS) | (address + need))
            size = need
        self._used.add(address)
        self.in_use += size
        return address, size

    def free(self, address: int) -> None:
        """Frees the chunk at ``address``, merged with its free neighbours."""
        size = self._size[address]
        self._used.remove(address)
        self.in_use -= size
        after = address + size
        if after in self._size and after not in self._used:
            self._drop_free(after)
            size += self._forget(after)
        before = self._ends.get(address)
        if before is not None and before not in self._used:
            self._drop_free(before)
            self._forget(address)
            size += self._size[before]
            address = before
        self._put(address, size)
        insort(self._free, (size << _ADDRESS_BITS) | address)

    def add_region(self, size: int) -> None:
        """A free region of ``size`` bytes, outside the doubling sequence (a chunk the
        allocator is known to have had, made by a history not modelled)."""
        self._region(rounded_bytes(size))

    def _extend(self, need: int) -> None:
        grew = False
        while need > self.region:
            self.region *= 2
            grew = True
        size = self.region
        if not grew:
            self.region *= 2
        self._region(size)

    def _region(self, size: int) -> None:
        # Each region below the last, as the system's allocator maps large blocks
        # (top down), with a gap: chunks of two regions are never neighbours.
        address = self._next_base - size
        self._next_base = address - GRANULE
        self.regions.append(size)
        self._put(address, size)
        insort(self._free, (size << _ADDRESS_BITS) | address)

    def _put(self, address: int, size: int) -> None:
        old = self._size.get(address)
        if old is not None:
            del self._ends[address + old]
        self._size[address] = size
        self._ends[address + size] = address

    def _forget(self, address: int) -> int:
        size = self._size.pop(address)
        del self._ends[address + size]
        return size

    def _drop_free(self, address: int) -> None:
        key = (self._size[address] << _ADDRESS_BITS) | address
        del self._free[bisect_left(self._free, key)]
