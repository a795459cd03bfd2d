"""What a receive is handed and answers, and what one receive holds while it runs.

``Received`` entries go in, a ``Report`` comes out; ``Host`` is what the receive path needs of
the store it runs in and ``Admission`` the membership rule it applies (docs/mesh.md).
``_Receive`` holds one receive's store, transaction, source and report, the rejections it
audits and the membership rule's verdicts (step 2 of node/store/ingest.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from node.store.audit import AuditEvent
from node.store.erasure import Erasures
from node.store.heads import LogHead, LogTable
from node.store.txn import Txn
from node.store.views import View
from protocol.canonical import encode_canonical
from protocol.clock import HybridClock
from protocol.entry import Entry, Header


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


class _Options(Protocol):
    pending_limit: int
    pending_per_source: int
    pending_bytes: int
    pending_expiry_ms: int
    amortised_verification: bool


class Host(Protocol):
    """What the receive path needs of the store it runs in."""

    logs: LogTable
    erasures: Erasures
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
        self, txn: Txn, source: str, event: AuditEvent, reason: str, entry: bytes | None
    ) -> None: ...

    async def append_attached(
        self,
        txn: Txn,
        head: LogHead,
        entry: Entry,
        payload: dict[str, Any] | None,
        place: str | None,
        erased: bool = False,
    ) -> int: ...

    async def apply_views(
        self, txn: Txn, pos: int, head: LogHead, entry: Entry, payload: dict[str, Any]
    ) -> None: ...

    async def hide_log(self, txn: Txn, head: LogHead, from_seq: int) -> None: ...


__all__ = ["Admission", "Checked", "Host", "Received", "Refused", "Report", "Wait"]

# An entry as it arrives: decoded, or raw — its header and its payload, None when absent or,
# from a peer that holds no payload of it, the workspace the payload is placed in (a tag,
# docs/partial.md).
Received = Entry | tuple[bytes, bytes | str | None]


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
class _Candidate:
    entry: Entry
    payload: dict[str, Any] | None
    from_pending: bool = False
    place: str | None = None  # the workspace its payload is placed in (docs/partial.md)


@dataclass(frozen=True, slots=True)
class Refused:
    """An entry that failed the pre-checks: why, and its id when it could be decoded."""

    reason: str
    entry_id: bytes | None


# What the pre-checks make of a received entry (``Store.precheck``): a candidate, or why not.
Checked = _Candidate | Refused


class _Receive:
    """One receive operation inside the writer's transaction: what it holds."""

    def __init__(self, store: Host, txn: Txn, source: str, event: AuditEvent | None) -> None:
        self.store = store
        self.txn = txn
        self.source = source
        self.event = event
        self.report = Report()
        self._detail = encode_canonical({"source": source})

    def _reject(self, reason: str, entry_id: bytes | None) -> None:
        self.report.rejected += 1
        self.store.audit_rejection(
            self.txn, self.source, AuditEvent.ENTRY_REJECTED, reason, entry_id
        )

    def _reject_candidate(self, cand: _Candidate, reason: str) -> None:
        """Reject ``cand``; one that waited leaves the pending area."""
        self._reject(reason, cand.entry.id)
        if cand.from_pending:
            self.txn.add("DELETE FROM pending WHERE id = ?", (cand.entry.id,))
            self.store.logs.pending_tally.stale = True

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
                admitted.append(self._held(cand, admission))
            elif verdict is Wait.FOR_MEMBER:
                waiting.append(self._held(cand, admission))
            else:
                self._reject_candidate(cand, verdict)
        return admitted, waiting

    def _held(self, cand: _Candidate, admission: Admission) -> _Candidate:
        """``cand`` without its payload when this node's grant does not hold its place: such
        a payload is never stored, not even while its entry waits (docs/partial.md)."""
        if cand.entry.payload is None or admission.may_hold(cand.place):
            return cand
        self.report.withheld += 1
        return _Candidate(cand.entry.without_payload(), None, cand.from_pending, cand.place)


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
