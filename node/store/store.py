"""The store: the node's log and local state in one SQLite file (docs/architecture.md §The store).

Its interface is narrow: ``open`` and ``close``; ``author`` (seal and append an entry of this
node's own log); ``append`` (an entry from elsewhere that ``node.store.ingest`` attached);
``run`` (any other local write, in the same group commit); the local state (``put_state``,
``select_state`` …); ``reader`` for everything read outside a write.

What it keeps in memory is exact while its writer runs, and reloaded when a batch rolls back or
another process committed (``_reload``): the log heads (``LogTable``), the clock, the erased
SRs, the views' caches.  Every view (``node.store.views``) takes in each applied entry in the
transaction that appends it, so a view is never behind its log.  The rest is upkeep done in the
background: a scrub after an erase (``node.store.erasure``), payloads withheld after this
node's grant narrowed (``node.store.partial``), views brought to the moment (``catch_up_views``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from node.errors import Refusal, StoreError
from node.logging import get_logger
from node.progress import Progress
from node.store.audit import AuditEvent, EntryEvent, RejectionLimiter, audit
from node.store.connection import Connection, translated, truncate_wal
from node.store.erasure import ERASE, HELD, HELD_ERASES, SCRUB, SCRUB_INTERVAL, Erasures, scrub_step
from node.store.heads import LOG_UPSERT, LogHead, LogTable, decode_hlc, encode_hlc
from node.store.partial import (
    MISSING_INSERT,
    PLACES_DUE,
    WITHHOLD_DUE,
    not_held,
    unplaced,
    withhold,
)
from node.store.reader import Reader
from node.store.schema import migrate, refuse_newer
from node.store.views import AppliedEntry, HiddenEntries, View
from node.store.writer import GroupWriter, Txn
from protocol.clock import Hlc, HybridClock
from protocol.entry import Entry, Header, LogId, decode_header
from protocol.errors import ProtocolError
from protocol.kinds import KINDS, decode_payload, place_of
from protocol.signing import SigningKey, seal

__all__ = ["Admission", "AuthoredEntry", "Content", "Store", "StoreOptions", "Wait", "Wall"]

log = get_logger(__name__)

Wall = Callable[[], int]
# An authored entry's payload: its bytes with their decoded form, or an async function that
# makes them inside the transaction (it may read the store, and refuse).
Content = tuple[bytes, dict[str, Any]] | Callable[[Txn], Awaitable[tuple[bytes, dict[str, Any]]]]

_STATE_UPSERT = "INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)"
_HEADER_INSERT = (
    "INSERT INTO headers (pos, id, log_id, seq, hlc_wall, hlc_counter, kind, applied, raw, "
    "workspace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PAYLOAD_INSERT = "INSERT INTO payloads (pos, data) VALUES (?, ?)"
_LAST_ACCEPTED = (
    "SELECT l.epoch, CASE WHEN l.forked_at IS NULL THEN l.head_seq "
    "ELSE min(l.head_seq, l.forked_at - 1) END "
    "FROM logs l JOIN headers h ON h.log_id = l.log_id AND h.seq = l.head_seq "
    "WHERE l.writer = ? ORDER BY h.hlc_wall DESC, h.hlc_counter DESC LIMIT 1"
)
_REPLAY = (
    "SELECT h.pos, h.log_id, h.raw, p.data FROM headers h JOIN payloads p ON p.pos = h.pos "
    "WHERE h.pos > ? AND h.applied = 1 ORDER BY h.pos LIMIT 1000"
)
_APPLIED_COUNT = (
    "SELECT count(*) FROM headers h JOIN payloads p ON p.pos = h.pos WHERE h.applied = 1"
)


class StoreOptions:
    """Tunables; defaults are the documented ones (docs/operations.md)."""

    def __init__(
        self,
        *,
        synchronous: str = "FULL",
        max_clock_skew_ms: int = 5 * 60 * 1000,
        pending_limit: int = 10_000,
        pending_per_source: int = 1_000,
        pending_bytes: int = 64 << 20,
        pending_expiry_ms: int = 7 * 86_400_000,
        max_batch: int = 512,
        amortised_verification: bool = True,
    ) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous}")
        self.synchronous = synchronous
        self.max_clock_skew_ms = max_clock_skew_ms
        self.pending_limit = pending_limit
        self.pending_per_source = pending_per_source
        self.pending_bytes = pending_bytes
        self.pending_expiry_ms = pending_expiry_ms
        self.max_batch = max_batch
        # Per-entry verification gives the same verdicts, slower; kept for the benchmark.
        self.amortised_verification = amortised_verification


class Wait(Enum):
    """An entry that may become admissible: it waits in the pending area."""

    FOR_MEMBER = "its writer's member.add is not here yet"


class Admission(Protocol):
    """The membership rule the store applies (``node.members.membership``, docs/mesh.md)."""

    authority: bytes | None

    def check(self, header: Header, payload: dict[str, Any] | None) -> str | Wait | None:
        """None when the entry may be stored, ``Wait`` when it must wait, else why not."""

    def take_admitted(self) -> set[bytes]:
        """Writers admitted since the last call (their waiting entries can be released)."""

    def max_logs(self, writer: bytes) -> int | None:
        """How many logs ``writer`` may hold; None for no bound."""

    def may_hold(self, place: str | None) -> bool:
        """Whether this node's grant holds the payloads placed in ``place``
        (docs/partial.md)."""

    def held(self) -> frozenset[str] | None:
        """The workspaces whose payloads this node holds; None for all."""

    def take_narrowed(self) -> bool:
        """Whether this node's grant narrowed since the last call."""

    def held_by(self, key: bytes) -> frozenset[str] | None:
        """The workspaces whose payloads the node ``key`` may hold; None for all (and for a
        node without a grant)."""


