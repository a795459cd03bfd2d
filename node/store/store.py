"""The store: one SQLite file, a single group-committing writer, separate readers.

Its narrow interface (docs/architecture.md §Store): ``author`` (seal and append an entry of
this node's own log), ``receive`` (the append path for entries from elsewhere), ``run`` (any
other local write in the same group commit), and ``select_*`` / ``max_*`` reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from node.errors import StoreError
from node.progress import Progress
from node.store import ingest
from node.store.audit import Event, RejectionLimiter, audit
from node.store.failures import translated
from node.store.heads import LogHead, LogTable, decode_hlc, encode_hlc
from node.store.pending import SWEEP_EVERY_MS, SourceRow, delete_pending, expire_pending
from node.store.pending import select_sources as _select_sources
from node.store.reader import Reader
from node.store.schema import migrate, refuse_newer
from node.store.txn import Txn
from node.store.views import Applied, View
from node.store.writer import GroupWriter
from protocol.clock import Hlc, HybridClock
from protocol.entry import Entry, LogId, decode_header
from protocol.kinds import KINDS, decode_payload, is_known
from protocol.signing import SigningKey, seal

__all__ = ["Authored", "Content", "Store", "StoreOptions"]

_HEADER_INSERT = (
    "INSERT INTO headers (pos, id, log_id, seq, hlc_wall, hlc_counter, kind, applied, raw) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PAYLOAD_INSERT = "INSERT INTO payloads (pos, data) VALUES (?, ?)"
_LOG_UPSERT = (
    "INSERT INTO logs (log_id, writer, epoch, head_seq, head_id, forked_at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (log_id) DO UPDATE SET "
    "head_seq = excluded.head_seq, head_id = excluded.head_id, forked_at = excluded.forked_at"
)
_STATE_UPSERT = "INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)"
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

Wall = Callable[[], int]
_EXPIRED = "it waited in the pending area longer than pending_expiry"
Content = tuple[bytes, dict[str, Any]] | Callable[[Txn], Awaitable[tuple[bytes, dict[str, Any]]]]


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


class Authored:
    """What ``author`` returns: the entry's store position and clock, and — once the batch
    is committed — the sealed entry itself."""

    __slots__ = ("_entry", "hlc", "pos")

    def __init__(self, pos: int, hlc: Hlc) -> None:
        self.pos = pos
        self.hlc = hlc
        self._entry: Entry | None = None

    @property
    def entry(self) -> Entry:
        if self._entry is None:
            raise StoreError("the entry is sealed when its batch commits")
        return self._entry


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
        self.clock = HybridClock(max_skew_ms=options.max_clock_skew_ms)
        self.limiter = RejectionLimiter()
        self.views: tuple[View, ...] = tuple(views)
        for view in self.views:
            view.bind(self.moment)
        self._views_for = {k: tuple(v for v in self.views if k in v.kinds) for k in KINDS}
        self._conn: aiosqlite.Connection | None = None
        self._writer: GroupWriter | None = None
        self.reader: Reader | None = None
        self._clock_saved = Hlc(0, 0)
        self._data_version: int | None = None  # the database's, as the last batch began
        self.mesh: bytes | None = None
        # The membership rule (node.members.membership); None admits every writer.
        self.membership: ingest.Admission | None = None
        self._swept: int | None = None  # when expired pending rows were last looked for

    # -- lifecycle ---------------------------------------------------------------------------

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
        self._conn = await aiosqlite.connect(self.path, isolation_level=None)
        # A newer store is refused before anything touches it.
        await refuse_newer(self._conn, len(self.migrations))
        await self._conn.execute("PRAGMA journal_mode=WAL")
        await self._conn.execute(f"PRAGMA synchronous={self.options.synchronous}")
        await self._conn.execute("PRAGMA foreign_keys=ON")
        await migrate(self._conn, self.migrations)
        await self._reload()
        self._data_version = await self._scalar("PRAGMA data_version")
        self._writer = GroupWriter(
            self._conn,
            on_rollback=self._reload,
            on_begin=self._begin,
            before_commit=self._save_clock,
            max_batch=self.options.max_batch,
        )
        self._writer.start()
        countable = frozenset(t for view in self.views for t in view.countable)
        self.reader = await Reader.open(self.path, countable=countable)
        if await self.reader.state("views_stale") is not None:
            await self.rebuild_views()

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.stop()
            self._writer = None
        if self.reader is not None:
            await self.reader.close()
            self.reader = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def _reload(self) -> None:
        assert self._conn is not None
        for view in self.views:
            view.reset()
        await self.logs.load(self._conn)
        for view in self.views:
            await view.load(self._scalar)
        async with self._conn.execute("SELECT value FROM state WHERE key = 'hlc'") as cur:
            row = await cur.fetchone()
        saved = decode_hlc(row[0]) if row else Hlc(0, 0)
        if saved > self.clock.last:
            self.clock = HybridClock(saved, max_skew_ms=self.options.max_clock_skew_ms)
        self._clock_saved = saved

    async def _begin(self, txn: Txn) -> None:
        """Each batch starts by taking the write lock; if another process committed since
        the last batch (a ``memlane write`` beside a running ``memlane serve``), the
        in-memory heads, positions, view caches and clock are reloaded first."""
        version = await txn.begin()
        if version != self._data_version:
            await self._reload()
        self._data_version = version

    async def _scalar(self, sql: str) -> Any:
        assert self._conn is not None
        async with self._conn.execute(sql) as cur:
            row = await cur.fetchone()
        return row[0] if row else None

    def moment(self) -> int:
        """This node's moment for its views: its clock (docs/tools/e_timeline.md
        §Views at a moment)."""
        return self.clock.last.wall

    def now_ms(self, wall: int | None = None) -> int:
        """This node's moment: its wall clock, or its clock when that is ahead — what a read
        is answered at (``catch_up_views`` brings views there) and what arrivals, imports and
        peer events are stamped with.  ``wall`` is a reading of the wall clock already taken
        (the receive path's, for the entry it stamps); ``self.wall()`` when None."""
        return max(self.clock.last.wall, self.wall() if wall is None else wall)

    def _save_clock(self, txn: Txn) -> None:
        if self.clock.last != self._clock_saved:
            txn.add(_STATE_UPSERT, ("hlc", encode_hlc(self.clock.last)))
            self._clock_saved = self.clock.last

    @property
    def commits(self) -> int:
        return self._writer.commits if self._writer else 0

    # -- writing -----------------------------------------------------------------------------

    def run(self, op: Callable[[Txn], Awaitable[Any]]) -> asyncio.Future[Any]:
        """Run ``op`` inside the next group commit; the future resolves once it is durable."""
        if self._writer is None:
            raise StoreError("the store is closed")
        return self._writer.submit(op)

    async def refresh(self) -> None:
        """Take in what other processes committed: a batch that writes nothing, whose start
        reloads the in-memory state if the database changed.  ``StoreError`` if no write
        transaction can be begun."""

        async def nothing(txn: Txn) -> None:
            return None

        await self.run(nothing)

    def now(self) -> Hlc:
        """A fresh timestamp from this node's clock."""
        return self.clock.now(self.wall())

    def author(
        self,
        key: SigningKey,
        mesh: bytes,
        epoch: bytes,
        kind: str,
        content: Content,
        after: Callable[[Txn, Authored], None] | None = None,
    ) -> asyncio.Future[Authored]:
        """Append one entry of this node's log, sealed when its batch is written.

        ``content`` is the encoded payload with its decoded form, or an async function that
        returns them inside the transaction (so it may read the store, e.g. for an episode's
        ``prev_id``) and may refuse.  ``after`` queues the entry's audit event.  Signing
        happens on SQLite's thread just before the batch is written, each entry chained to the
        one sealed before it.
        """

        async def op(txn: Txn) -> Authored:
            data, payload = content if isinstance(content, tuple) else await content(txn)
            head = self.logs.head((key.public, epoch))
            head.seq += 1
            authored = Authored(self.logs.take_pos(), self.now())
            txn.defer(_sealer(key, mesh, epoch, head, kind, data, authored, head.seq),
                      _LOG_UPSERT, _HEADER_INSERT, _PAYLOAD_INSERT)  # fmt: skip
            txn.defer_once(("head", head.log_id), _head_writer(head, key.public, epoch))
            fresh = kind == "sr.put" and bool(payload.get("create"))
            item = Applied(authored.pos, head.log_id, key.public, epoch, head.seq, authored.hlc,
                           kind, payload, fresh)  # fmt: skip
            await self._apply(txn, item)
            if after is not None:
                after(txn, authored)
            return authored

        return self.run(op)

    async def append_attached(
        self, txn: Txn, head: LogHead, entry: Entry, payload: dict[str, Any] | None
    ) -> int:
        """Queue one attached entry: header, payload, head, view rows."""
        h = entry.header
        pos = self.logs.take_pos()
        applied = payload is not None and not head.hides(h.seq)
        head.seq, head.id, head.id_seq = h.seq, entry.id, h.seq
        # The log row first: headers reference it.
        txn.put(
            _LOG_UPSERT,
            head.log_id,
            (head.log_id, h.writer, h.epoch, head.seq, head.id, head.forked_at),
        )
        txn.add(
            _HEADER_INSERT,
            (
                pos,
                entry.id,
                head.log_id,
                h.seq,
                h.hlc.wall,
                h.hlc.counter,
                h.kind,
                int(applied),
                entry.raw,
            ),
        )
        if entry.payload is not None:
            txn.add(_PAYLOAD_INSERT, (pos, entry.payload))
        if applied and payload is not None:
            await self.apply_views(txn, pos, head, entry, payload)
        return pos

    async def apply_views(
        self, txn: Txn, pos: int, head: LogHead, entry: Entry, payload: dict[str, Any]
    ) -> None:
        h = entry.header
        await self._apply(txn, Applied(pos, head.log_id, h.writer, h.epoch, h.seq, h.hlc,
                                       h.kind, payload))  # fmt: skip

    async def _apply(self, txn: Txn, item: Applied) -> None:
        for view in self._views_for.get(item.kind, ()):
            await view.apply(txn, item)

    def admit(self, entry: Entry) -> str | None:
        """Why ``entry`` may not enter this store, or None: the mesh must match.  The
        membership rule (``membership``) is applied log by log on the receive path."""
        if self.mesh is not None and entry.header.mesh != self.mesh:
            return "entry belongs to another mesh"
        return None

    async def receive(
        self,
        entries: Sequence[ingest.Received],
        *,
        source: str,
        event: Event | None = Event.SR_SYNCED,
    ) -> ingest.Report:
        """The append path for entries from elsewhere (sync, bundles, tests).

        Authenticate (one rule, chain-amortised), check membership and mesh, detect forks,
        insert idempotently and audit — all in one transaction.  Entries that cannot attach
        or be authenticated yet wait in the pending area.  ``event`` is written once per
        newly stored entry (``None`` for paths that audit once per batch).
        """

        async def op(txn: Txn) -> ingest.Report:
            return await self.receive_in(txn, entries, source=source, event=event)

        report: ingest.Report = await self.run(op)
        return report

    async def receive_in(
        self,
        txn: Txn,
        entries: Sequence[ingest.Received],
        *,
        source: str,
        event: Event | None,
    ) -> ingest.Report:
        """``receive`` inside a transaction the caller runs: a bundle import feeds it batch
        after batch and commits them all at once."""
        await self._expire_pending(txn)
        return await ingest.Ingest(self, txn, source, event).run(entries)

    # -- the pending area (node/store/pending.py) ----------------------------------------------

    async def _expire_pending(self, txn: Txn) -> None:
        """Drop rows that waited beyond ``pending_expiry``: at the first receive after the
        store opens, then at most once a ``SWEEP_EVERY_MS``; each audited as rejected."""
        now = self.wall()
        if self._swept is not None and now - self._swept < SWEEP_EVERY_MS:
            return
        self._swept = now
        gone = await expire_pending(txn, before=now - self.options.pending_expiry_ms)
        if not gone:
            return
        await self.logs.pending_left(txn.fetchall)
        for row in gone:
            self.audit_rejection(txn, row.source, Event.ENTRY_REJECTED, _EXPIRED, row.id)

    async def select_pending(self) -> list[SourceRow]:
        """What each source holds in the pending area."""
        assert self.reader is not None
        return await _select_sources(self.reader.fetchall)

    async def clear_pending(self, *, source: str | None = None, before: int | None = None) -> int:
        """Delete the waiting entries of ``source`` (every source when None) that arrived
        before ``before`` (ms by this node's wall clock; any time when None), in one
        transaction; how many."""

        async def op(txn: Txn) -> int:
            cleared = await delete_pending(txn, source=source, before=before)
            await self.logs.pending_left(txn.fetchall)
            return cleared

        count: int = await self.run(op)
        return count

    async def hide_log(self, txn: Txn, head: LogHead, from_seq: int) -> None:
        """Hide a log's entries from ``from_seq`` on (a fork): views withdraw them."""
        if head.forked_at is not None and head.forked_at <= from_seq:
            return
        head.forked_at = from_seq
        for view in self.views:
            await view.hide(txn, head.log_id, from_seq)
        txn.add(
            "UPDATE headers SET applied = 0 WHERE log_id = ? AND seq >= ?", (head.log_id, from_seq)
        )

    async def rebuild_views(self, progress: Progress | None = None) -> int:
        """Empty every view and replay the log into it (``memlane views rebuild``); return
        how many entries were applied (``progress`` is told them, phase ``rebuild``).  One
        transaction: readers see the old views until the new ones are complete."""

        async def op(txn: Txn) -> int:
            for view in self.views:
                view.reset()
                for sql in view.clear:
                    txn.add(sql, ())
            total = (await txn.fetchone(_APPLIED_COUNT) or (0,))[0] if progress else 0
            applied, after = 0, 0
            while rows := await txn.fetchall(_REPLAY, (after,)):
                for pos, log_id, raw, data in rows:
                    h = decode_header(bytes(raw))
                    item = Applied(pos, log_id, h.writer, h.epoch, h.seq, h.hlc, h.kind,
                                   decode_payload(h.kind, bytes(data)))  # fmt: skip
                    await self._apply(txn, item)
                after, applied = rows[-1][0], applied + len(rows)
                if progress is not None:
                    progress("rebuild", applied, max(total, applied))
            for view in self.views:
                for sql in view.restore:
                    txn.add(sql, ())
            txn.add("DELETE FROM state WHERE key = 'views_stale'", ())
            return applied

        count: int = await self.run(op)
        return count

    async def catch_up_views(self) -> None:
        """Bring the views to this moment: versions whose time has come become current."""
        assert self.reader is not None
        moment = self.now_ms()
        due = min((v.next_due for v in self.views if v.next_due is not None), default=None)
        if due is None or due > moment:
            return

        async def op(txn: Txn) -> None:
            self.clock.update(Hlc(moment, 0), moment)
            for view in self.views:
                await view.catch_up(txn, moment)

        await self.run(op)

    def decode_known(self, entry: Entry) -> dict[str, Any] | None:
        """The validated payload of a known kind, or None (unknown kind or payload absent)."""
        if entry.payload is None or not is_known(entry.header.kind):
            return None
        return decode_payload(entry.header.kind, entry.payload)

    def admit_event(self, source: str, event: Event) -> int | None:
        """The audit feed's rate limit (``RejectionLimiter``, docs/tools/e_audit.md): how many
        ``event``s of ``source`` the one written now stands for, or None when it is only
        counted."""
        return self.limiter.admit(source, event, self.wall())

    def audit_rejection(
        self, txn: Txn, source: str, event: Event, reason: str, entry: bytes | None
    ) -> None:
        now = self.clock.last.wall
        count = self.admit_event(source, event)
        if count is not None:
            audit(
                txn,
                event,
                now,
                entry=entry,
                detail={"source": source, "reason": reason, "count": count},
            )

    async def audit_limited(self, event: Event, source: str, detail: Mapping[str, object]) -> None:
        """Write ``event`` of ``source`` in a transaction of its own, stamped at this node's
        moment, unless the rate limit only counts it (``admit_event``): ``peer_connected`` /
        ``peer_disconnected``, at most one a peer and event a minute."""
        count = self.admit_event(source, event)
        if count is None:
            return

        async def op(txn: Txn) -> None:
            audit(txn, event, self.now_ms(), detail={"source": source, "count": count, **detail})

        await self.run(op)

    # -- state -------------------------------------------------------------------------------

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


def _sealer(
    key: SigningKey,
    mesh: bytes,
    epoch: bytes,
    head: LogHead,
    kind: str,
    data: bytes,
    authored: Authored,
    seq: int,
) -> Callable[[Callable[[str, Sequence[Any]], None]], None]:
    """Seal one authored entry on the writer's thread, chained to the entry sealed before it
    (``head.id`` is only ever advanced there, in commit order)."""
    pos, hlc = authored.pos, authored.hlc

    def run(add: Callable[[str, Sequence[Any]], None]) -> None:
        entry = seal(key, mesh=mesh, epoch=epoch, seq=seq, prev=head.id, hlc=hlc, kind=kind,
                     payload=data)  # fmt: skip
        head.id, head.id_seq = entry.id, seq
        add(_HEADER_INSERT, (pos, entry.id, head.log_id, seq, hlc.wall, hlc.counter, kind,
                             int(not head.hides(seq)), entry.raw))  # fmt: skip
        add(_PAYLOAD_INSERT, (pos, data))
        authored._entry = entry

    return run


def _head_writer(
    head: LogHead, writer: bytes, epoch: bytes
) -> Callable[[Callable[[str, Sequence[Any]], None]], None]:
    """The log's row, once per batch, after its entries were sealed."""

    def run(add: Callable[[str, Sequence[Any]], None]) -> None:
        add(_LOG_UPSERT, (head.log_id, writer, epoch, head.id_seq, head.id, head.forked_at))

    return run
