"""The pending area's bounds and its table's SQL (docs/entries.md §The pending area).

Entries that cannot attach yet wait in ``pending``, each row naming the ``source`` it came
from (``peer:<node id>``, ``bundle:<id>``, ``join``), its size in bytes (header and payload)
and when it ``arrived`` by this node's wall clock.  Four bounds hold the area:

- ``pending_limit`` entries in all, and ``pending_bytes`` bytes in all;
- ``pending_per_source`` entries of one source, and the same share of ``pending_bytes`` — so
  one member filling its share leaves the others' places free;
- ``pending_expiry``: a row that has waited longer is dropped (audited as rejected), at most
  ``SWEEP_ROWS`` at a time, by the first receive after the store opens and then at most once a
  ``SWEEP_EVERY_MS``.

``PendingTally`` is the writer's count of what each source holds; it is recounted from the
table whenever rows left it since the last count.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from node.refusals import REFUSALS
from node.store.writer import Txn

__all__ = [
    "SWEEP_EVERY_MS",
    "SWEEP_ROWS",
    "Bounds",
    "Expired",
    "PendingTally",
    "SourceRow",
    "delete_pending",
    "expire_pending",
    "select_sources",
]

SWEEP_EVERY_MS = 60_000
SWEEP_ROWS = 1_000

_TALLY = "SELECT source, count(*), coalesce(sum(size), 0) FROM pending GROUP BY source"
_SOURCES = (
    "SELECT source, count(*), coalesce(sum(size), 0), min(arrived), "
    "count(DISTINCT hex(writer) || hex(epoch)) FROM pending GROUP BY source ORDER BY source"
)
_EXPIRED = "SELECT id, source FROM pending WHERE arrived < ? ORDER BY arrived LIMIT ?"

Fetch = Callable[[str, Sequence[Any]], Awaitable[list[Sequence[Any]]]]


class Bounds(Protocol):
    """The store options that bound the area (``StoreOptions``)."""

    pending_limit: int
    pending_per_source: int
    pending_bytes: int
    pending_expiry_ms: int


@dataclass(slots=True)
class _Held:
    entries: int = 0
    bytes: int = 0


@dataclass(slots=True)
class PendingTally:
    """Entries and bytes waiting, per source.  ``stale`` once rows may have left the table
    uncounted (an entry attached, expired, cleared, or a reload): the next ``refusal``
    recounts first."""

    by_source: dict[str, _Held] = field(default_factory=dict)
    total: _Held = field(default_factory=_Held)
    stale: bool = True
    swept: int | None = None  # when expired rows were last looked for (``SWEEP_EVERY_MS``)

    async def recount(self, fetch: Fetch) -> None:
        rows = await fetch(_TALLY, ())
        self.by_source = {str(s): _Held(int(n), int(b)) for s, n, b in rows}
        self.total = _Held(
            sum(h.entries for h in self.by_source.values()),
            sum(h.bytes for h in self.by_source.values()),
        )
        self.stale = False

    async def refusal(self, fetch: Fetch, bounds: Bounds, source: str, size: int) -> str | None:
        """Why an entry of ``size`` bytes from ``source`` may not wait, or None; a refusal is
        counted under its limit (``node.refusals``)."""
        if self.stale:
            await self.recount(fetch)
        limit, reason = _beyond(self, bounds, source, size)
        if limit is not None:
            REFUSALS.count(limit)
        return reason

    def add(self, source: str, size: int) -> None:
        for held in (self.by_source.setdefault(source, _Held()), self.total):
            held.entries += 1
            held.bytes += size


def _beyond(
    tally: PendingTally, bounds: Bounds, source: str, size: int
) -> tuple[str, str] | tuple[None, None]:
    if tally.total.entries >= bounds.pending_limit:
        return "pending_full", "the pending area is full"
    if tally.total.bytes + size > bounds.pending_bytes:
        return "pending_bytes", "the pending area's bytes are used up"
    held = tally.by_source.get(source, _Held())
    if held.entries >= bounds.pending_per_source or held.bytes + size > source_bytes(bounds):
        return "pending_source_quota", "this source's share of the pending area is used up"
    return None, None


def source_bytes(bounds: Bounds) -> int:
    """The bytes one source may hold: ``pending_bytes`` in the share ``pending_per_source``
    is of ``pending_limit``."""
    if bounds.pending_limit <= 0:
        return 0
    share = min(bounds.pending_per_source, bounds.pending_limit)
    return bounds.pending_bytes * share // bounds.pending_limit


@dataclass(frozen=True, slots=True)
class SourceRow:
    """What one source holds in the pending area (``memlane pending list``)."""

    source: str
    entries: int
    bytes: int
    oldest: int  # the earliest arrival, ms by this node's wall clock
    logs: int  # the (writer, epoch) logs its entries wait in


async def select_sources(fetch: Fetch) -> list[SourceRow]:
    rows = await fetch(_SOURCES, ())
    return [SourceRow(str(s), int(n), int(b), int(t), int(g)) for s, n, b, t, g in rows]


async def delete_pending(txn: Txn, *, source: str | None, before: int | None) -> int:
    """Delete the rows of ``source`` (every source when None) that arrived before ``before``
    (ms; any time when None); how many."""
    where, args = _where(source, before)
    found = await txn.fetchone(f"SELECT count(*) FROM pending{where}", args)  # noqa: S608
    if found and found[0]:
        txn.add(f"DELETE FROM pending{where}", args)  # noqa: S608
    return int(found[0]) if found else 0


def _where(source: str | None, before: int | None) -> tuple[str, tuple[Any, ...]]:
    terms: list[str] = []
    args: list[Any] = []
    if source is not None:
        terms.append("source = ?")
        args.append(source)
    if before is not None:
        terms.append("arrived < ?")
        args.append(before)
    return (" WHERE " + " AND ".join(terms) if terms else ""), tuple(args)


@dataclass(frozen=True, slots=True)
class Expired:
    """One row dropped for having waited beyond ``pending_expiry``."""

    id: bytes
    source: str


async def expire_pending(txn: Txn, *, before: int, limit: int = SWEEP_ROWS) -> list[Expired]:
    """Delete at most ``limit`` rows that arrived before ``before`` (oldest first)."""
    rows = await txn.fetchall(_EXPIRED, (before, limit))
    gone = [Expired(bytes(r[0]), str(r[1])) for r in rows]
    for row in gone:
        txn.add("DELETE FROM pending WHERE id = ?", (row.id,))
    return gone
