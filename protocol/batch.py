"""Entries as a batch carries them (docs/protocol.md §3.4, §7): ``WireEntry``, what one costs
against byte credit, and how many fit in one batch — within credit, ``MAX_BATCH_ENTRIES`` and
one frame once encoded.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.frames import MAX_FRAME_BYTES
from protocol.wire import packed_bin_size, packed_str_size

__all__ = ["MAX_BATCH_ENTRIES", "WireEntry", "batch_room", "entry_cost"]

MAX_BATCH_ENTRIES = 1024

WireEntry = tuple[bytes, bytes | str | None]
"""An entry on the wire: its raw header bytes and its payload bytes, or None when absent —
exactly as ``Entry.raw`` and ``Entry.payload`` hold them — or, where both sides offer
``partial``, a workspace tag: the entry travels without its payload, and the tag names the
workspace that payload belongs to (docs/protocol.md §3.4)."""


def entry_cost(item: WireEntry) -> int:
    """The bytes one entry counts against byte credit: its header plus its payload, or its
    tag in UTF-8."""
    header, payload = item
    if isinstance(payload, str):
        return len(header) + len(payload.encode())
    return len(header) + (len(payload) if payload is not None else 0)


# The encoded size of a batch body beyond its entries: array, type, entries array header, done.
# The header is counted as an array16's, three bytes: a batch of fewer than 16 entries, whose
# header is one, cannot reach the frame limit (15 of the largest entries are 248 KiB short).
_BATCH_OVERHEAD = 6


def _encoded_size(item: WireEntry) -> int:
    header, payload = item
    if payload is None:
        tail = 1
    elif isinstance(payload, str):
        tail = packed_str_size(len(payload.encode()))
    else:
        tail = packed_bin_size(len(payload))
    return 1 + packed_bin_size(len(header)) + tail


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
