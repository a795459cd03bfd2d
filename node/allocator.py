"""Freed memory given back to the system after a large batch of the text index, and one
heap for every thread (docs/operations.md §Memory).

glibc's ``malloc`` serves a block of 128 KiB or more with a mapping of its own, returned to the
system when freed — but each such free raises that threshold (up to 32 MiB), after which
blocks that size come from the heap and stay resident once freed.  A merge of the text index
builds numpy arrays of megabytes, so a node's resident memory grew with the largest merge it
had made (a 200,000-entry bundle import: 126 → 143 MiB from a quarter of it to the end).
Fixing the thresholds instead (1 MiB mapped, the heap trimmed past 8 MiB free) kept it flat but
made every find map and fault in its score arrays: 10–20 % slower at a million SRs.  So the
thresholds stay glibc's, and after a batch of many docs (a sync batch, an import's
transaction; not a single write) or a merge of as many (single writes' segments merging) the
writer asks glibc to hand back what is free (``malloc_trim``).

The heaps: glibc gives threads heaps of their own (arenas, up to eight per core).  The
writer's grew during the text index's largest merge and stayed resident after ``malloc_trim``
(a 200,000-entry bundle import: 114 → 131 MiB from a quarter of it to the end, the step at
that merge); with one heap for every thread the same import stays at 109 → 108 MiB, and the
ingest and sync benchmarks measured no cost (docs/benchmarks.md §sync, *One heap*).  So a
process that opens a node asks glibc for one arena (``M_ARENA_MAX`` 1) before the store's
first thread allocates — unless its environment sets ``MALLOC_ARENA_MAX``, which glibc obeys
as it is.  Other C libraries (musl's, macOS's) have neither the threshold, the arenas nor
these calls: nothing is done there.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

__all__ = ["give_back", "one_arena"]

M_ARENA_MAX = -8  # mallopt's parameter for the most arenas (glibc's malloc.h)


@functools.cache
def _libc_call(name: str, *argtypes: Any) -> Any:
    """The C library's function ``name`` (among the process's symbols: no search for the
    library, which takes a child process); None where it has none."""
    try:
        call = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):  # no symbols to look in, or a C library without it
        return None
    call.argtypes, call.restype = list(argtypes), ctypes.c_int
    return call


@functools.cache
def one_arena() -> bool:
    """Have every thread that has not allocated yet allocate from the main heap, which
    ``give_back`` trims whole; whether it was asked (not where ``MALLOC_ARENA_MAX`` is set)."""
    mallopt = _libc_call("mallopt", ctypes.c_int, ctypes.c_int)
    if mallopt is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(mallopt(M_ARENA_MAX, 1) == 1)


def give_back() -> bool:
    """Return the process's free heap memory to the system; whether any was."""
    trim = _libc_call("malloc_trim", ctypes.c_size_t)
    return trim is not None and trim(0) == 1
