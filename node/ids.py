"""Node-generated identifiers."""

from __future__ import annotations

from node.identity import random_bytes

__all__ = ["uuid7"]


def uuid7(ms: int) -> str:
    """A UUIDv7 (RFC 9562): 48-bit Unix ms, version 7, 74 random bits, variant 10."""
    rand = int.from_bytes(random_bytes(10))
    value = (ms & _MS_MASK) << 80 | 0x7 << 76 | (rand >> 62 & 0xFFF) << 64 | 0b10 << 62
    h = f"{value | rand & _LOW62:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_MS_MASK = (1 << 48) - 1
_LOW62 = (1 << 62) - 1
