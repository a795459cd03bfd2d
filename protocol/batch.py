"""Entries as a batch carries them (docs/protocol.md §3, §7): ``WireEntry``, what one costs
against byte credit, and how many fit in one batch — within credit, ``MAX_BATCH_ENTRIES`` and
one frame once encoded.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.frames import MAX_FRAME_BYTES

__all__ = ["MAX_BATCH_ENTRIES", "WireEntry", "batch_room", "entry_cost"]

MAX_BATCH_ENTRIES = 1024

WireEntry = tuple[bytes, bytes | None]
"""An entry on the wire: its raw header bytes and its payload bytes, or None when absent —
exactly as ``Entry.raw`` and ``Entry.payload`` hold them."""


def entry_cost(item: WireEntry) -> int:
    """The bytes one entry counts against byte credit: its header plus its payload."""
    header, payload = item
    return len(header) + (len(payload) if payload is not None else 0)


# The encoded size of a batch body beyond its entries: array, type, entries array header, done.
_BATCH_OVERHEAD = 6


def _bin_size(n: int) -> int:
    return n + (2 if n < 0x100 else 3 if n < 0x10000 else 5)


def _encoded_size(item: WireEntry) -> int:
    header, payload = item
    return 1 + _bin_size(len(header)) + (1 if payload is None else _bin_size(len(payload)))


def batch_room(items: Sequence[WireEntry], *, entries: int, nbytes: int) -> int:
    """How many leading ``items`` fit in one batch: within ``entries`` and ``nbytes`` of
    credit, ``MAX_BATCH_ENTRIES``, and ``MAX_FRAME_BYTES`` once encoded."""
    count, cost, size = 0, 0, _BATCH_OVERHEAD
    for item in items[: min(entries, MAX_BATCH_ENTRIES)]:
        cost += entry_cost(item)
        size += _encoded_size(item)
        if cost > nbytes or size > MAX_FRAME_BYTES:
            break
        count += 1
    return count
