"""What one link sends: the catch-up a peer's frontier lacks and the live pushes of what the
store gained since, as an ``Outbox`` of log ranges read from the store a budget at a time, and
``PeerHolds``, what this side knows its peer holds (docs/protocol.md §6).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from node.mesh.fetch import Filled
from node.replica import FrontierSnapshot, Replica
from node.store import Received
from node.store.reader import SpanEntry
from protocol.batch import WireEntry, entry_cost
from protocol.entry import MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES, Entry, LogId
from protocol.errors import ProtocolError
from protocol.frontier import Frontier

__all__ = [
    "LARGEST_ENTRY",
    "Outbox",
    "Outgoing",
    "PeerHolds",
    "Shape",
    "catch_up",
    "refilled",
    "whole",
]

LARGEST_ENTRY = MAX_HEADER_BYTES + MAX_PAYLOAD_BYTES

Shape = Callable[[SpanEntry], WireEntry]
"""How a stored entry goes to the peer (``node.mesh.fetch.Fetch.wire``: with its payload, or
its header and workspace tag where the peer's grant does not hold it)."""


def whole(row: SpanEntry) -> WireEntry:
    return row.raw, row.payload


@dataclass(slots=True)
class Outgoing:
    """Entries ``next``..``last`` (inclusive) of the store's log ``log_id`` still to send."""

    log_id: int
    next: int
    last: int


class Outbox:
    """Ranges of logs to send, read from the store a budget at a time: it holds no more than
    the credit the peer has granted (plus what a batch could not take)."""

    def __init__(self, ranges: Sequence[Outgoing], shape: Shape = whole) -> None:
        self._ranges = deque(ranges)
        self._shape = shape
        self._buffer: list[WireEntry] = []
        self._cost = 0

    @property
    def exhausted(self) -> bool:
        return not self._ranges and not self._buffer

    @property
    def size(self) -> int:
        return sum(s.last - s.next + 1 for s in self._ranges) + len(self._buffer)

    async def peek(self, replica: Replica, *, entries: int, nbytes: int) -> list[WireEntry]:
        """The next entries, as many as ``entries`` and ``nbytes`` allow."""
        while self._ranges and len(self._buffer) < entries and self._cost < nbytes:
            out = self._ranges[0]
            rows = await replica.span(
                out.log_id,
                gt=out.next - 1,
                lte=out.last,
                limit=entries - len(self._buffer),
                max_bytes=nbytes - self._cost,
            )
            if not rows:
                if nbytes - self._cost < LARGEST_ENTRY:
                    break  # the next entry may not fit: wait for credit
                self._ranges.popleft()  # nothing there any more (cannot happen: append-only)
                continue
            for row in rows:
                item = self._shape(row)
                self._buffer.append(item)
                self._cost += entry_cost(item)
            out.next = rows[-1].seq + 1
            if out.next > out.last:
                self._ranges.popleft()
        return self._buffer

    def consume(self, n: int) -> list[WireEntry]:
        taken, self._buffer = self._buffer[:n], self._buffer[n:]
        self._cost -= sum(map(entry_cost, taken))
        return taken


async def catch_up(
    replica: Replica, snap: FrontierSnapshot, theirs: Frontier, shape: Shape = whole
) -> Outbox:
    """What the peer lacks of ``snap``: per log, from the seq after the peer's tip — from the
    tip itself when the logs forked there, so the peer sees the fork."""
    ranges = []
    for lack in replica.authority_first(snap.frontier.lacking(theirs)):
        log_id = snap.log_ids[lack.log]
        first = lack.first
        if lack.after is not None:
            held = await replica.entry_id(log_id, first - 1)
            if held is not None and held != lack.after:
                first -= 1
        ranges.append(Outgoing(log_id, first, lack.last))
    return Outbox(ranges, shape)


def refilled(filled: Sequence[Filled], shape: Shape) -> Outbox:
    """The entries whose payloads this node filled in, to pass on (``Fetch.refill``), each
    run of seqs of one log read as one range."""
    ranges: list[Outgoing] = []
    for log_id, seq in sorted({(log_id, seq) for log_id, seq, _ in filled}):
        last = ranges[-1] if ranges else None
        if last is not None and last.log_id == log_id and last.last + 1 == seq:
            last.last = seq
        else:
            ranges.append(Outgoing(log_id, seq, seq))
    return Outbox(ranges, shape)


@dataclass(slots=True)
class PeerHolds:
    """What this side knows its peer holds, for live pushes: per log the highest seq, and
    the store position up to which the store's changes have been worked out."""

    seqs: dict[LogId, int] = field(default_factory=dict)
    cursor: int = 0

    def note(self, log: LogId, seq: int) -> None:
        if seq > self.seqs.get(log, 0):
            self.seqs[log] = seq

    def round_done(self, snapshot: FrontierSnapshot, theirs: Frontier | None) -> None:
        """A round ended: the peer holds (or was sent) every log to ``snapshot``, and its
        own frontier ``theirs``."""
        for tip in (*snapshot.frontier.tips, *(theirs.tips if theirs else ())):
            self.note(tip.log, tip.seq)
        self.cursor = max(self.cursor, snapshot.pos)

    async def pushes(self, replica: Replica, shape: Shape = whole) -> Outbox:
        """What the store gained past the cursor, per log from the seq the peer holds (taken
        as held once it is in the outbox)."""
        ranges = []
        for log in await replica.changed(gt=self.cursor):
            key = (log.writer, log.epoch)
            held = self.seqs.get(key, 0)
            if log.head_seq > held:
                ranges.append(Outgoing(log.log_id, held + 1, log.head_seq))
                self.seqs[key] = log.head_seq
            self.cursor = max(self.cursor, log.pos)
        return Outbox(ranges, shape)

    def received(self, items: Sequence[WireEntry]) -> list[Received]:
        """Entries the peer sent: it holds them, so they are never pushed back to it.  The
        batch for the store, each header decoded once, here; an entry whose header does not
        decode, or whose payload is not the one its header names, goes on as it came, and
        the store rejects it as it would have."""
        batch: list[Received] = []
        for raw, payload in items:
            try:
                entry = Entry.decode(raw, None)
            except ProtocolError:
                batch.append((raw, payload))
                continue
            self.note(entry.header.log, entry.header.seq)
            if isinstance(payload, str):  # a header and its workspace tag (docs/partial.md)
                batch.append((raw, payload))
                continue
            entry = entry.with_payload(payload)
            try:
                entry.check_payload()
            except ProtocolError:
                batch.append((raw, payload))
                continue
            batch.append(entry)
        return batch
