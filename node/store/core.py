"""What every part of the store holds and runs on: its options, its in-memory state (the log
heads, the clock, the views), its moment and the group commit every write goes through.

The ``Store`` is built in layers, a module each: this one, ``state.py`` (local state and
audit), ``sealing.py`` (authoring and appending), ``receiving.py`` (the receive entry points)
and ``store.py`` (opening, migrating and closing; the views rebuilt and caught up).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from node.errors import StoreError
from node.store.audit import RejectionLimiter
from node.store.connection import Connection
from node.store.erasure import Erasures
from node.store.heads import LogTable
from node.store.reader import Reader
from node.store.received import Admission
from node.store.txn import Txn
from node.store.views import Applied, View
from node.store.writer import GroupWriter
from protocol.clock import Hlc, HybridClock
from protocol.kinds import KINDS

__all__ = ["StoreOptions", "Wall"]

_STATE_UPSERT = "INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)"

Wall = Callable[[], int]


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
        statement_process: bool = False,
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
        # The writer's connection in a child process, so SQLite's work overlaps the event
        # loop's (node/store/statements.py); a served node's default (node/config).
        self.statement_process = statement_process


class _StoreCore:
    """The store's in-memory state and its group commit (``Store``)."""

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
        for view in self.views:
            view.bind(self.moment)
        self._views_for = {k: tuple(v for v in self.views if k in v.kinds) for k in KINDS}
        self._conn: Connection | None = None
        self._ahead: Connection | None = None  # reads of what is committed (Txn.fetch_committed)
        self._writer: GroupWriter | None = None
        self.reader: Reader | None = None
        self._clock_saved = Hlc(0, 0)
        self._data_version: int | None = None  # the database's, as the last batch began
        self.mesh: bytes | None = None
        # The membership rule (node.members.membership); None admits every writer.
        self.membership: Admission | None = None
        self._swept: int | None = None  # when expired pending rows were last looked for
        self._scrubber: asyncio.Task[None] | None = None
        self._scrubbing = asyncio.Lock()
        # Set when this node's grant narrows: the payloads it no longer holds are withheld.
        self.narrowed = asyncio.Event()
        self._withholder: asyncio.Task[None] | None = None

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

    @property
    def commits(self) -> int:
        return self._writer.commits if self._writer else 0

    # -- writing ---------------------------------------------------------------------------------

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

    async def _apply(self, txn: Txn, item: Applied) -> None:
        for view in self._views_for.get(item.kind, ()):
            await view.apply(txn, item)
