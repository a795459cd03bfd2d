"""The store as sync sees it (docs/protocol.md §4, §6): a snapshot of the frontier, spans of
a log, the logs changed since a position, fork proofs, and the receive path.

``Commits`` tells the links when the store has committed something new.  It polls the
store's commit counter (an integer in memory, so a poll costs nothing) every ``interval``
seconds, and reads the store only when the counter has moved; a link that has just committed
entries it received calls ``poke``, so a relay goes out without waiting for the next poll;
``recheck`` reads the store at the next look whatever the counter says (for commits made by
another process).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from node.errors import StoreError
from node.logging import get_logger
from node.store import AuditEvent, Ingest, Received, Report, Store, Txn
from node.store.erasure import ERASE
from node.store.heads import DROPPED
from node.store.partial import Wanted, answer_wants, select_wanted
from node.store.reader import ChangedLog, Marks, Reader, SpanEntry
from protocol.canonical import decode_canonical, encode_canonical
from protocol.entry import Entry, LogId
from protocol.errors import ProtocolError
from protocol.frontier import Frontier, LogRange, Tip
from protocol.kinds import holds_place
from protocol.payloads import PARTIAL
from protocol.signing import verify_signature

__all__ = ["OFFERED", "Commits", "FrontierSnapshot", "Replica", "peer_features"]

# The features this version's hello offers (``SyncOptions.features``); a peer's are kept
# (``note_features``) for ``peer_features``.
OFFERED = (ERASE, PARTIAL)


def _features_key(key: bytes) -> str:
    return f"peer_features:{key.hex()}"


async def peer_features(store: Store, key: bytes) -> tuple[str, ...] | None:
    """What the node ``key`` offered in its last hello to this node; None if it never
    connected here."""
    value = await store.get_state(_features_key(key))
    return None if value is None else tuple(decode_canonical(value, what="features"))


_log = get_logger("node.mesh.sync")


@dataclass(frozen=True, slots=True)
class FrontierSnapshot:
    """The frontier at one instant, the store's log ids of its logs, and the newest header
    position then: what is stored after it travels by push (docs/protocol.md §4)."""

    frontier: Frontier
    log_ids: dict[LogId, int]
    pos: int


class Replica:
    """Sync's verbs on one store."""

    def __init__(self, store: Store, mesh: bytes) -> None:
        self.store = store
        self.mesh = mesh
        self.ingest = Ingest(store)

    @property
    def reader(self) -> Reader:
        reader = self.store.reader
        if reader is None:
            raise RuntimeError("the store is closed")
        return reader

    async def snapshot(self) -> FrontierSnapshot:
        snap = await self.reader.select_snapshot()
        tips, log_ids = [], {}
        for log in snap.logs:
            # Logs of which something is held, but not a dropped one (node.store.logbound).
            if log.head_seq > 0 and log.head_id is not None and log.forked_at != DROPPED:
                tips.append(Tip(log.writer, log.epoch, log.head_seq, log.head_id))
                log_ids[(log.writer, log.epoch)] = log.log_id
        return FrontierSnapshot(Frontier.of(tips), log_ids, snap.pos)

    def authority_first(self, spans: list[LogRange]) -> list[LogRange]:
        """``spans`` with the authority's logs first: their member entries admit the other
        writers, whose entries would otherwise wait in the pending area (docs/mesh.md §The
        authority)."""
        membership = self.store.membership
        authority = membership.authority if membership is not None else None
        return sorted(spans, key=lambda s: s.log[0] != authority)

    async def span(
        self, log_id: int, *, gt: int, lte: int, limit: int, max_bytes: int
    ) -> list[SpanEntry]:
        return await self.reader.select_span(
            log_id, gt=gt, lte=lte, limit=limit, max_bytes=max_bytes
        )

    async def entry_id(self, log_id: int, seq: int) -> bytes | None:
        return await self.reader.select_entry_id(log_id, seq)

    async def changed(self, *, gt: int) -> list[ChangedLog]:
        return await self.reader.select_changed(gt=gt)

    async def fork_proofs(self) -> list[tuple[bytes, bytes]]:
        return await self.reader.select_forks()

    async def marks(self) -> Marks:
        return await self.reader.select_marks()

    def held(self) -> frozenset[str] | None:
        """The workspaces whose payloads this node may hold (None: all, docs/partial.md)."""
        membership = self.store.membership
        return None if membership is None else membership.held()

    def peer_held(self, key: bytes) -> frozenset[str] | None:
        """The workspaces whose payloads the node ``key`` may hold, as this node's membership
        says (None: all — and for a node it knows no grant of)."""
        membership = self.store.membership
        return None if membership is None else membership.held_by(key)

    async def wanted(
        self, *, after: int, limit: int, places: frozenset[str] | None
    ) -> list[Wanted]:
        """Entries held without the payload this node may hold, past position ``after``."""
        return await select_wanted(self.reader.fetchall, after=after, limit=limit, places=places)

    async def answers(self, ids: Sequence[bytes], peer: bytes) -> list[tuple[bytes, bytes | int]]:
        """The answer to the peer ``peer``'s want of ``ids``: payloads its grant holds."""
        held = self.peer_held(peer)
        return await answer_wants(self.reader.fetchall, ids, partial(holds_place, held))

    async def receive(self, items: Sequence[Received], *, source: str) -> Report:
        """The store's receive path: one transaction, one ``sr_synced`` per new entry."""
        return await self.ingest.receive(items, source=source)

    async def take_fork_proof(self, first: bytes, second: bytes, *, source: str) -> str | None:
        """Keep a fork proof from a peer (docs/protocol.md §3.7), or say why not.

        Both headers must decode, belong to this mesh, sit at one (writer, epoch, seq) and
        carry verifying signatures.  The proof is then handed to the receive path as the
        header that differs from the one stored there, which records the fork (once) and
        hides the log from that seq; a proof for a position not held yet is dropped — the
        peer offers its proofs again on the next connection."""
        try:
            a, b = Entry.decode(first, None), Entry.decode(second, None)
        except ProtocolError as exc:
            return await self._refuse_proof(f"fork proof: {exc}", source)
        ha, hb = a.header, b.header
        if (ha.writer, ha.epoch, ha.seq) != (hb.writer, hb.epoch, hb.seq):
            return await self._refuse_proof("fork proof: the headers are at two positions", source)
        if ha.mesh != self.mesh or hb.mesh != self.mesh:
            return await self._refuse_proof("fork proof: a header of another mesh", source)
        if not all(verify_signature(h.writer, h.sig, h.signing_bytes()) for h in (ha, hb)):
            return await self._refuse_proof("fork proof: a signature does not verify", source)
        head = self.store.head_of(ha.log)
        held = None if head is None else await self.entry_id(head.log_id, ha.seq)
        if held is None:
            return None
        others = [e for e in (a, b) if e.id != held]
        await self.ingest.receive([(e.raw, None) for e in others], source=source, event=None)
        return None

    async def _refuse_proof(self, reason: str, source: str) -> str:
        async def op(txn: Txn) -> None:
            self.store.audit_rejection(txn, source, AuditEvent.ENTRY_REJECTED, reason, None)

        await self.store.run(op)
        return reason

    async def note_features(self, peer: bytes, features: Sequence[str]) -> None:
        """Keep what a peer's hello offered (``memlane mesh members`` reads it: whether the
        node applies erasures, docs/erasure.md)."""
        value = encode_canonical(sorted(features))
        if await self.store.get_state(_features_key(peer)) == value:
            return  # the usual case: a peer reconnecting writes nothing

        async def op(txn: Txn) -> None:
            self.store.put_state(txn, _features_key(peer), value)

        await self.store.run(op)

    async def audit_peer(
        self, event: AuditEvent, source: str, detail: Mapping[str, object]
    ) -> None:
        """``peer_connected`` / ``peer_disconnected`` (docs/tools/e_audit.md §Events), at most one
        per peer and event a minute, the next one counting those it stands for."""
        await self.store.audit_limited(event, source, detail)


