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

``Ingest`` runs the steps: 1 and 2 here and in ``received.py`` (what a receive holds, the
membership rule's verdicts), 3 and 4 in ``attach.py``, the pending area's part in ``waiting.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from node.store.attach import _Attaching
from node.store.partial import MISSING_DELETE, MISSING_INSERT
from node.store.received import Checked, Host, Received, Refused, Report, _Candidate
from protocol.entry import Entry, LogId
from protocol.errors import ProtocolError
from protocol.kinds import has_place, place_of

__all__ = ["Ingest", "precheck"]


def precheck(store: Host, item: Received | Checked) -> Checked:
    """Step 1 for one entry: it decodes, its payload is the one its header names, it is of
    this store's mesh, and a payload of a known kind meets its schema.  It reads nothing of
    the store, so it may run before the write transaction (a bundle import does, while the
    write lock is left free)."""
    if isinstance(item, _Candidate | Refused):
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
        reason = store.admit(entry)
        if reason is None:
            payload = store.decode_known(entry)
            return _Candidate(entry, payload, place=_place(entry, payload, tag))
    except ProtocolError as exc:
        reason = str(exc)
    return Refused(reason, entry.id if entry else None)


def _place(entry: Entry, payload: dict[str, Any] | None, tag: str | None) -> str | None:
    """Where an entry's payload is placed: read from the payload when it came, else the tag
    a peer sent for a kind that has a place (docs/partial.md)."""
    kind = entry.header.kind
    if payload is not None:
        return place_of(kind, payload)
    return tag if has_place(kind) and entry.payload is None else None


class Ingest(_Attaching):
    """One receive operation inside the writer's transaction."""

    async def run(self, items: Sequence[Received | Checked]) -> Report:
        self.txn.reserve(MISSING_INSERT, MISSING_DELETE)  # in this order, whatever comes first
        by_log: dict[LogId, dict[bytes, _Candidate]] = {}
        for item in items:
            cand = precheck(self.store, item)
            if isinstance(cand, Refused):
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
        authority = self.store.membership.authority if self.store.membership else None
        # The authority's logs first: its member entries decide the others' (docs/mesh.md
        # §The authority).
        for log in sorted(by_log, key=lambda log: log[0] != authority):
            await self._log(log, list(by_log[log].values()))
        await self._release_admitted()
        return self.report

    # -- 2. membership ------------------------------------------------------------------------

    async def _release_admitted(self) -> None:
        """Retry the waiting logs of writers admitted by this batch (or since the last one)."""
        admission = self.store.membership
        writers = admission.take_admitted() if admission is not None else set()
        if not writers:
            return
        for log in [log for log in self.store.logs.pending_logs if log[0] in writers]:
            await self._log(log, [])
