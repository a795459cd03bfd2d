"""What every sync message is built of (docs/protocol.md §3): its type, the first element of
its body, and the checks its fields are built with — each raises ``LocalProtocolError`` naming
the field — and the helpers that turn msgpack's lists into the tuples the dataclasses hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from itertools import pairwise
from typing import Any

from protocol.errors import LocalProtocolError

__all__ = [
    "MessageType",
    "array_head_size",
    "as_pairs",
    "as_tuple",
    "check_arity",
    "check_ascending",
    "check_blob",
    "check_int",
    "check_items",
    "packed_bin_size",
    "packed_str_size",
]


class MessageType(IntEnum):
    """The first element of every message body."""

    HELLO = 1
    FRONTIER_DIGEST = 2
    FRONTIER = 3
    ENTRIES = 4
    CREDIT = 5
    PUSH = 6
    FORK_PROOF = 7
    ERROR = 8
    BYE = 9
    WANT = 10
    PAYLOADS = 11


# --- field checks: each raises LocalProtocolError naming the field ------------------------------


def check_blob(value: Any, field: str, lo: int, hi: int) -> None:
    if type(value) is not bytes or not lo <= len(value) <= hi:
        size = f"{lo} bytes" if lo == hi else f"{lo} to {hi} bytes"
        raise LocalProtocolError(f"must be {size}", field=field)


def check_int(value: Any, field: str, lo: int, hi: int) -> None:
    if type(value) is not int or not lo <= value <= hi:
        raise LocalProtocolError(f"must be an integer in [{lo}, {hi}]", field=field)


def check_items(value: Any, field: str, most: int, least: int = 0) -> None:
    if type(value) is not tuple or not least <= len(value) <= most:
        raise LocalProtocolError(f"must be a tuple of {least} to {most} items", field=field)


def check_ascending(keys: Sequence[Any], field: str) -> None:
    if any(a >= b for a, b in pairwise(keys)):
        raise LocalProtocolError("must be strictly ascending (sorted, no repeats)", field=field)


# --- wire helpers: lists from msgpack become the tuples the dataclasses hold -------------------


def check_arity(values: list[Any], n: int, what: str) -> list[Any]:
    if len(values) != n:
        raise LocalProtocolError(f"has {n} fields after its type, not {len(values)}", field=what)
    return values


def as_tuple(value: Any, field: str) -> tuple[Any, ...]:
    if type(value) is not list:
        raise LocalProtocolError("must be an array", field=field)
    return tuple(value)


def as_pairs(value: Any, field: str) -> tuple[Any, ...]:
    return tuple(as_tuple(item, field) for item in as_tuple(value, field))


# --- encoded sizes: what canonical msgpack spends on a value, without encoding it -------------


def packed_bin_size(n: int) -> int:
    """Bytes a ``bin`` of ``n`` bytes takes: bin8, bin16 or bin32 and its data."""
    return n + (2 if n < 0x100 else 3 if n < 0x10000 else 5)


def packed_str_size(n: int) -> int:
    """Bytes a ``str`` of ``n`` UTF-8 bytes takes: fixstr, str8, str16 or str32 and its data."""
    return n + (1 if n < 0x20 else 2 if n < 0x100 else 3 if n < 0x10000 else 5)


def array_head_size(n: int) -> int:
    """Bytes the header of an array of ``n`` items takes: fixarray, array16 or array32."""
    return 1 if n < 0x10 else 3 if n < 0x10000 else 5
