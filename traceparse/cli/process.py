"""Memory settings for the process of a command that reads captures.

Such a command owns its process, and its work on a large capture is a few
hundred arrays of a row each, tens to hundreds of MB apiece, made and freed
in turn. Two defaults make each of them cost fresh memory from the kernel,
which zeroes it a page at a time:

- glibc gives an allocation above its mmap threshold (which it moves between
  128 KiB and 32 MiB) a mapping of its own and unmaps it when it is freed;
- NumPy asks for transparent huge pages for arrays of 4 MiB or more, and the
  kernel may stop to compact memory to find them.

On a 10M-event capture (1.2 GB) these were 6 of the 19 CPU seconds of
``traceparse summary``, and made the time per MB grow with the file
(``benchmarks/RESULTS.md``, "Speed"). With freed memory kept for reuse, the
process's peak RSS grows by about 60 MB there.

In a user's process the library takes NumPy's arrays from a pool of its own
instead, inside its calls only (``traceparse.core.memory``). A command owns its
process, and glibc keeping freed memory covers more: NumPy's sort buffers and
pandas' hash tables as well (on the 10M-event capture ``traceparse summary``
spends about 1 s less in the kernel than with the pool, and holds 70 MiB less).
Where glibc keeps freed memory the pool is turned off: two caches would each
hold their own peak.

Only the commands that read captures change these settings (``Command.reads_captures``):
``run`` and ``demo`` run the user's code or TensorFlow, which keep their own.
A setting the user made in the environment is left as it is. A library user
gets the same by starting Python with ``LIBRARY_ENVIRONMENT`` set.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

from traceparse.core import memory

# mallopt(3) parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Allocations under this come from the heap and go back to it when freed: more
# than the largest array of a row each of a 10M-event capture (80 MB).
_KEEP_BELOW = 1 << 30

# The same settings as environment variables, read when Python, NumPy and
# traceparse start.
LIBRARY_ENVIRONMENT = {
    "MALLOC_MMAP_THRESHOLD_": str(_KEEP_BELOW),
    "MALLOC_TRIM_THRESHOLD_": str(_KEEP_BELOW),
    "NUMPY_MADVISE_HUGEPAGE": "0",
    "TRACEPARSE_NO_POOL": "1",
}


def settle_for_captures() -> dict[str, bool]:
    """Keep freed memory for reuse and do without huge pages, in this process;
    says which of the two it set (False: not applicable, or the user's own)."""
    malloc = _keep_freed_memory()
    if malloc:
        memory.enable(False)
    return {"malloc": malloc, "numpy_hugepages_off": _numpy_small_pages()}


def _keep_freed_memory() -> bool:
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return False
    if any(name in os.environ for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        libc = ctypes.CDLL(None)
        # mallopt returns 1 on success; a fixed threshold also stops glibc moving it.
        return bool(
            libc.mallopt(_M_MMAP_THRESHOLD, _KEEP_BELOW)
            and libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_BELOW)
        )
    except (OSError, AttributeError):
        return False


def _numpy_small_pages() -> bool:
    # NumPy reads this when it is imported: the commands import it later, in run().
    if "numpy" in sys.modules or "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return False
    os.environ["NUMPY_MADVISE_HUGEPAGE"] = "0"
    return True