class Commits:
    """Wakes every subscribed link when the store's newest position or fork count moves."""

    def __init__(self, replica: Replica, *, interval: float = 0.02) -> None:
        self.replica = replica
        self.interval = interval
        self.marks = Marks(0, 0)
        self.version = 0
        self._subscribers: set[asyncio.Event] = set()
        self._poked = asyncio.Event()
        self._moved = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._seen = -1

    async def start(self) -> None:
        self.marks = await self.replica.marks()
        self._seen = self.replica.store.commits
        self._task = asyncio.create_task(self._watch(), name="memlane-sync-commits")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def subscribe(self, wake: asyncio.Event) -> None:
        self._subscribers.add(wake)

    def unsubscribe(self, wake: asyncio.Event) -> None:
        self._subscribers.discard(wake)

    def poke(self) -> None:
        """Something was just committed here: look now rather than at the next poll."""
        self._poked.set()

    def recheck(self) -> None:
        """Read the store at the next look even if this process committed nothing: another
        process on the same data directory (a ``memlane`` command) may have."""
        self._seen = -1
        self._poked.set()

    async def wait(self, version: int) -> int:
        """Wait for a version after ``version`` (bound it with ``asyncio.timeout``); return
        the version then."""
        async with self._moved:
            await self._moved.wait_for(lambda: self.version > version)
        return self.version

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._poked.wait()
            self._poked.clear()
            commits = self.replica.store.commits
            if commits == self._seen:
                continue
            self._seen = commits
            try:
                marks = await self.replica.marks()
            except StoreError as exc:  # a failed read: look again at the next poll
                _log.warning("reading the store's marks failed", error=str(exc))
                self._seen = -1
                continue
            if marks != self.marks:
                self.marks = marks
                await self._announce()

    async def _announce(self) -> None:
        self.version += 1
        for wake in self._subscribers:
            wake.set()
        async with self._moved:
            self._moved.notify_all()
