"""Audit events: the local feed's vocabulary, rows, and per-source rate limiting
(docs/tools/e_audit.md).

Every event is a row of ``audit`` written in the same transaction as what it records; its
``seq`` is the table's INTEGER PRIMARY KEY, so the feed is dense and ordered by arrival.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node.store.writer import Txn
from protocol.canonical import encode_canonical

__all__ = [
    "AUDIT_INSERT",
    "AUDIT_INSERT_AT_POS",
    "AuditEvent",
    "EntryEvent",
    "RejectionLimiter",
    "audit",
    "bundle_subjects",
]

AUDIT_INSERT = (
    "INSERT INTO audit (event, at, workspace, subject, principal, entry, detail) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# For entries authored in the same transaction: their id is known only once sealed.
AUDIT_INSERT_AT_POS = (
    "INSERT INTO audit (event, at, workspace, subject, principal, entry, detail) "
    "VALUES (?, ?, ?, ?, ?, (SELECT id FROM headers WHERE pos = ?), ?)"
)


class AuditEvent(enum.StrEnum):
    SR_WRITTEN = "sr_written"
    SR_SYNCED = "sr_synced"
    BUNDLE_IMPORTED = "bundle_imported"
    SR_DELETED = "sr_deleted"
    SR_UNDELETED = "sr_undeleted"
    SR_ERASED = "sr_erased"
    EPISODE_FORGOTTEN = "episode_forgotten"
    CLOCK_SKEW = "clock_skew"
    ENTRY_REJECTED = "entry_rejected"
    FORK_DETECTED = "fork_detected"
    PEER_CONNECTED = "peer_connected"
    PEER_DISCONNECTED = "peer_disconnected"


@dataclass(frozen=True, slots=True)
class EntryEvent:
    """The event an entry this node authors writes with it (``Store.author``): stamped at the
    entry's clock and naming it by its store position (its id is known once it is sealed)."""

    event: AuditEvent
    workspace: str
    subject: str
    principal: str


def audit(
    txn: Txn,
    event: AuditEvent,
    at: int,
    *,
    workspace: str | None = None,
    subject: str | None = None,
    principal: str | None = None,
    entry: bytes | None = None,
    entry_pos: int | None = None,
    detail: dict[str, Any] | bytes | None = None,
) -> None:
    """Queue one audit event in ``txn``; the entry it concerns is named by id, or by its
    store position when it is being authored in this transaction.  ``detail`` may come
    already encoded (a receive writes the same detail for every entry)."""
    blob = encode_canonical(detail) if isinstance(detail, dict) and detail else detail or None
    if entry_pos is not None:
        row = (event.value, at, workspace, subject, principal, entry_pos, blob)
        txn.add(AUDIT_INSERT_AT_POS, row)
    else:
        txn.add(AUDIT_INSERT, (event.value, at, workspace, subject, principal, entry, blob))


_SUBJECTS_ADD = (
    "INSERT INTO bundle_subjects (import_key, subject, entries) VALUES (?, ?, ?) "
    "ON CONFLICT (import_key, subject) DO UPDATE SET entries = entries + excluded.entries"
)


def bundle_subjects(txn: Txn, key: bytes, subjects: Mapping[str, int]) -> None:
    """Queue what part of a bundle import brought, by subject (``bundle_subjects``); the
    import's ``bundle_imported`` event names ``key``."""
    for subject, entries in subjects.items():
        txn.add(_SUBJECTS_ADD, (key, subject, entries))


@dataclass(slots=True)
class _Window:
    start: int
    suppressed: int = 0


class RejectionLimiter:
    """At most one rejection-type event per (source, event) per interval.

    The first rejection of an interval is written at once; later ones in the same interval are
    counted, and the count rides on the next event written for that source (``count`` = the
    rejections that event stands for).  Hostile input therefore cannot flood the store.
    """

    def __init__(self, interval_ms: int = 60_000, max_sources: int = 4096) -> None:
        self.interval_ms = interval_ms
        self._max_sources = max_sources
        self._windows: dict[tuple[str, AuditEvent], _Window] = {}

    def admit(self, source: str, event: AuditEvent, now_ms: int) -> int | None:
        """The count to write now, or None when this rejection is only counted."""
        key = (source, event)
        window = self._windows.get(key)
        if window is not None and now_ms - window.start < self.interval_ms:
            window.suppressed += 1
            return None
        carried = window.suppressed if window else 0
        if len(self._windows) >= self._max_sources and key not in self._windows:
            self._windows.pop(next(iter(self._windows)))
        self._windows[key] = _Window(now_ms)
        return carried + 1
