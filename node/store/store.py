"""The store: one SQLite file, a single group-committing writer, separate readers.

Its narrow interface (docs/architecture.md §Store): ``author`` (seal and append an entry of
this node's own log), ``receive`` (the append path for entries from elsewhere), ``run`` (any
other local write in the same group commit), and ``select_*`` / ``max_*`` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from node.errors import StoreError
from node.logging import get_logger
from node.progress import Progress
from node.store.connection import Connection
from node.store.core import _STATE_UPSERT, StoreOptions, Wall
from node.store.erasure import HELD, HELD_ERASES, SCRUB, SCRUB_INTERVAL, scrub_step
from node.store.failures import translated
from node.store.heads import decode_hlc, encode_hlc
from node.store.partial import PLACES_DUE, WITHHOLD_DUE, unplaced, withhold
from node.store.reader import Reader
from node.store.receiving import _Receiving
from node.store.schema import migrate, refuse_newer
from node.store.txn import Txn
from node.store.views import Applied, View
from node.store.writer import GroupWriter
from protocol.clock import Hlc, HybridClock
from protocol.entry import decode_header
from protocol.errors import ProtocolError
from protocol.kinds import decode_payload

__all__ = ["Store"]

_REPLAY = (
    "SELECT h.pos, h.log_id, h.raw, p.data FROM headers h JOIN payloads p ON p.pos = h.pos "
    "WHERE h.pos > ? AND h.applied = 1 ORDER BY h.pos LIMIT 1000"
)
_CHECKPOINT_TRIES = 100  # ~5 s of readers finishing before the WAL is left for the next time
log = get_logger(__name__)
_APPLIED_COUNT = (
    "SELECT count(*) FROM headers h JOIN payloads p ON p.pos = h.pos WHERE h.applied = 1"
)


class Store(_Receiving):
    """The node's log and local state in one SQLite file."""

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
        self._conn = await Connection.open(
            self.path, process=self.options.statement_process, isolation_level=None
        )
        # A newer store is refused before anything touches it.
        await refuse_newer(self._conn, len(self.migrations))
        await self._conn.execute("PRAGMA journal_mode=WAL")
        await self._conn.execute(f"PRAGMA synchronous={self.options.synchronous}")
        # Deleted rows and freed pages are overwritten with zeros: erased bytes do not linger
        # in the file's free space (docs/erasure.md; most builds' default already).
        await self._conn.execute("PRAGMA secure_delete=ON")
        await self._conn.execute("PRAGMA foreign_keys=ON")
        await migrate(self._conn, self.migrations)
        await self._reload()
        self._data_version = await self._scalar("PRAGMA data_version")
        self._ahead = await Connection.open(self.path, isolation_level=None)
        await self._ahead.execute("PRAGMA query_only=1")
        self._writer = GroupWriter(
            self._conn,
            on_rollback=self._reload,
            on_stale=self._restale,
            expect=lambda: self._data_version,
            before_commit=self._save_clock,
            committed=self._ahead.execute_fetchall,
            max_batch=self.options.max_batch,
        )
        self._writer.start()
        countable = frozenset(t for view in self.views for t in view.countable)
        self.reader = await Reader.open(self.path, countable=countable)
        if await self.reader.state("views_stale") is not None:
            await self.rebuild_views()
        if await self.reader.state(SCRUB) is not None:  # one left due when it last closed
            self.erasures.erased.set()
        self._scrubber = asyncio.create_task(self._scrub_when_erased(), name="memlane-scrub")
        if await self.reader.state(WITHHOLD_DUE) is not None:  # the same, for a withhold
            self.narrowed.set()
        self._withholder = asyncio.create_task(
            self._withhold_when_narrowed(), name="memlane-withhold"
        )

    async def close(self) -> None:
        if self._withholder is not None:
            self._withholder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._withholder
            self._withholder = None
        if self._scrubber is not None:
            self._scrubber.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scrubber
            self._scrubber = None
            # An erase's scrub is finished before the store closes (a few seconds at a
            # million SRs), so `memlane erase` returns with the bytes gone.
            with contextlib.suppress(StoreError):
                await self.scrub()
        if self._writer is not None:
            await self._writer.stop()
            self._writer = None
        if self.reader is not None:
            await self.reader.close()
            self.reader = None
        if self._ahead is not None:
            await self._ahead.close()
            self._ahead = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    # -- the scrub after an erase (node/store/erasure.py) --------------------------------------

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
        asked for it, sees whether one is due."""
        async with self._scrubbing:
            if not await self.run(lambda txn: scrub_step(txn, self.views)):
                return False
            await self._truncate_wal()
            return True

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
                item = Applied(pos, log_id, h.writer, h.epoch, h.seq, h.hlc, h.kind, payload)
                await self._applied(txn, item, self.now_ms())
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

    async def _scrub_when_erased(self) -> None:
        """Scrub after erases, at most once every ``SCRUB_INTERVAL``: erases in between are
        scrubbed together, so a writer erasing without pause costs the others one merge of
        the index a minute, not one an erase."""
        try:
            while True:
                await self.erasures.erased.wait()
                self.erasures.erased.clear()
                if await self._scrub():
                    await asyncio.sleep(SCRUB_INTERVAL)
        except StoreError as exc:  # the store closing under it
            log.warning("erase_scrub_stopped", error=str(exc))

    async def _truncate_wal(self) -> None:
        """Checkpoint the WAL into the file and cut it to nothing, so erased bytes written
        to it earlier are gone; a reader still on an older snapshot makes it wait a little."""
        conn = await Connection.open(self.path, isolation_level=None)
        try:
            for _ in range(_CHECKPOINT_TRIES):
                busy = (await conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)"))[0][0]
                if not busy:
                    return
                await asyncio.sleep(0.05)
            log.warning("wal_not_truncated", tries=_CHECKPOINT_TRIES)
        finally:
            await conn.close()

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

    def _save_clock(self, txn: Txn) -> None:
        if self.clock.last != self._clock_saved:
            txn.add(_STATE_UPSERT, ("hlc", encode_hlc(self.clock.last)))
            self._clock_saved = self.clock.last

    # -- views -----------------------------------------------------------------------------------

    async def rebuild_views(self, progress: Progress | None = None) -> int:
        """Empty every view and replay the log into it (``memlane views rebuild``); return
        how many entries were applied (``progress`` is told them, phase ``rebuild``).  One
        transaction: readers see the old views until the new ones are complete."""

        async def op(txn: Txn) -> int:
            return await self._replay(txn, progress)

        count: int = await self.run(op)
        return count

    async def _replay(self, txn: Txn, progress: Progress | None) -> int:
        txn.wide = True
        for view in self.views:
            view.reset()
            for sql in view.clear:
                txn.add(sql, ())
        total = (await txn.fetchone(_APPLIED_COUNT) or (0,))[0] if progress else 0
        applied, after = 0, 0
        while rows := await txn.fetchall(_REPLAY, (after,)):
            for pos, log_id, raw, data in rows:
                h = decode_header(bytes(raw))
                item = Applied(
                    pos,
                    log_id,
                    h.writer,
                    h.epoch,
                    h.seq,
                    h.hlc,
                    h.kind,
                    decode_payload(h.kind, bytes(data)),
                )
                await self._apply(txn, item)
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

    async def _withhold_when_narrowed(self) -> None:
        try:
            while True:
                await self.narrowed.wait()
                self.narrowed.clear()
                await self.withhold()
        except StoreError as exc:  # the store closing under it
            log.warning("withhold_stopped", error=str(exc))

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
