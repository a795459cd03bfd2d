"""Appending to the log: this node's own entries authored, sealed when their batch is written,
and an attached entry from elsewhere queued with its head and view rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from node.errors import Refusal, StoreError
from node.store.erasure import ERASE
from node.store.heads import LogHead
from node.store.partial import MISSING_INSERT, WITHHOLD_DUE, not_held
from node.store.state import _StateAudit
from node.store.txn import Txn
from node.store.views import Applied
from protocol.clock import Hlc
from protocol.entry import Entry
from protocol.kinds import place_of
from protocol.signing import SigningKey, seal

__all__ = ["Authored", "Content"]

_HEADER_INSERT = (
    "INSERT INTO headers (pos, id, log_id, seq, hlc_wall, hlc_counter, kind, applied, raw, "
    "workspace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PAYLOAD_INSERT = "INSERT INTO payloads (pos, data) VALUES (?, ?)"
_LOG_UPSERT = (
    "INSERT INTO logs (log_id, writer, epoch, head_seq, head_id, forked_at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (log_id) DO UPDATE SET "
    "head_seq = excluded.head_seq, head_id = excluded.head_id, forked_at = excluded.forked_at"
)

Content = tuple[bytes, dict[str, Any]] | Callable[[Txn], Awaitable[tuple[bytes, dict[str, Any]]]]


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


class _Sealing(_StateAudit):
    """Authoring and appending (``Store``)."""

    # -- authoring -------------------------------------------------------------------------------

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
            place = place_of(kind, payload)
            if self.membership is not None and not self.membership.may_hold(place):
                # A token issued before this node's grant narrowed (docs/partial.md).
                raise Refusal(not_held(place))
            head = self.logs.head((key.public, epoch))
            head.seq += 1
            authored = Authored(self.logs.take_pos(), self.now())
            sealer = _sealer(key, mesh, epoch, head, kind, (data, place), authored, head.seq)
            txn.defer(sealer, _LOG_UPSERT, _HEADER_INSERT, _PAYLOAD_INSERT)
            txn.defer_once(("head", head.log_id), _head_writer(head, key.public, epoch))
            fresh = kind == "sr.put" and bool(payload.get("create"))
            item = Applied(
                authored.pos,
                head.log_id,
                key.public,
                epoch,
                head.seq,
                authored.hlc,
                kind,
                payload,
                fresh,
            )
            await self._applied(txn, item, authored.hlc.wall)
            if after is not None:
                after(txn, authored)
            return authored

        return self.run(op)

    async def append_attached(
        self,
        txn: Txn,
        head: LogHead,
        entry: Entry,
        payload: dict[str, Any] | None,
        place: str | None,
        erased: bool = False,
    ) -> int:
        """Queue one attached entry: header (with its ``place``), payload, head, view rows;
        one without its payload (and not ``erased``) is missing (node/store/partial.py)."""
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
                place,
            ),
        )
        if entry.payload is not None:
            txn.add(_PAYLOAD_INSERT, (pos, entry.payload))
        elif not erased:
            txn.add(MISSING_INSERT, (pos, place))
        if applied and payload is not None:
            await self.apply_views(txn, pos, head, entry, payload)
        return pos

    async def apply_views(
        self, txn: Txn, pos: int, head: LogHead, entry: Entry, payload: dict[str, Any]
    ) -> None:
        h = entry.header
        item = Applied(pos, head.log_id, h.writer, h.epoch, h.seq, h.hlc, h.kind, payload)
        await self._applied(txn, item, self.now_ms())

    async def _applied(self, txn: Txn, item: Applied, at: int) -> None:
        """The views take ``item`` in; an erase then takes its SR out (``at`` stamps its
        event).  A rebuild replays only the views: what an erase took is gone from the log."""
        await self._apply(txn, item)
        if item.kind == ERASE:
            await self.erasures.erase(txn, self.views, item, at)
        elif item.kind == "member.add" and self.membership and self.membership.take_narrowed():
            self.put_state(txn, WITHHOLD_DUE, b"\x01")  # done after this commit (Store.withhold)
            self.narrowed.set()


def _sealer(
    key: SigningKey,
    mesh: bytes,
    epoch: bytes,
    head: LogHead,
    kind: str,
    content: tuple[bytes, str | None],
    authored: Authored,
    seq: int,
) -> Callable[[Callable[[str, Sequence[Any]], None]], None]:
    """Seal one authored entry on the writer's thread, chained to the entry sealed before it
    (``head.id`` is only ever advanced there, in commit order)."""
    pos, hlc = authored.pos, authored.hlc
    data, place = content

    def run(add: Callable[[str, Sequence[Any]], None]) -> None:
        entry = seal(
            key, mesh=mesh, epoch=epoch, seq=seq, prev=head.id, hlc=hlc, kind=kind, payload=data
        )
        head.id, head.id_seq = entry.id, seq
        add(
            _HEADER_INSERT,
            (
                pos,
                entry.id,
                head.log_id,
                seq,
                hlc.wall,
                hlc.counter,
                kind,
                int(not head.hides(seq)),
                entry.raw,
                place,
            ),
        )
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
