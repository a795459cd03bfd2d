"""Node-generated identifiers."""

from __future__ import annotations

import uuid

from node.identity import random_bytes

__all__ = ["uuid7"]


def uuid7(ms: int) -> str:
    """A UUIDv7 (RFC 9562): 48-bit Unix ms, version 7, 74 random bits, variant 10."""
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    rand = int.from_bytes(random_bytes(10))
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))
