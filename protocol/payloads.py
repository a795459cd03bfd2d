"""Payloads by entry id (docs/protocol.md §3.10, §3.11): where both hellos offer ``PARTIAL``, a
node that holds an entry without its payload asks a peer for it with a ``Want`` of entry ids,
and the peer answers in one ``Payloads``: each payload it may give, or an ``Answer`` saying why
not — and how many answers fit in that one frame (``payloads_room``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar

from protocol.entry import MAX_PAYLOAD_BYTES
from protocol.errors import LocalProtocolError
from protocol.frames import MAX_FRAME_BYTES
from protocol.wire import (
    MessageType,
    array_head_size,
    as_pairs,
    as_tuple,
    check_arity,
    check_ascending,
    check_blob,
    check_items,
    packed_bin_size,
)

__all__ = [
    "MAX_WANT",
    "PARTIAL",
    "Answer",
    "Answered",
    "Payloads",
    "Want",
    "payloads_room",
    "payloads_size",
]

# The feature of protocol 1.2 that lets a node hold the payloads of some workspaces only: entries
# may travel with a workspace tag for a payload, and payloads are asked for by id (§10).
PARTIAL = "partial"
MAX_WANT = 256  # entry ids in one want, and answers in one payloads message
_ID_BYTES = 32


class Answer(IntEnum):
    """What a ``Payloads`` item carries in place of a payload, and why."""

    ABSENT = 0  # the answering node holds no payload for the entry (or no such entry)
    ERASED = 1  # the entry's payload was erased (docs/erasure.md)
    WITHHELD = 2  # the asker's grant does not hold the workspace of the entry's payload


_ANSWERS = frozenset(Answer)

Answered = tuple[bytes, bytes | int]
"""One answer of a ``Payloads``: an entry id and its payload bytes, or an ``Answer`` code held
as a plain int, as it arrives."""


@dataclass(frozen=True, slots=True)
class Want:
    """A request for the payloads of 1 to ``MAX_WANT`` entries, by id, strictly ascending.  A
    side has at most one want unanswered."""

    TYPE: ClassVar[MessageType] = MessageType.WANT

    ids: tuple[bytes, ...]

    def __post_init__(self) -> None:
        check_items(self.ids, "ids", MAX_WANT, 1)
        for entry_id in self.ids:
            check_blob(entry_id, "ids", _ID_BYTES, _ID_BYTES)
        check_ascending(self.ids, "ids")

    def wire(self) -> list[Any]:
        return [list(self.ids)]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Want:
        (ids,) = check_arity(values, 1, "want")
        return cls(as_tuple(ids, "ids"))


@dataclass(frozen=True, slots=True)
class Payloads:
    """The answer to the peer's want: for some of its ids, strictly ascending, the payload or an
    ``Answer``.  An id left out is unanswered, and may be asked for again; no answer at all is
    an answer too."""

    TYPE: ClassVar[MessageType] = MessageType.PAYLOADS

    items: tuple[Answered, ...] = ()

    def __post_init__(self) -> None:
        check_items(self.items, "items", MAX_WANT)
        if not all(type(item) is tuple and len(item) == 2 for item in self.items):
            raise LocalProtocolError("each item is an (id, payload or answer) pair", field="items")
        items = tuple(_answered(entry_id, value) for entry_id, value in self.items)
        check_ascending([entry_id for entry_id, _ in items], "items")
        object.__setattr__(self, "items", items)  # answers held as plain ints, as they arrive

    @property
    def ids(self) -> tuple[bytes, ...]:
        return tuple(entry_id for entry_id, _ in self.items)

    def wire(self) -> list[Any]:
        return [[[entry_id, value] for entry_id, value in self.items]]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Payloads:
        (items,) = check_arity(values, 1, "payloads")
        return cls(as_pairs(items, "items"))


def _answered(entry_id: Any, value: Any) -> Answered:
    check_blob(entry_id, "id", _ID_BYTES, _ID_BYTES)
    if type(value) is bytes:
        check_blob(value, "payload", 0, MAX_PAYLOAD_BYTES)
        return entry_id, value
    if type(value) is int or type(value) is Answer:
        if value not in _ANSWERS:
            codes = ", ".join(str(int(a)) for a in Answer)
            raise LocalProtocolError(f"must be an answer code ({codes})", field="answer")
        return entry_id, int(value)
    raise LocalProtocolError("must be payload bytes or an answer code", field="payload")


# --- how many answers one frame holds -----------------------------------------------------------


def _answered_size(item: Answered) -> int:
    # The pair's array, the id as bin8, then the payload, or an answer code as a positive fixint.
    _, value = item
    size = packed_bin_size(len(value)) if isinstance(value, bytes) else 1
    return 1 + packed_bin_size(_ID_BYTES) + size


def payloads_size(items: Sequence[Answered]) -> int:
    """The bytes of the body of ``Payloads(items)``, worked out without encoding it."""
    return 2 + array_head_size(len(items)) + sum(map(_answered_size, items))


def payloads_room(items: Sequence[Answered]) -> int:
    """How many leading ``items`` one ``Payloads`` may carry: at most ``MAX_WANT``, within
    ``MAX_FRAME_BYTES`` once encoded.  One item always fits, whatever its payload."""
    count, size = 0, 0
    for item in items[:MAX_WANT]:
        size += _answered_size(item)
        if 2 + array_head_size(count + 1) + size > MAX_FRAME_BYTES:
            break
        count += 1
    return count
