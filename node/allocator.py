"""Freed memory given back to the system after a large batch of the text index
(docs/operations.md §Memory).

glibc's ``malloc`` serves a block of 128 KiB or more with a mapping of its own, returned to the
system when freed — but each such free raises that threshold (up to 32 MiB), after which
blocks that size come from the heap and stay resident once freed.  A merge of the text index
builds numpy arrays of megabytes, so a node's resident memory grew with the largest merge it
had made (a 200,000-entry bundle import: 126 → 143 MiB from a quarter of it to the end).
Fixing the thresholds instead (1 MiB mapped, the heap trimmed past 8 MiB free) kept it flat but
made every find map and fault in its score arrays: 10–20 % slower at a million SRs.  So the
thresholds stay glibc's, and after a batch of many docs (a sync batch, an import's
transaction; not a single write) or a merge of as many (single writes' segments merging) the
writer asks glibc to hand back what is free (``malloc_trim``).  Other C libraries (musl's,
macOS's) have neither the threshold nor the call: nothing is done there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["give_back"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError):  # no C library found, or one without malloc_trim
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def give_back() -> bool:
    """Return the process's free heap memory to the system; whether any was."""
    trim = _malloc_trim()
    return trim is not None and trim(0) == 1
