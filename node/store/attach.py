"""One log's part of a receive (steps 3 and 4 of node/store/ingest.py): the bounds on a
writer's logs, the authentic run attached from the head, and the entries at or below it —
duplicates, payload fills and forks.
"""

from __future__ import annotations

from typing import Any

from node.refusals import REFUSALS
from node.store.audit import AuditEvent, audit
from node.store.heads import LogHead
from node.store.logbound import DROPPED, Crowded, make_room
from node.store.partial import MISSING_DELETE, PLACE
from node.store.received import _Candidate, _subject, _workspace
from node.store.waiting import _Waiting
from protocol.entry import LogId
from protocol.signing import authentic_from, authenticate

__all__: list[str] = []

_FORK_INSERT = "INSERT INTO forks (writer, epoch, seq, kept_raw, other_raw) VALUES (?, ?, ?, ?, ?)"


class _Attaching(_Waiting):
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
            return self._refuse(
                new, "its log was dropped: its writer opened more logs than its member.add allows"
            )
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
            self._reject_candidate(cand, reason)
        return []

    async def _drop(self, head: LogHead) -> None:
        """Hide ``head``'s log whole: a log of its writer ranked before it has arrived."""
        REFUSALS.count("writer_logs")
        await self.store.hide_log(self.txn, head, DROPPED)
        self.txn.add("UPDATE logs SET forked_at = ? WHERE log_id = ?", (DROPPED, head.log_id))
        reason = "log dropped: its writer opened one before it past the bound of its member.add"
        self.store.audit_rejection(
            self.txn, self.source, AuditEvent.ENTRY_REJECTED, reason, head.id
        )

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
        erasures = self.store.erasures
        erased = erasures.covers(cand.entry.header.kind, cand.payload)
        if erased is not None:  # about an erased SR: kept without its payload, unannounced
            cand = _Candidate(cand.entry.without_payload(), None, cand.from_pending, cand.place)
        entry = cand.entry
        hlc = entry.header.hlc
        # The clock first: views show what the clock has reached (an entry from beyond the
        # allowed skew waits until its time comes).
        wall = self.store.wall()
        within = self.store.clock.update(hlc, wall)
        pos = await self.store.append_attached(
            self.txn, head, entry, cand.payload, cand.place, erased is not None
        )
        if erased is not None:
            erasures.dropped(self.txn, pos, erased)
        self.report.stored += 1
        self.report.stored_ids.append(entry.id)
        self.report.brought(cand.payload)
        if cand.from_pending:
            self.txn.add("DELETE FROM pending WHERE id = ?", (entry.id,))
        if not within:
            self.store.audit_rejection(
                self.txn,
                self.source,
                AuditEvent.CLOCK_SKEW,
                f"entry clock {hlc.wall} is beyond the allowed skew",
                entry.id,
            )
        subject = _subject(cand.payload)
        if self.event is not None and erased is None and subject not in erasures.srs:
            # An erased SR's entries arrive unannounced (its erase's own event is sr_erased).
            # Arrival is stamped at this node's moment (``Store.now_ms``): the clock alone
            # would be the newest entry received before this one, whatever its workspace, and
            # that time is not the caller's to see (docs/authority.md §Why nothing leaks).
            audit(
                self.txn,
                self.event,
                self.store.now_ms(wall),
                entry=entry.id,
                subject=subject,
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
        if self.store.erasures.covers(cand.entry.header.kind, cand.payload) is not None:
            return  # an erased payload offered again: never stored
        self.report.filled += 1
        self.report.filled_at.append((head.log_id, cand.entry.header.seq, cand.place))
        self.report.brought(cand.payload)
        self.txn.add("INSERT INTO payloads (pos, data) VALUES (?, ?)", (pos, cand.entry.payload))
        self.txn.add(MISSING_DELETE, (pos,))
        self.txn.add(PLACE, (cand.place, pos))
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
            AuditEvent.FORK_DETECTED,
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


def _authentic_alone_or_by(cand: _Candidate, batch: list[_Candidate]) -> bool:
    """The rule applied to ``cand`` and whatever of the batch links on from it."""
    following = {c.entry.header.prev: c for c in batch if c.entry.header.prev is not None}
    run = [cand]
    while (nxt := following.get(run[-1].entry.id)) is not None and len(run) <= len(batch):
        run.append(nxt)
    return authenticate([c.entry for c in run])[0]
