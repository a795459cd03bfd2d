"""The receive path: entries from elsewhere (sync, bundles, a joiner's first log) taken into a
``Store``, one batch inside one write transaction (docs/entries.md §Receiving).

For each log the batch touches:

1. decode and pre-check each entry (envelope, payload hash, mesh, payload schema); a failure
   is rejected and audited (rate-limited), and leaves no row.  These checks read nothing of the
   store, so a bundle import runs them before the transaction (``Ingest.precheck``);
2. the membership rule (``Admission``, docs/mesh.md): the authority's logs go first, so a
   ``member.add`` admits its writer's entries in the same batch; an entry whose writer has no
   ``member.add`` yet waits in the pending area and is released when one is applied, and an
   entry the rule refuses is rejected like a failed pre-check.  A payload this node's grant
   does not hold is dropped here, its header kept (docs/partial.md);
3. entries at or below the log's head are duplicates (a stored header may gain its payload) or,
   when authentic and different from the stored one, a fork;
4. entries above the head, together with that log's pending entries, are chained from the head
   by ``prev`` and authenticated with the one rule (``protocol.signing.authenticate``); the
   authentic prefix is appended (``Store.append``) within the bound on its writer's logs
   (``node.store.logbound``), the rest waits in the bounded pending area
   (``node.store.pending``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from node.refusals import REFUSALS
from node.store.audit import AuditEvent, audit
from node.store.heads import DROPPED, LogHead
from node.store.logbound import TooManyLogs, make_room
from node.store.partial import MISSING_DELETE, MISSING_INSERT, PLACE
from node.store.pending import (
    SWEEP_EVERY_MS,
    SourceRow,
    delete_pending,
    expire_pending,
    select_sources,
)
from node.store.store import Admission, Store, Wait
from node.store.writer import Txn
from protocol.canonical import encode_canonical
from protocol.entry import Entry, LogId
from protocol.errors import ProtocolError
from protocol.kinds import decode_payload, has_place, is_known, place_of
from protocol.signing import authentic_from, authenticate

__all__ = ["Candidate", "Ingest", "Prechecked", "Received", "RejectedEntry", "Report"]

# An entry as it arrives: decoded, or raw — its header and its payload, None when absent or,
# from a peer that holds no payload of it, the workspace the payload is placed in (a tag,
# docs/partial.md).
Received = Entry | tuple[bytes, bytes | str | None]

_EXPIRED = "it waited in the pending area longer than pending_expiry"
_FORK_INSERT = "INSERT INTO forks (writer, epoch, seq, kept_raw, other_raw) VALUES (?, ?, ?, ?, ?)"
_PENDING_INSERT = (
    "INSERT OR IGNORE INTO pending (id, writer, epoch, seq, raw, payload, source, size, arrived, "
    "workspace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PENDING_FILL = "UPDATE pending SET payload = ?, size = ? WHERE id = ?"
_PENDING_DELETE = "DELETE FROM pending WHERE id = ?"


@dataclass(slots=True)
class Report:
    """What one receive did, entry by entry counted."""

    stored: int = 0
    duplicate: int = 0
    filled: int = 0
    pending: int = 0
    rejected: int = 0
    forks: int = 0
    withheld: int = 0  # payloads refused: this node's grant does not hold their workspace
    # The entries whose payload was filled in: (the store's log id, seq, place).
    filled_at: list[tuple[int, int, str | None]] = field(default_factory=list)
    stored_ids: list[bytes] = field(default_factory=list)
    # The entries with content stored or filled in, by the SR or episode they are about: what
    # a bundle brought each reader (node/tools/audit.py).
    subjects: Counter[str] = field(default_factory=Counter)

    def brought(self, payload: dict[str, Any] | None) -> None:
        subject = _subject(payload)
        if subject is not None:
            self.subjects[subject] += 1


@dataclass(slots=True)
class Candidate:
    """An entry that passed the pre-checks: decoded, with its payload decoded when its kind is
    known, where that payload is placed, and whether it waited in the pending area."""

    entry: Entry
    payload: dict[str, Any] | None
    from_pending: bool = False
    place: str | None = None  # the workspace its payload is placed in (docs/partial.md)

    def without_payload(self) -> Candidate:
        return Candidate(self.entry.without_payload(), None, self.from_pending, self.place)


@dataclass(frozen=True, slots=True)
class RejectedEntry:
    """An entry that failed the pre-checks: why, and its id when it could be decoded."""

    reason: str
    entry_id: bytes | None


# What the pre-checks make of a received entry (``Ingest.precheck``).
Prechecked = Candidate | RejectedEntry


class Ingest:
    """The receive path into ``store``.  It keeps nothing of its own (what the receive path
    keeps in memory is the store's, reloaded with it), so any number may be made of one
    store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def receive(
        self,
        entries: Sequence[Received | Prechecked],
        *,
        source: str,
        event: AuditEvent | None = AuditEvent.SR_SYNCED,
    ) -> Report:
        """Authenticate (one rule, chain-amortised), check membership and mesh, detect forks,
        insert idempotently and audit — all in one transaction.  Entries that cannot attach
        or be authenticated yet wait in the pending area.  ``event`` is written once per newly
        stored entry (``None`` for paths that audit once per batch)."""

        async def op(txn: Txn) -> Report:
            return await self.receive_in(txn, entries, source=source, event=event)

        report: Report = await self.store.run(op)
        return report

    async def receive_in(
        self,
        txn: Txn,
        entries: Sequence[Received | Prechecked],
        *,
        source: str,
        event: AuditEvent | None,
    ) -> Report:
        """``receive`` inside a transaction the caller runs: a bundle import feeds it a chunk
        at a time, pre-checked before the transaction."""
        await self._expire_pending(txn)
        return await _Batch(self.store, txn, source, event).run(entries)

    def precheck(self, entries: Sequence[Received]) -> list[Prechecked]:
        """Step 1 for each entry, which reads nothing of the store: done before a
        transaction, it is not done in it."""
        return [_precheck(self.store, entry) for entry in entries]

    # -- the pending area (node/store/pending.py) ----------------------------------------------

    async def select_pending(self) -> list[SourceRow]:
        """What each source holds in the pending area."""
        assert self.store.reader is not None
        return await select_sources(self.store.reader.fetchall)

    async def clear_pending(self, *, source: str | None = None, before: int | None = None) -> int:
        """Delete the waiting entries of ``source`` (every source when None) that arrived
        before ``before`` (ms by this node's wall clock; any time when None), in one
        transaction; how many."""

        async def op(txn: Txn) -> int:
            cleared = await delete_pending(txn, source=source, before=before)
            await self.store.logs.pending_left(txn.fetchall)
            return cleared

        count: int = await self.store.run(op)
        return count

    async def _expire_pending(self, txn: Txn) -> None:
        """Drop rows that waited beyond ``pending_expiry``: at the first receive after the
        store opens, then at most once a ``SWEEP_EVERY_MS``; each audited as rejected."""
        store = self.store
        now = store.wall()
        tally = store.logs.pending_tally
        if tally.swept is not None and now - tally.swept < SWEEP_EVERY_MS:
            return
        tally.swept = now
        gone = await expire_pending(txn, before=now - store.options.pending_expiry_ms)
        if not gone:
            return
        await store.logs.pending_left(txn.fetchall)
        for row in gone:
            store.audit_rejection(txn, row.source, AuditEvent.ENTRY_REJECTED, _EXPIRED, row.id)


def _precheck(store: Store, item: Received | Prechecked) -> Prechecked:
    """Step 1 for one entry: it decodes, its payload is the one its header names, it is of
    ``store``'s mesh, and a payload of a known kind meets its schema."""
    if isinstance(item, Candidate | RejectedEntry):
        return item
    entry = item if isinstance(item, Entry) else None
    tag = None
    try:
        if entry is None:
            assert not isinstance(item, Entry)
            raw, sent = item
            tag = sent if isinstance(sent, str) else None
            # Checks the payload against its header.
            entry = Entry.decode(raw, sent if isinstance(sent, bytes) else None)
        else:
            entry.check_payload()
        if store.mesh is not None and entry.header.mesh != store.mesh:
            reason = "entry belongs to another mesh"
        else:
            payload = _decoded(entry)
            return Candidate(entry, payload, place=_place(entry, payload, tag))
    except ProtocolError as exc:
        reason = str(exc)
    return RejectedEntry(reason, entry.id if entry else None)


def _decoded(entry: Entry) -> dict[str, Any] | None:
    """The validated payload of a known kind, or None (unknown kind or payload absent)."""
    if entry.payload is None or not is_known(entry.header.kind):
        return None
    return decode_payload(entry.header.kind, entry.payload)


def _place(entry: Entry, payload: dict[str, Any] | None, tag: str | None) -> str | None:
    """Where an entry's payload is placed: read from the payload when it came, else the tag
    a peer sent for a kind that has a place (docs/partial.md)."""
    kind = entry.header.kind
    if payload is not None:
        return place_of(kind, payload)
    return tag if has_place(kind) and entry.payload is None else None


class _Batch:
    """One receive inside the writer's transaction: its store, transaction, source and
    report, through the steps above."""

    def __init__(self, store: Store, txn: Txn, source: str, event: AuditEvent | None) -> None:
        self.store = store
        self.txn = txn
        self.source = source
        self.event = event
        self.report = Report()
        self._detail = encode_canonical({"source": source})

    async def run(self, items: Sequence[Received | Prechecked]) -> Report:
        self.txn.reserve(MISSING_INSERT, MISSING_DELETE)  # in this order, whatever comes first
        by_log: dict[LogId, dict[bytes, Candidate]] = {}
        for item in items:
            cand = _precheck(self.store, item)
            if isinstance(cand, RejectedEntry):
                self._reject(cand.reason, cand.entry_id)
            else:
                by_log.setdefault(cand.entry.header.log, {})[cand.entry.id] = cand
        payloads = [
            (c.entry.header.kind, c.payload)
            for cands in by_log.values()
            for c in cands.values()
            if c.payload is not None
        ]
        for view in self.store.views:
            await view.prepare(self.txn, payloads)
        admission = self.store.membership
        authority = admission.authority if admission else None
        # The authority's logs first: its member entries decide the others' (docs/mesh.md
        # §The authority).
        for log in sorted(by_log, key=lambda log: log[0] != authority):
            await self._log(log, list(by_log[log].values()))
        # Then the waiting logs of writers this batch (or one since the last) admitted.
        writers = admission.take_admitted() if admission is not None else set()
        for log in [log for log in self.store.logs.pending_logs if log[0] in writers]:
            await self._log(log, [])
        return self.report

    def _reject(self, reason: str, entry_id: bytes | None) -> None:
        self.report.rejected += 1
        event = AuditEvent.ENTRY_REJECTED
        self.store.audit_rejection(self.txn, self.source, event, reason, entry_id)

    def _reject_candidate(self, cand: Candidate, reason: str) -> None:
        """Reject ``cand``; one that waited leaves the pending area."""
        self._reject(reason, cand.entry.id)
        if cand.from_pending:
            self.txn.add(_PENDING_DELETE, (cand.entry.id,))
            self.store.logs.pending_tally.stale = True

    # -- 2. membership --------------------------------------------------------------------------

    def _admitted(self, cands: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
        """``cands`` split into those the membership rule admits and those that must wait;
        the rest are rejected (a waiting one leaves the pending area)."""
        admission = self.store.membership
        if admission is None:
            return cands, []
        admitted, waiting = [], []
        for cand in cands:
            verdict = admission.check(cand.entry.header, cand.payload)
            if verdict is None:
                admitted.append(self._held(cand, admission))
            elif verdict is Wait.FOR_MEMBER:
                waiting.append(self._held(cand, admission))
            else:
                self._reject_candidate(cand, verdict)
        return admitted, waiting

    def _held(self, cand: Candidate, admission: Admission) -> Candidate:
        """``cand`` without its payload when this node's grant does not hold its place: such
        a payload is never stored, not even while its entry waits (docs/partial.md)."""
        if cand.entry.payload is None or admission.may_hold(cand.place):
            return cand
        self.report.withheld += 1
        return cand.without_payload()

    # -- 3 and 4. one log -------------------------------------------------------------------

    async def _log(self, log: LogId, received: list[Candidate]) -> None:
        logs = self.store.logs
        cands, waiting = self._admitted(received)
        if not cands and not waiting and log not in logs.pending_logs:
            return  # nothing to do: no head is registered for a writer refused outright
        head = logs.head(log)
        old = [c for c in cands if c.entry.header.seq <= head.seq]
        new = [c for c in cands if c.entry.header.seq > head.seq]
        if log in logs.pending_logs:
            # Marks the received entries already waiting, so they are not parked twice.
            new += self._admitted(await self._pending_of(log, head.seq, received))[0]
        await self._park(waiting)
        new = await self._bounded(head, new)
        attached = await self._attach(head, new)
        leftover = [c for c in new if c.entry.id not in attached]
        old += [c for c in leftover if c.entry.header.seq <= head.seq]
        await self._settle_old(head, old, cands)
        await self._park([c for c in leftover if c.entry.header.seq > head.seq])
        if attached and log in logs.pending_logs:
            await self._drop_stale_pending(log, head.seq)

    async def _bounded(self, head: LogHead, new: list[Candidate]) -> list[Candidate]:
        """``new`` unless its log may not be held (docs/mesh.md §Logs per writer): a dropped
        log takes nothing more, and a log its writer opens past its bound is rejected or
        displaces the writer's last-ranked one."""
        if head.forked_at == DROPPED:
            reason = "its log was dropped: its writer opened more logs than its member.add allows"
            return self._refuse(new, reason)
        admission = self.store.membership
        if head.seq or admission is None or not new:
            return new
        most = admission.max_logs(new[0].entry.header.writer)
        amortised = self.store.options.amortised_verification
        run = authentic_from(0, None, [c.entry for c in new], amortised=amortised)
        if most is None or not run:
            return new  # no bound, or no authentic first entry: nothing opens
        room = await make_room(self.txn, self.store.logs, run[0].header, most)
        if isinstance(room, TooManyLogs):
            return self._refuse(new, room.reason)
        if room is not None:
            await self._drop(room)
        return new

    def _refuse(self, cands: list[Candidate], reason: str) -> list[Candidate]:
        REFUSALS.count("writer_logs")
        for cand in cands:
            self._reject_candidate(cand, reason)
        return []

    async def _drop(self, head: LogHead) -> None:
        """Hide ``head``'s log whole: a log of its writer ranked before it has arrived."""
        REFUSALS.count("writer_logs")
        await self.store.hide_log(self.txn, head, DROPPED)
        reason = "log dropped: its writer opened one before it past the bound of its member.add"
        event = AuditEvent.ENTRY_REJECTED
        self.store.audit_rejection(self.txn, self.source, event, reason, head.id)

    async def _attach(self, head: LogHead, cands: list[Candidate]) -> set[bytes]:
        amortised = self.store.options.amortised_verification
        by_id = {c.entry.id: c for c in cands}
        run = authentic_from(head.seq, head.id, [c.entry for c in cands], amortised=amortised)
        for entry in run:
            await self._store_one(head, by_id[entry.id])
        return {entry.id for entry in run}

    async def _store_one(self, head: LogHead, cand: Candidate) -> None:
        store, txn = self.store, self.txn
        erased = store.erasures.covers(cand.entry.header.kind, cand.payload)
        if erased is not None:  # about an erased SR: kept without its payload, unannounced
            cand = cand.without_payload()
        entry = cand.entry
        hlc = entry.header.hlc
        # The clock first: views show what the clock has reached (an entry from beyond the
        # allowed skew waits until its time comes).
        wall = store.wall()
        within = store.clock.update(hlc, wall)
        pos = await store.append(txn, head, entry, cand.payload, cand.place, erased is not None)
        if erased is not None:
            store.erasures.dropped(txn, pos, erased)
        self.report.stored += 1
        self.report.stored_ids.append(entry.id)
        self.report.brought(cand.payload)
        if cand.from_pending:
            txn.add(_PENDING_DELETE, (entry.id,))
        if not within:
            reason = f"entry clock {hlc.wall} is beyond the allowed skew"
            store.audit_rejection(txn, self.source, AuditEvent.CLOCK_SKEW, reason, entry.id)
        subject = _subject(cand.payload)
        if self.event is not None and erased is None and subject not in store.erasures.srs:
            # An erased SR's entries arrive unannounced (its erase's own event is sr_erased).
            # Arrival is stamped at this node's moment (``Store.now_ms``): the clock alone
            # would be the newest entry received before this one, whatever its workspace, and
            # that time is not the caller's to see (docs/authority.md §Why nothing leaks).
            at = store.now_ms(wall)
            workspace = _workspace(cand.payload)
            audit(
                txn,
                self.event,
                at,
                entry=entry.id,
                subject=subject,
                workspace=workspace,
                detail=self._detail,
            )

    # -- 3. old positions: duplicates, payload fills, forks ------------------------------------

    async def _settle_old(
        self, head: LogHead, old: list[Candidate], batch: list[Candidate]
    ) -> None:
        if not old:
            return
        stored = await self._stored_at(head, [c.entry.header.seq for c in old])
        for cand in old:
            pos, sid, raw, has_payload = stored[cand.entry.header.seq]
            if sid == cand.entry.id:
                await self._duplicate(head, pos, has_payload, cand)
            elif _authentic_alone_or_by(cand, batch):
                await self._fork(head, raw, cand)
            elif not cand.from_pending:
                await self._park([cand])

    async def _duplicate(self, head: LogHead, pos: int, has_payload: bool, cand: Candidate) -> None:
        self.report.duplicate += 1
        if has_payload or cand.entry.payload is None:
            return
        if self.store.erasures.covers(cand.entry.header.kind, cand.payload) is not None:
            return  # an erased payload offered again: never stored
        seq = cand.entry.header.seq
        self.report.filled += 1
        self.report.filled_at.append((head.log_id, seq, cand.place))
        self.report.brought(cand.payload)
        self.txn.add("INSERT INTO payloads (pos, data) VALUES (?, ?)", (pos, cand.entry.payload))
        self.txn.add(MISSING_DELETE, (pos,))
        self.txn.add(PLACE, (cand.place, pos))
        if cand.payload is not None and not head.hides(seq):
            self.txn.add("UPDATE headers SET applied = 1 WHERE pos = ?", (pos,))
            await self.store.apply(self.txn, pos, head, cand.entry, cand.payload)

    async def _fork(self, head: LogHead, kept_raw: bytes, cand: Candidate) -> None:
        h = cand.entry.header
        known = await self.txn.fetchone(
            "SELECT 1 FROM forks WHERE writer = ? AND epoch = ? AND seq = ? AND other_raw = ?",
            (h.writer, h.epoch, h.seq, cand.entry.raw),
        )
        if known:
            return
        self.report.forks += 1
        self.txn.add(_FORK_INSERT, (h.writer, h.epoch, h.seq, kept_raw, cand.entry.raw))
        await self.store.hide_log(self.txn, head, h.seq)
        detail = {"source": self.source, "writer": h.writer, "epoch": h.epoch, "seq": h.seq}
        at = self.store.clock.last.wall
        audit(self.txn, AuditEvent.FORK_DETECTED, at, entry=cand.entry.id, detail=detail)

    async def _stored_at(self, head: LogHead, seqs: list[int]) -> dict[int, tuple[Any, ...]]:
        rows = await self.txn.fetchall(
            "SELECT h.seq, h.pos, h.id, h.raw, p.pos IS NOT NULL FROM headers h "
            "LEFT JOIN payloads p ON p.pos = h.pos "
            "WHERE h.log_id = ? AND h.seq BETWEEN ? AND ?",
            (head.log_id, min(seqs), max(seqs)),
        )
        wanted = set(seqs)
        return {r[0]: (r[1], bytes(r[2]), bytes(r[3]), bool(r[4])) for r in rows if r[0] in wanted}

    # -- the pending area (docs/entries.md §The pending area) --------------------------------

    async def _pending_of(
        self, log: LogId, above: int, received: list[Candidate]
    ) -> list[Candidate]:
        """The log's waiting entries above ``above``.  A received entry that is already
        waiting is marked as such, so it is not parked (and counted) a second time."""
        rows = await self.txn.fetchall(
            "SELECT id, seq, raw, payload, workspace FROM pending WHERE writer = ? AND epoch = ?",
            (log[0], log[1]),
        )
        waiting = {bytes(r[0]): r for r in rows}
        for cand in received:
            row = waiting.get(cand.entry.id)
            if row is not None:
                cand.from_pending = True
                if row[3] is None and cand.entry.payload is not None:  # it waits more whole
                    fill = (cand.entry.payload, _size(cand.entry), cand.entry.id)
                    self.txn.add(_PENDING_FILL, fill)
                    waiting[cand.entry.id] = (*row[:3], cand.entry.payload, cand.place)
                    self.store.logs.pending_tally.stale = True
        skip = {c.entry.id for c in received}
        out = []
        for pid, seq, raw, payload, place in waiting.values():
            if seq <= above or pid in skip:
                continue
            entry = Entry.decode(bytes(raw), None if payload is None else bytes(payload))
            decoded = _decoded(entry)
            if decoded is not None:
                place = place_of(entry.header.kind, decoded)
            out.append(Candidate(entry, decoded, True, place))
        return out

    async def _park(self, cands: list[Candidate]) -> None:
        """Let ``cands`` wait, each within the area's bounds (``node.store.pending``)."""
        store = self.store
        logs = store.logs
        for cand in cands:
            if cand.from_pending:
                continue
            entry = cand.entry
            if store.erasures.covers(entry.header.kind, cand.payload) is not None:
                entry = entry.without_payload()  # about an erased SR: waits without it
            size = _size(entry)
            fetch = self.txn.fetchall
            why = await logs.pending_tally.refusal(fetch, store.options, self.source, size)
            if why is not None:
                self._reject(why, entry.id)
                continue
            h = entry.header
            row = (entry.id, h.writer, h.epoch, h.seq, entry.raw, entry.payload, self.source)
            self.txn.add(_PENDING_INSERT, (*row, size, store.wall(), cand.place))
            logs.pending_logs.add(h.log)
            logs.pending_tally.add(self.source, size)
            self.report.pending += 1

    async def _drop_stale_pending(self, log: LogId, head_seq: int) -> None:
        self.txn.add(
            "DELETE FROM pending WHERE writer = ? AND epoch = ? AND seq <= ?",
            (log[0], log[1], head_seq),
        )
        logs = self.store.logs
        logs.pending_tally.stale = True
        has = await self.txn.fetchone(
            "SELECT 1 FROM pending WHERE writer = ? AND epoch = ? LIMIT 1", (log[0], log[1])
        )
        if not has:
            logs.pending_logs.discard(log)


def _authentic_alone_or_by(cand: Candidate, batch: list[Candidate]) -> bool:
    """The rule applied to ``cand`` and whatever of the batch links on from it."""
    following = {c.entry.header.prev: c for c in batch if c.entry.header.prev is not None}
    run = [cand]
    while (nxt := following.get(run[-1].entry.id)) is not None and len(run) <= len(batch):
        run.append(nxt)
    return authenticate([c.entry for c in run])[0]


def _size(entry: Entry) -> int:
    """What an entry takes in the pending area: its header and payload bytes."""
    return len(entry.raw) + len(entry.payload or b"")


def _subject(payload: dict[str, Any] | None) -> str | None:
    if payload is None:
        return None
    value = payload.get("sr_id") or payload.get("id")
    return value if isinstance(value, str) else None


def _workspace(payload: dict[str, Any] | None) -> str | None:
    if payload is None:
        return None
    value = payload.get("workspace") or payload.get("vault")
    return value if isinstance(value, str) else None