class AuthoredEntry:
    """An entry of this node's own log, as ``author`` hands it back: its store position and
    clock at once, and the sealed entry once its batch has committed (it is sealed on the
    writer's thread as the batch is written, chained to the entry sealed before it)."""

    __slots__ = ("_entry", "_row", "hlc", "pos")

    def __init__(self, pos: int, hlc: Hlc, row: tuple[Any, ...]) -> None:
        self.pos = pos
        self.hlc = hlc
        self._row = row  # what sealing needs: key, mesh, epoch, head, seq, kind, data, place
        self._entry: Entry | None = None

    @property
    def entry(self) -> Entry:
        if self._entry is None:
            raise StoreError("the entry is sealed when its batch commits")
        return self._entry

    def seal(self, add: Callable[[str, Sequence[Any]], None]) -> None:
        """Sign the entry and queue its header and payload rows; run on the writer's thread
        just before the batch is written (``Txn.defer``: signing releases the GIL), in the
        order the entries were authored, so each names the one before as its ``prev``."""
        key, mesh, epoch, head, seq, kind, data, place = self._row
        hlc = self.hlc
        entry = seal(
            key, mesh=mesh, epoch=epoch, seq=seq, prev=head.id, hlc=hlc, kind=kind, payload=data
        )
        head.id, head.id_seq = entry.id, seq
        applied = int(not head.hides(seq))
        row = (self.pos, entry.id, head.log_id, seq, hlc.wall, hlc.counter, kind, applied)
        add(_HEADER_INSERT, (*row, entry.raw, place))
        add(_PAYLOAD_INSERT, (self.pos, data))
        self._entry = entry


