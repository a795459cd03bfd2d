"""The frontier (docs/protocol.md §3.3, §4): every log a node holds as its ``Tip``, the
``Frontier`` value — its digest, what a peer lacks of it (``LogRange``), the parts it travels
in — and ``FrontierPart``, the message that carries one part.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack

from protocol.entry import MAX_SEQ, LogId
from protocol.errors import LocalProtocolError
from protocol.wire import (
    MessageType,
    as_pairs,
    check_arity,
    check_ascending,
    check_blob,
    check_int,
    check_items,
)

__all__ = [
    "FRONTIER_PARTS",
    "MAX_FRONTIER_LOGS",
    "MAX_FRONTIER_TIPS",
    "Frontier",
    "FrontierPart",
    "LogRange",
    "Tip",
]

MAX_FRONTIER_LOGS = 10_000  # tips in one frontier message
MAX_FRONTIER_TIPS = 100_000  # tips in a whole frontier, over all its parts
# The feature of protocol 1.1 that lets a frontier of more than MAX_FRONTIER_LOGS tips travel
# in parts (docs/protocol.md §3.3).
FRONTIER_PARTS = "frontier.parts"


@dataclass(frozen=True, slots=True)
class Tip:
    """One log of a frontier: its highest contiguous seq and the id of the entry there."""

    writer: bytes
    epoch: bytes
    seq: int
    head: bytes

    def __post_init__(self) -> None:
        check_blob(self.writer, "writer", 32, 32)
        check_blob(self.epoch, "epoch", 8, 8)
        check_int(self.seq, "seq", 1, MAX_SEQ)
        check_blob(self.head, "head", 32, 32)

    @property
    def log(self) -> LogId:
        return (self.writer, self.epoch)

    def wire(self) -> list[Any]:
        return [self.writer, self.epoch, self.seq, self.head]


@dataclass(frozen=True, slots=True)
class LogRange:
    """Entries ``first``..``last`` (inclusive) of ``log`` that a peer lacks.  ``after`` is the
    id the peer holds at ``first - 1`` when its frontier says so: if this side's entry there
    has another id, the logs have forked and the sender starts one entry earlier, so that the
    peer sees the fork."""

    log: LogId
    first: int
    last: int
    after: bytes | None


@dataclass(frozen=True, slots=True)
class Frontier:
    """Every log a node holds, as tips sorted by (writer, epoch): any number of them.  It
    travels as one or more ``FrontierPart`` messages (``parts``) and in bundles."""

    tips: tuple[Tip, ...] = ()

    def __post_init__(self) -> None:
        _tips(self.tips, "tips", sys.maxsize)  # a node may hold more than one peer takes

    @classmethod
    def of(cls, tips: Iterable[Tip]) -> Frontier:
        """A frontier of ``tips`` in any order."""
        return cls(tuple(sorted(tips, key=lambda t: t.log)))

    @classmethod
    def from_heads(cls, heads: Mapping[LogId, tuple[int, bytes]]) -> Frontier:
        """A frontier from (writer, epoch) → (seq, head id); logs at seq 0 are left out."""
        return cls.of(Tip(w, e, seq, head) for (w, e), (seq, head) in heads.items() if seq)

    def rows(self) -> list[list[Any]]:
        """The tips as wire rows ``[writer, epoch, seq, head]``."""
        return [t.wire() for t in self.tips]

    @classmethod
    def from_rows(cls, rows: Any, *, most: int = MAX_FRONTIER_TIPS) -> Frontier:
        return cls(_tip_rows(rows, most))

    def parts(self, most: int = MAX_FRONTIER_LOGS) -> list[FrontierPart]:
        """The messages that carry this frontier: ``most`` tips each, every one but the last
        saying ``more``; one part (perhaps empty) when it fits in one."""
        n = len(self.tips)
        starts = range(0, max(n, 1), most)
        return [FrontierPart(self.tips[i : i + most], i + most < n) for i in starts]

    def digest(self) -> bytes:
        """SHA-256 of the canonical encoding of the tips array (docs/protocol.md §4)."""
        packed: bytes = msgpack.packb(self.rows(), use_bin_type=True)
        return hashlib.sha256(packed).digest()

    def lacking(self, theirs: Frontier) -> list[LogRange]:
        """What a peer whose frontier is ``theirs`` lacks of this one, log by log in order."""
        known = {t.log: t for t in theirs.tips}
        spans: list[LogRange] = []
        for tip in self.tips:
            other = known.get(tip.log)
            if other is None:
                spans.append(LogRange(tip.log, 1, tip.seq, None))
            elif other.seq < tip.seq:
                spans.append(LogRange(tip.log, other.seq + 1, tip.seq, other.head))
            elif other.seq == tip.seq and other.head != tip.head:
                spans.append(LogRange(tip.log, tip.seq, tip.seq, None))  # a fork at the tip
        return spans


@dataclass(frozen=True, slots=True)
class FrontierPart:
    """A frontier message: at most ``MAX_FRONTIER_LOGS`` tips of the sender's frontier, in
    order after those of its earlier parts; ``more`` when another part follows (only where
    both hellos offer ``FRONTIER_PARTS``).  A frontier that fits is one part without it."""

    TYPE: ClassVar[MessageType] = MessageType.FRONTIER

    tips: tuple[Tip, ...] = ()
    more: bool = False

    def __post_init__(self) -> None:
        _tips(self.tips, "tips", MAX_FRONTIER_LOGS)
        if type(self.more) is not bool:
            raise LocalProtocolError("must be a bool", field="more")

    def wire(self) -> list[Any]:
        rows = [t.wire() for t in self.tips]
        return [rows, True] if self.more else [rows]

    @classmethod
    def from_wire(cls, values: list[Any]) -> FrontierPart:
        if len(values) == 2 and values[1] is True:
            return cls(_tip_rows(values[0], MAX_FRONTIER_LOGS), True)
        (rows,) = check_arity(values, 1, "frontier")
        return cls(_tip_rows(rows, MAX_FRONTIER_LOGS))


def _tips(tips: Any, field: str, most: int) -> None:
    check_items(tips, field, most)
    if not all(type(t) is Tip for t in tips):
        raise LocalProtocolError("each is a Tip", field=field)
    check_ascending([t.log for t in tips], field)


def _tip_rows(value: Any, most: int) -> tuple[Tip, ...]:
    rows = as_pairs(value, "tips")
    if len(rows) > most:
        raise LocalProtocolError(f"must be a tuple of 0 to {most} items", field="tips")
    if not all(len(row) == 4 for row in rows):
        raise LocalProtocolError("each is [writer, epoch, seq, head]", field="tips")
    return tuple(Tip(*row) for row in rows)
