"""The receive path: one batch of entries from elsewhere, inside one write transaction.

For each log the batch touches (docs/entries.md §Receiving):

1. decode and pre-check each entry (envelope, payload hash, mesh, payload schema); a failure
   is rejected and audited (rate-limited), and leaves no row;
2. the membership rule (``Admission``, docs/mesh.md): the authority's logs go first, so a
   ``member.add`` admits its writer's entries in the same batch; an entry whose writer has no
   ``member.add`` yet waits in the pending area and is released when one is applied, and an
   entry the rule refuses is rejected like a failed pre-check;
3. entries at or below the log's head are duplicates (a stored header may gain its payload) or,
   when authentic and different from the stored one, a fork;
4. entries above the head, together with that log's pending entries, are chained from the head
   by ``prev`` and authenticated with the one rule (``protocol.signing.authenticate``); the
   authentic prefix is appended, the rest waits in the bounded pending area.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from node.refusals import REFUSALS
from node.store.audit import Event, audit
from node.store.heads import LogHead, LogTable
from node.store.logbound import DROPPED, Crowded, make_room
from node.store.txn import Txn
from node.store.views import View
from protocol.canonical import encode_canonical
from protocol.clock import HybridClock
from protocol.entry import Entry, Header, LogId
from protocol.errors import ProtocolError
from protocol.signing import authentic_from, authenticate


class Wait(Enum):
    """An entry that may become admissible: it waits in the pending area."""

    FOR_MEMBER = "its writer's member.add is not here yet"


class Admission(Protocol):
    """The membership rule the receive path applies (``node.members.membership``)."""

    authority: bytes | None

    def check(self, header: Header, payload: dict[str, Any] | None) -> str | Wait | None:
        """None when the entry may be stored, ``Wait`` when it must wait, else why not."""

    def take_admitted(self) -> set[bytes]:
        """Writers admitted since the last call (their waiting entries can be released)."""

    def max_logs(self, writer: bytes) -> int | None:
        """How many logs ``writer`` may hold; None for no bound."""


class _Options(Protocol):
    pending_limit: int
    pending_per_source: int
    pending_bytes: int
    pending_expiry_ms: int
    amortised_verification: bool


class Host(Protocol):
    """What the receive path needs of the store it runs in."""

    logs: LogTable
    clock: HybridClock
    views: tuple[View, ...]
    wall: Callable[[], int]
    membership: Admission | None

    @property
    def options(self) -> _Options: ...

    def admit(self, entry: Entry) -> str | None: ...

    def decode_known(self, entry: Entry) -> dict[str, Any] | None: ...

    def now_ms(self, wall: int | None = None) -> int: ...

    def audit_rejection(
        self, txn: Txn, source: str, event: Event, reason: str, entry: bytes | None
    ) -> None: ...

    async def append_attached(
        self, txn: Txn, head: LogHead, entry: Entry, payload: dict[str, Any] | None
    ) -> int: ...

    async def apply_views(
        self, txn: Txn, pos: int, head: LogHead, entry: Entry, payload: dict[str, Any]
    ) -> None: ...

    async def hide_log(self, txn: Txn, head: LogHead, from_seq: int) -> None: ...


__all__ = ["Admission", "Host", "Received", "Report", "Wait"]

Received = Entry | tuple[bytes, bytes | None]

_FORK_INSERT = "INSERT INTO forks (writer, epoch, seq, kept_raw, other_raw) VALUES (?, ?, ?, ?, ?)"
_PENDING_INSERT = (
    "INSERT OR IGNORE INTO pending (id, writer, epoch, seq, raw, payload, source, size, arrived) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PENDING_FILL = "UPDATE pending SET payload = ?, size = ? WHERE id = ?"


@dataclass(slots=True)
class Report:
    """What one receive did, entry by entry counted."""

    stored: int = 0
    duplicate: int = 0
    filled: int = 0
    pending: int = 0
    rejected: int = 0
    forks: int = 0
    stored_ids: list[bytes] = field(default_factory=list)
    # The entries with content stored or filled in, by the SR or episode they are about: what
    # a bundle brought each reader (node/tools/audit.py).
    subjects: Counter[str] = field(default_factory=Counter)

    def brought(self, payload: dict[str, Any] | None) -> None:
        subject = _subject(payload)
        if subject is not None:
            self.subjects[subject] += 1


@dataclass(slots=True)
class _Candidate:
    entry: Entry
    payload: dict[str, Any] | None
    from_pending: bool = False


class Ingest:
    """One receive operation inside the writer's transaction."""

    def __init__(self, store: Host, txn: Txn, source: str, event: Event | None) -> None:
        self.store = store
        self.txn = txn
        self.source = source
        self.event = event
        self.report = Report()
        self._detail = encode_canonical({"source": source})

    async def run(self, items: Sequence[Received]) -> Report:
        by_log: dict[LogId, dict[bytes, _Candidate]] = {}
        for item in items:
            cand = self._precheck(item)
            if cand is not None:
                by_log.setdefault(cand.entry.header.log, {})[cand.entry.id] = cand
        payloads = [(c.entry.header.kind, c.payload) for cands in by_log.values()
                    for c in cands.values() if c.payload is not None]  # fmt: skip
        for view in self.store.views:
            await view.prepare(self.txn, payloads)
        authority = self.store.membership.authority if self.store.membership else None
        # The authority's logs first: its member entries decide the others' (docs/mesh.md
        # §The authority).
        for log in sorted(by_log, key=lambda log: log[0] != authority):
            await self._log(log, list(by_log[log].values()))
        await self._release_admitted()
        return self.report

    # -- 1. pre-checks -----------------------------------------------------------------------

    def _precheck(self, item: Received) -> _Candidate | None:
        entry = item if isinstance(item, Entry) else None
        try:
            if entry is None:
                assert not isinstance(item, Entry)
                entry = Entry.decode(*item)  # checks the payload against its header
            else:
                entry.check_payload()
            reason = self.store.admit(entry)
            if reason is None:
                return _Candidate(entry, self.store.decode_known(entry))
        except ProtocolError as exc:
            reason = str(exc)
        self._reject(reason, entry.id if entry else None)
        return None

    def _reject(self, reason: str, entry_id: bytes | None) -> None:
        self.report.rejected += 1
        self.store.audit_rejection(self.txn, self.source, Event.ENTRY_REJECTED, reason, entry_id)

    # -- 2. membership ------------------------------------------------------------------------

    def _admitted(self, cands: list[_Candidate]) -> tuple[list[_Candidate], list[_Candidate]]:
        """``cands`` split into those the membership rule admits and those that must wait;
        the rest are rejected (a waiting one leaves the pending area)."""
        admission = self.store.membership
        if admission is None:
            return cands, []
        admitted, waiting = [], []
        for cand in cands:
            verdict = admission.check(cand.entry.header, cand.payload)
            if verdict is None:
                admitted.append(cand)
            elif verdict is Wait.FOR_MEMBER:
                waiting.append(cand)
            else:
                self._reject(verdict, cand.entry.id)
                if cand.from_pending:
                    self.txn.add("DELETE FROM pending WHERE id = ?", (cand.entry.id,))
                    self.store.logs.pending_tally.stale = True
        return admitted, waiting

    async def _release_admitted(self) -> None:
        """Retry the waiting logs of writers admitted by this batch (or since the last one)."""
        admission = self.store.membership
        writers = admission.take_admitted() if admission is not None else set()
        if not writers:
            return
        for log in [log for log in self.store.logs.pending_logs if log[0] in writers]:
            await self._log(log, [])

    # -- 3 and 4. per log --------------------------------------------------------------------

    async def _log(self, log: LogId, received: list[_Candidate]) -> None:
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
        if attached and log in self.store.logs.pending_logs:
            await self._drop_stale_pending(log, head.seq)

    async def _bounded(self, head: LogHead, new: list[_Candidate]) -> list[_Candidate]:
        """``new`` unless its log may not be held (docs/mesh.md §Logs per writer): a dropped
        log takes nothing more, and a log its writer opens past its bound is rejected or
        displaces the writer's last-ranked one."""
        if head.forked_at == DROPPED:
            return self._refuse(new, "its log was dropped: its writer opened more logs than "
                                     "its member.add allows")  # fmt: skip
        admission = self.store.membership
        if head.seq or admission is None or not new:
            return new
        most = admission.max_logs(new[0].entry.header.writer)
        amortised = self.store.options.amortised_verification
        run = authentic_from(0, None, [c.entry for c in new], amortised=amortised)
        if most is None or not run:
            return new  # no bound, or no authentic first entry: nothing opens
        room = await make_room(self.txn, self.store.logs, run[0].header, most)
        if isinstance(room, Crowded):
            return self._refuse(new, room.reason)
        if room is not None:
            await self._drop(room)
        return new

    def _refuse(self, cands: list[_Candidate], reason: str) -> list[_Candidate]:
        REFUSALS.count("writer_logs")
        for cand in cands:
            self._reject(reason, cand.entry.id)
            if cand.from_pending:
                self.txn.add("DELETE FROM pending WHERE id = ?", (cand.entry.id,))
                self.store.logs.pending_tally.stale = True
        return []

    async def _drop(self, head: LogHead) -> None:
        """Hide ``head``'s log whole: a log of its writer ranked before it has arrived."""
        REFUSALS.count("writer_logs")
        await self.store.hide_log(self.txn, head, DROPPED)
        self.txn.add("UPDATE logs SET forked_at = ? WHERE log_id = ?", (DROPPED, head.log_id))
        reason = "log dropped: its writer opened one before it past the bound of its member.add"
        self.store.audit_rejection(self.txn, self.source, Event.ENTRY_REJECTED, reason, head.id)

    async def _attach(self, head: LogHead, cands: list[_Candidate]) -> set[bytes]:
        amortised = self.store.options.amortised_verification
        done: set[bytes] = set()
        by_id = {c.entry.id: c for c in cands}
        run = authentic_from(head.seq, head.id, [c.entry for c in cands], amortised=amortised)
        for entry in run:
            await self._store_one(head, by_id[entry.id])
            done.add(entry.id)
        return done

    async def _store_one(self, head: LogHead, cand: _Candidate) -> None:
        entry = cand.entry
        hlc = entry.header.hlc
        # The clock first: views show what the clock has reached (an entry from beyond the
        # allowed skew waits until its time comes).
        wall = self.store.wall()
        within = self.store.clock.update(hlc, wall)
        await self.store.append_attached(self.txn, head, entry, cand.payload)
        self.report.stored += 1
        self.report.stored_ids.append(entry.id)
        self.report.brought(cand.payload)
        if cand.from_pending:
            self.txn.add("DELETE FROM pending WHERE id = ?", (entry.id,))
        if not within:
            self.store.audit_rejection(
                self.txn,
                self.source,
                Event.CLOCK_SKEW,
                f"entry clock {hlc.wall} is beyond the allowed skew",
                entry.id,
            )
        if self.event is not None:
            # Arrival is stamped at this node's moment (``Store.now_ms``): the clock alone
            # would be the newest entry received before this one, whatever its workspace, and
            # that time is not the caller's to see (docs/authority.md §Why nothing leaks).
            audit(
                self.txn,
                self.event,
                self.store.now_ms(wall),
                entry=entry.id,
                subject=_subject(cand.payload),
                workspace=_workspace(cand.payload),
                detail=self._detail,
            )

    # -- old positions: duplicates, payload fills, forks ---------------------------------------

    async def _settle_old(
        self, head: LogHead, old: list[_Candidate], batch: list[_Candidate]
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

    async def _duplicate(
        self, head: LogHead, pos: int, has_payload: bool, cand: _Candidate
    ) -> None:
        self.report.duplicate += 1
        if has_payload or cand.entry.payload is None:
            return
        self.report.filled += 1
        self.report.brought(cand.payload)
        self.txn.add("INSERT INTO payloads (pos, data) VALUES (?, ?)", (pos, cand.entry.payload))
        if cand.payload is not None and not head.hides(cand.entry.header.seq):
            self.txn.add("UPDATE headers SET applied = 1 WHERE pos = ?", (pos,))
            await self.store.apply_views(self.txn, pos, head, cand.entry, cand.payload)

    async def _fork(self, head: LogHead, kept_raw: bytes, cand: _Candidate) -> None:
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
        self.txn.add(
            "UPDATE logs SET forked_at = ? WHERE log_id = ?", (head.forked_at, head.log_id)
        )
        detail = {"source": self.source, "writer": h.writer, "epoch": h.epoch, "seq": h.seq}
        audit(
            self.txn,
            Event.FORK_DETECTED,
            self.store.clock.last.wall,
            entry=cand.entry.id,
            detail=detail,
        )

    async def _stored_at(self, head: LogHead, seqs: list[int]) -> dict[int, tuple[Any, ...]]:
        rows = await self.txn.fetchall(
            "SELECT h.seq, h.pos, h.id, h.raw, p.pos IS NOT NULL FROM headers h "
            "LEFT JOIN payloads p ON p.pos = h.pos "
            "WHERE h.log_id = ? AND h.seq BETWEEN ? AND ?",
            (head.log_id, min(seqs), max(seqs)),
        )
        wanted = set(seqs)
        return {r[0]: (r[1], bytes(r[2]), bytes(r[3]), bool(r[4])) for r in rows if r[0] in wanted}

    # -- the pending area ----------------------------------------------------------------------

    async def _pending_of(
        self, log: LogId, above: int, received: list[_Candidate]
    ) -> list[_Candidate]:
        """The log's waiting entries above ``above``.  A received entry that is already
        waiting is marked as such, so it is not parked (and counted) a second time."""
        rows = await self.txn.fetchall(
            "SELECT id, seq, raw, payload FROM pending WHERE writer = ? AND epoch = ?",
            (log[0], log[1]),
        )
        waiting = {bytes(r[0]): r for r in rows}
        for cand in received:
            row = waiting.get(cand.entry.id)
            if row is not None:
                cand.from_pending = True
                if row[3] is None and cand.entry.payload is not None:  # it waits more whole
                    self.txn.add(_PENDING_FILL, (cand.entry.payload, _size(cand.entry),
                                                 cand.entry.id))  # fmt: skip
                    waiting[cand.entry.id] = (*row[:3], cand.entry.payload)
                    self.store.logs.pending_tally.stale = True
        skip = {c.entry.id for c in received}
        out = []
        for pid, seq, raw, payload in waiting.values():
            if seq <= above or pid in skip:
                continue
            entry = Entry.decode(bytes(raw), None if payload is None else bytes(payload))
            out.append(_Candidate(entry, self.store.decode_known(entry), from_pending=True))
        return out

    async def _park(self, cands: list[_Candidate]) -> None:
        """Let ``cands`` wait, each within the area's bounds (``node.store.pending``)."""
        logs, options = self.store.logs, self.store.options
        for cand in cands:
            if cand.from_pending:
                continue
            size = _size(cand.entry)
            why = await logs.pending_tally.refusal(self.txn.fetchall, options, self.source, size)
            if why is not None:
                self._reject(why, cand.entry.id)
                continue
            h, entry = cand.entry.header, cand.entry
            row = (entry.id, h.writer, h.epoch, h.seq, entry.raw, entry.payload, self.source)
            self.txn.add(_PENDING_INSERT, (*row, size, self.store.wall()))
            logs.pending_logs.add(h.log)
            logs.pending_tally.add(self.source, size)
            self.report.pending += 1

    async def _drop_stale_pending(self, log: LogId, head_seq: int) -> None:
        self.txn.add(
            "DELETE FROM pending WHERE writer = ? AND epoch = ? AND seq <= ?",
            (log[0], log[1], head_seq),
        )
        self.store.logs.pending_tally.stale = True
        has = await self.txn.fetchone(
            "SELECT 1 FROM pending WHERE writer = ? AND epoch = ? LIMIT 1", (log[0], log[1])
        )
        if not has:
            self.store.logs.pending_logs.discard(log)


def _size(entry: Entry) -> int:
    """What an entry takes in the pending area: its header and payload bytes."""
    return len(entry.raw) + len(entry.payload or b"")


def _authentic_alone_or_by(cand: _Candidate, batch: list[_Candidate]) -> bool:
    """The rule applied to ``cand`` and whatever of the batch links on from it."""
    following = {c.entry.header.prev: c for c in batch if c.entry.header.prev is not None}
    run = [cand]
    while (nxt := following.get(run[-1].entry.id)) is not None and len(run) <= len(batch):
        run.append(nxt)
    return authenticate([c.entry for c in run])[0]


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