class Store:
    """The node's log and local state in one SQLite file."""

    def __init__(
        self,
        path: Path,
        wall: Wall,
        options: StoreOptions,
        views: Sequence[View] = (),
        migrations: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.wall = wall
        self.options = options
        self.migrations = tuple(migrations)
        self.logs = LogTable()
        self.erasures = Erasures()
        self.clock = HybridClock(max_skew_ms=options.max_clock_skew_ms)
        self.limiter = RejectionLimiter()
        self.views: tuple[View, ...] = tuple(views)
        self._views_for = {k: tuple(v for v in self.views if k in v.kinds) for k in KINDS}
        self.mesh: bytes | None = None
        # The membership rule (node.members.membership); None admits every writer.
        self.membership: Admission | None = None
        self.reader: Reader | None = None
        self._conn: Connection | None = None
        self._writer: GroupWriter | None = None
        self._clock_saved = Hlc(0, 0)
        self._data_version: int | None = None  # the database's, as the last batch began
        # Upkeep in the background: a scrub after erases, a withhold after a narrowed grant.
        self.narrowed = asyncio.Event()  # set when this node's grant narrows
        self._scrubbing = asyncio.Lock()
        self._upkeep: list[asyncio.Task[None]] = []

    # -- opening and closing -----------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        wall: Wall,
        options: StoreOptions | None = None,
        views: Sequence[View] = (),
        migrations: Sequence[str],
    ) -> Store:
        """Open (creating and migrating as needed) the store at ``path``, brought through
        ``migrations`` (``node.schema.MIGRATIONS``: every owner's statements, version by
        version); ``views`` are kept in the same transaction as every append
        (``node.views.default_views``)."""
        store = cls(path, wall, options or StoreOptions(), views, migrations)
        try:
            with translated(f"cannot open the store at {path}"):
                await store._open()
        except BaseException:
            await store.close()
            raise
        return store

    async def _open(self) -> None:
        self._conn = conn = await Connection.open(self.path, isolation_level=None)
        await refuse_newer(conn, len(self.migrations))  # before anything touches a newer one
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute(f"PRAGMA synchronous={self.options.synchronous}")
        # Deleted rows and freed pages are overwritten with zeros: erased bytes do not linger
        # in the file's free space (docs/erasure.md; most builds' default already).
        await conn.execute("PRAGMA secure_delete=ON")
        await conn.execute("PRAGMA foreign_keys=ON")
        await migrate(conn, self.migrations)
        # The version first: a commit elsewhere while the state loads then makes the first
        # batch stale (built again on reloaded state), never current with stale positions.
        self._data_version = await self._scalar("PRAGMA data_version")
        await self._reload()
        self._writer = GroupWriter(
            conn,
            on_rollback=self._reload,
            on_stale=self._restale,
            expect=lambda: self._data_version,
            before_commit=self._save_clock,
            settle=self._settle,
            max_batch=self.options.max_batch,
        )
        self._writer.start()
        countable = frozenset(t for view in self.views for t in view.countable)
        self.reader = reader = await Reader.open(self.path, countable=countable)
        if await reader.state("views_stale") is not None:
            await self.rebuild_views()
        if await reader.state(SCRUB) is not None:  # one left due when it last closed
            self.erasures.erased.set()
        if await reader.state(WITHHOLD_DUE) is not None:  # the same, for a withhold
            self.narrowed.set()
        self._upkeep = [
            _repeat("scrub", self.erasures.erased, self._scrub, pause=SCRUB_INTERVAL),
            _repeat("withhold", self.narrowed, self.withhold, pause=0),
        ]

    async def close(self) -> None:
        for task in self._upkeep:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._upkeep:
            # An erase's scrub is finished before the store closes (a few seconds at a
            # million SRs), so `memlane erase` returns with the bytes gone.
            with contextlib.suppress(StoreError):
                await self.scrub()
        self._upkeep = []
        if self._writer is not None:
            await self._writer.stop()
            self._writer = None
        for conn in (self.reader, self._conn):
            if conn is not None:
                await conn.close()
        self.reader = self._conn = None

    # -- the moment and the group commit -------------------------------------------------------

    def moment(self) -> int:
        """This node's moment for its views: its clock (docs/tools/e_timeline.md §Views at a
        moment)."""
        return self.clock.last.wall

    def now_ms(self, wall: int | None = None) -> int:
        """This node's moment: its wall clock, or its clock when that is ahead — what a read
        is answered at (``catch_up_views`` brings views there) and what arrivals, imports and
        peer events are stamped with.  ``wall`` is a reading of the wall clock already taken
        (the receive path's, for the entry it stamps); ``self.wall()`` when None."""
        return max(self.clock.last.wall, self.wall() if wall is None else wall)

    def now(self) -> Hlc:
        """A fresh timestamp from this node's clock."""
        return self.clock.now(self.wall())

    @property
    def commits(self) -> int:
        return self._writer.commits if self._writer else 0

    def run(self, op: Callable[[Txn], Awaitable[Any]]) -> asyncio.Future[Any]:
        """Run ``op`` inside the next group commit; the future resolves once it is durable."""
        if self._writer is None:
            raise StoreError("the store is closed")
        return self._writer.submit(op)

    def write_failure(self, within: float) -> str | None:
        """Why the disk refused a write in the last ``within`` seconds, if it did and no
        write as large has committed since."""
        failed = None if self._writer is None else self._writer.failed
        if failed is None or time.monotonic() - failed[0] > within:
            return None
        return failed[1]

    async def refresh(self) -> None:
        """Take in what other processes committed: a batch that writes nothing, whose start
        reloads the in-memory state if the database changed.  ``StoreError`` if no write
        transaction can be begun."""

        async def nothing(_txn: Txn) -> None:
            return None

        await self.run(nothing)

    # -- local state ----------------------------------------------------------------------------

    async def get_state(self, key: str) -> bytes | None:
        assert self.reader is not None
        return await self.reader.state(key)

    def put_state(self, txn: Txn, key: str, value: bytes) -> None:
        txn.add(_STATE_UPSERT, (key, value))

    def delete_state(self, txn: Txn, key: str) -> None:
        txn.add("DELETE FROM state WHERE key = ?", (key,))

    async def select_state(self, txn: Txn, key: str) -> bytes | None:
        """A state value as ``txn`` sees it (under the write lock, unlike ``get_state``)."""
        row = await txn.fetchone("SELECT value FROM state WHERE key = ?", (key,))
        return bytes(row[0]) if row is not None else None

    async def has_state(self, txn: Txn, key: str) -> bool:
        return await txn.fetchone("SELECT 1 FROM state WHERE key = ?", (key,)) is not None

    async def select_last_accepted(self, txn: Txn, writer: bytes) -> tuple[bytes, int] | None:
        """The newest log of ``writer`` (by its head's clock) and how far this node has
        accepted it: up to its head, or to just before a fork point; None: no log of it."""
        found = await txn.fetchone(_LAST_ACCEPTED, (writer,))
        return (bytes(found[0]), int(found[1])) if found else None

    def insert_new_epoch(self, txn: Txn, writer: bytes, epoch: bytes, prev: bytes) -> None:
        """A new epoch's log row of ``writer``, holding ``prev`` (the old epoch's head) at
        seq 0 until its first entry is sealed, which names it as its ``prev``."""
        txn.add(
            "INSERT INTO logs (log_id, writer, epoch, head_seq, head_id, forked_at) "
            "VALUES ((SELECT coalesce(max(log_id), 0) + 1 FROM logs), ?, ?, 0, ?, NULL)",
            (writer, epoch, prev),
        )

    def head_of(self, log: LogId) -> LogHead | None:
        return self.logs.heads.get(log)

    # -- the audit feed (node/store/audit.py) --------------------------------------------------

    def admit_event(self, source: str, event: AuditEvent) -> int | None:
        """The audit feed's rate limit (``RejectionLimiter``, docs/tools/e_audit.md): how many
        ``event``s of ``source`` the one written now stands for, or None when it is only
        counted."""
        return self.limiter.admit(source, event, self.wall())

    def audit_rejection(
        self, txn: Txn, source: str, event: AuditEvent, reason: str, entry: bytes | None
    ) -> None:
        count = self.admit_event(source, event)
        if count is not None:
            detail = {"source": source, "reason": reason, "count": count}
            audit(txn, event, self.clock.last.wall, entry=entry, detail=detail)

    async def audit_limited(
        self, event: AuditEvent, source: str, detail: Mapping[str, object]
    ) -> None:
        """Write ``event`` of ``source`` in a transaction of its own, stamped at this node's
        moment, unless the rate limit only counts it (``admit_event``): ``peer_connected`` /
        ``peer_disconnected``, at most one a peer and event a minute."""
        count = self.admit_event(source, event)
        if count is None:
            return

        async def op(txn: Txn) -> None:
            audit(txn, event, self.now_ms(), detail={"source": source, "count": count, **detail})

        await self.run(op)

    # -- appending -----------------------------------------------------------------------------

    def author(
        self,
        key: SigningKey,
        mesh: bytes,
        epoch: bytes,
        kind: str,
        content: Content,
        event: EntryEvent | None = None,
    ) -> asyncio.Future[AuthoredEntry]:
        """Append one entry of this node's log (``key``'s, epoch ``epoch``), sealed when its
        batch is written (``AuthoredEntry.seal``), with its audit ``event`` if it has one.
        A write placed in a workspace this node's grant no longer holds is refused (a token
        issued before the grant narrowed, docs/partial.md)."""

        async def op(txn: Txn) -> AuthoredEntry:
            data, payload = content if isinstance(content, tuple) else await content(txn)
            place = place_of(kind, payload)
            if self.membership is not None and not self.membership.may_hold(place):
                raise Refusal(not_held(place))
            head = self.logs.head((key.public, epoch))
            head.seq += 1
            row = (key, mesh, epoch, head, head.seq, kind, data, place)
            authored = AuthoredEntry(self.logs.take_pos(), self.now(), row)
            txn.defer(authored.seal, LOG_UPSERT, _HEADER_INSERT, _PAYLOAD_INSERT)
            txn.defer_once(("head", head.log_id), head.write_row)  # after every seal
            fresh = kind == "sr.put" and bool(payload.get("create"))
            at = (authored.pos, head.log_id, key.public, epoch, head.seq, authored.hlc)
            item = AppliedEntry(*at, kind, payload, self.moment(), fresh)
            await self._apply(txn, item, authored.hlc.wall)
            if event is not None:
                audit(
                    txn,
                    event.event,
                    authored.hlc.wall,
                    workspace=event.workspace,
                    subject=event.subject,
                    principal=event.principal,
                    entry_pos=authored.pos,
                )
            return authored

        return self.run(op)

    async def append(
        self,
        txn: Txn,
        head: LogHead,
        entry: Entry,
        payload: dict[str, Any] | None,
        place: str | None,
        erased: bool = False,
    ) -> int:
        """Append an entry from elsewhere, attached at ``head`` (``node.store.ingest``): its
        header (with its ``place``), payload, the log's head and the views' rows; its store
        position.  One without its payload (and not ``erased``) is missing
        (node/store/partial.py)."""
        h = entry.header
        pos = self.logs.take_pos()
        applied = payload is not None and not head.hides(h.seq)
        head.seq, head.id, head.id_seq = h.seq, entry.id, h.seq
        txn.put(LOG_UPSERT, head.log_id, head.row())  # first: headers reference it
        row = (pos, entry.id, head.log_id, h.seq, h.hlc.wall, h.hlc.counter, h.kind)
        txn.add(_HEADER_INSERT, (*row, int(applied), entry.raw, place))
        if entry.payload is not None:
            txn.add(_PAYLOAD_INSERT, (pos, entry.payload))
        elif not erased:
            txn.add(MISSING_INSERT, (pos, place))
        if applied and payload is not None:
            await self.apply(txn, pos, head, entry, payload)
        return pos

    async def apply(
        self, txn: Txn, pos: int, head: LogHead, entry: Entry, payload: dict[str, Any]
    ) -> None:
        """The views take in the entry from elsewhere at ``pos`` (appended now, or a payload
        filled in for a header held before)."""
        h = entry.header
        at = (pos, head.log_id, h.writer, h.epoch, h.seq, h.hlc)
        await self._apply(txn, AppliedEntry(*at, h.kind, payload, self.moment()), self.now_ms())

    async def _apply(self, txn: Txn, item: AppliedEntry, at: int) -> None:
        """The views take ``item`` in; an erase then takes its SR out (``at`` stamps its
        event), and a grant that narrowed this node's asks for a withhold after the commit.
        A rebuild replays only the views: what an erase took is gone from the log."""
        for view in self._views_for.get(item.kind, ()):
            await view.apply(txn, item)
        if item.kind == ERASE:
            await self.erasures.erase(txn, self.views, item, at)
        elif item.kind == "member.add" and self.membership and self.membership.take_narrowed():
            self.put_state(txn, WITHHOLD_DUE, b"\x01")  # done after this commit (``withhold``)
            self.narrowed.set()

    async def hide_log(self, txn: Txn, head: LogHead, from_seq: int) -> None:
        """Hide a log's entries from ``from_seq`` on (a fork, or a log over its writer's
        bound): the views withdraw them."""
        if head.forked_at is not None and head.forked_at <= from_seq:
            return
        head.forked_at = from_seq
        for view in self.views:
            await view.hide(txn, HiddenEntries(head.log_id, from_seq, self.moment()))
        txn.add(
            "UPDATE headers SET applied = 0 WHERE log_id = ? AND seq >= ?", (head.log_id, from_seq)
        )
        txn.add("UPDATE logs SET forked_at = ? WHERE log_id = ?", (from_seq, head.log_id))

    # -- the views -------------------------------------------------------------------------------

    async def rebuild_views(self, progress: Progress | None = None) -> int:
        """Empty every view and replay the log into it (``memlane views rebuild``); return
        how many entries were applied (``progress`` is told them, phase ``rebuild``).  One
        transaction: readers see the old views until the new ones are complete."""
        count: int = await self.run(lambda txn: self._replay(txn, progress))
        return count

    async def _replay(self, txn: Txn, progress: Progress | None) -> int:
        for view in self.views:
            view.reset()
            for sql in view.clear:
                txn.add(sql, ())
        total = (await txn.fetchone(_APPLIED_COUNT) or (0,))[0] if progress else 0
        applied, after = 0, 0
        while rows := await txn.fetchall(_REPLAY, (after,)):
            for pos, log_id, raw, data in rows:
                h = decode_header(bytes(raw))
                at = (pos, log_id, h.writer, h.epoch, h.seq, h.hlc)
                payload = decode_payload(h.kind, bytes(data))
                item = AppliedEntry(*at, h.kind, payload, self.moment())
                for view in self._views_for.get(h.kind, ()):
                    await view.apply(txn, item)
            after, applied = rows[-1][0], applied + len(rows)
            if progress is not None:
                progress("rebuild", applied, max(total, applied))
        for view in self.views:
            for sql in view.restore:
                txn.add(sql, ())
        if self.membership is not None:
            self.membership.take_narrowed()  # the replay's own fold of the grants
        txn.add("DELETE FROM state WHERE key = 'views_stale'", ())
        return applied

    def views_due(self) -> bool:
        """Whether a view holds a version whose time has come (``catch_up_views`` would
        write): until then, the views answer for this moment as they are."""
        due = min((v.next_due for v in self.views if v.next_due is not None), default=None)
        return due is not None and due <= self.now_ms()

    async def catch_up_views(self) -> None:
        """Bring the views to this moment: versions whose time has come become current."""
        if not self.views_due():
            return
        moment = self.now_ms()

        async def op(txn: Txn) -> None:
            self.clock.update(Hlc(moment, 0), moment)
            for view in self.views:
                await view.catch_up(txn, moment)

        await self.run(op)

    # -- what an upgrade leaves to do once -------------------------------------------------------

    async def erase_held(self) -> int:
        """Apply the erases this store holds from before it knew the kind, once (the
        migration that brought the kind asks for it); the membership rule must be set, as it
        judges them now.  Returns how many were applied."""
        assert self.reader is not None
        if await self.reader.state(HELD) is None:
            return 0

        async def op(txn: Txn) -> int:
            applied = 0
            for pos, log_id, raw, data in await txn.fetchall(HELD_ERASES):
                h = decode_header(bytes(raw))
                head = self.logs.heads.get((h.writer, h.epoch))
                try:
                    payload = decode_payload(h.kind, bytes(data))
                except ProtocolError:
                    continue
                admitted = self.membership is None or self.membership.check(h, payload) is None
                if not admitted or head is None or head.hides(h.seq):
                    continue
                txn.add("UPDATE headers SET applied = 1 WHERE pos = ?", (pos,))
                at = (pos, log_id, h.writer, h.epoch, h.seq, h.hlc)
                await self._apply(
                    txn, AppliedEntry(*at, h.kind, payload, self.moment()), self.now_ms()
                )
                applied += 1
            self.delete_state(txn, HELD)
            return applied

        done: int = await self.run(op)
        return done

    async def place_held(self) -> int:
        """Record the place of the entries held from before partial replication, once (the
        step that brought it asks for it, node/store/partial.py).  How many were placed."""
        assert self.reader is not None
        if await self.reader.state(PLACES_DUE) is None:
            return 0

        async def op(txn: Txn) -> int:
            placed = await unplaced(txn.fetchall, txn.add)
            self.delete_state(txn, PLACES_DUE)
            return placed

        done: int = await self.run(op)
        return done

    # -- upkeep: the scrub after an erase, the withhold after a grant narrowed --------------------

    async def scrub(self) -> bool:
        """Finish a scrub an erase left due: merge the search index, then truncate the WAL;
        False when none was due (asked of the reader first, so a store with none due takes
        no write lock for it)."""
        assert self.reader is not None
        if await self.reader.state(SCRUB) is None and not self.erasures.erased.is_set():
            return False
        return await self._scrub()

    async def _scrub(self) -> bool:
        """``scrub`` without asking the reader: its transaction, queued behind the erase that
        asked for it, sees whether one is due (node/store/erasure.py)."""
        async with self._scrubbing:
            if not await self.run(lambda txn: scrub_step(txn, self.views)):
                return False
            if not await truncate_wal(self.path):
                log.warning("wal_not_truncated")
            return True

    async def withhold(self) -> bool:
        """Withhold the payloads this node's grant no longer holds (docs/partial.md
        §Shrinking a grant), in one transaction: they and what the pending area and the
        audit feed hold of those workspaces go, and the views are rebuilt from what stays;
        a scrub follows, as after an erase.  False when nothing was due."""

        async def op(txn: Txn) -> bool:
            if not await self.has_state(txn, WITHHOLD_DUE):
                return False  # (asked for before the narrowing grant committed: it is after)
            held = self.membership.held() if self.membership is not None else None
            if held is not None:
                withhold(txn.add, held)
                await self._replay(txn, None)
                self.put_state(txn, SCRUB, b"\x01")
            self.delete_state(txn, WITHHOLD_DUE)
            return True

        done: bool = await self.run(op)
        if done:
            self.erasures.erased.set()
        return done

    # -- the in-memory state -------------------------------------------------------------------

    async def _reload(self) -> None:
        assert self._conn is not None
        for view in self.views:
            view.reset()
        await self.logs.load(self._conn)
        await self.erasures.load(self._conn)
        for view in self.views:
            await view.load(self._scalar)
        rows = await self._conn.execute_fetchall("SELECT value FROM state WHERE key = 'hlc'")
        saved = decode_hlc(rows[0][0]) if rows else Hlc(0, 0)
        if saved > self.clock.last:
            self.clock = HybridClock(saved, max_skew_ms=self.options.max_clock_skew_ms)
        self._clock_saved = saved

    async def _restale(self, version: int) -> None:
        """Another process committed since the last batch (a ``memlane write`` beside a
        running ``memlane serve``): reload the in-memory heads, positions, view caches and
        clock; the writer then builds the batch again (node/store/writer.py)."""
        self._data_version = version
        await self._reload()

    async def _scalar(self, sql: str) -> Any:
        assert self._conn is not None
        rows = await self._conn.execute_fetchall(sql)
        return rows[0][0] if rows else None

    def _settle(self, db: sqlite3.Connection) -> None:
        for view in self.views:
            view.settle(db)

    def _save_clock(self, txn: Txn) -> None:
        if self.clock.last != self._clock_saved:
            txn.add(_STATE_UPSERT, ("hlc", encode_hlc(self.clock.last)))
            self._clock_saved = self.clock.last


def _repeat(
    name: str, due: asyncio.Event, work: Callable[[], Awaitable[bool]], *, pause: float
) -> asyncio.Task[None]:
    """A task doing ``work`` each time ``due`` is set, then resting ``pause`` seconds when it
    did something: erases in between are scrubbed together, so a writer erasing without pause
    costs the others one merge of the index a minute, not one an erase."""

    async def loop() -> None:
        try:
            while True:
                await due.wait()
                due.clear()
                if await work() and pause:
                    await asyncio.sleep(pause)
        except StoreError as exc:  # the store closing under it
            log.warning(f"{name}_stopped", error=str(exc))

    return asyncio.create_task(loop(), name=f"memlane-{name}")
