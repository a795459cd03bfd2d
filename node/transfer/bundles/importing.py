"""Importing a bundle (docs/bundles.md §What an import guarantees).

An import reads the file twice.  The first pass (``reading.py``) verifies all of it — the
header, every entry (payload hashes, mesh, order, authenticity chain-amortised), the count, the
digest, the exporter's signature, and that the exporter is a member — without touching the
store, and notes each chunk's fingerprint.  The second feeds the entries, a chunk at a time, to
the store's receive path (``Store.receive_in``), each chunk in its own transaction whose
fingerprint must be the verified one; between two chunks the write lock is free, so other
writers (a ``memlane serve`` on the same directory) get in.  Each chunk but the last keeps the
import's progress in ``state``; the last deletes it and writes the one ``bundle_imported``
event, so a run that was interrupted is finished by the next.  Both passes hold one chunk at a
time.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.errors import StoreError
from node.identity import node_id
from node.members.membership import Membership
from node.progress import Progress
from node.store import AuditEvent, Ingest, Prechecked, Report, Store, Txn
from node.store.audit import audit, bundle_subjects
from node.store.writer import Operation
from node.transfer.bundles.files import BATCH_ENTRIES, BundleError
from node.transfer.bundles.reading import (
    VerifiedBundle,
    bundle_events,
    chunk_fingerprint,
    verify_bundle,
)
from protocol.bundle import BundleEnd
from protocol.canonical import decode_canonical, encode_canonical
from protocol.entry import Entry

__all__ = ["IMPORT_CHUNK", "IMPORT_PAUSE", "ImportReport", "import_bundle"]


# Entries an import applies in one transaction (docs/operations.md §Limits): ~0.3–0.5 s of the
# write lock on the development machine, and reading the next chunk from the file takes about
# the pause after it, so the pause costs the import little.
IMPORT_CHUNK = 2000
# Seconds the write lock is left free between two chunks.  SQLite's busy handler (its default,
# under ``busy_timeout``) tries again after 1, 2, 5, 10, 15, 20, 25, 25, 25, 50 and 50 ms, then
# every 100 ms: a gap of 100 ms holds one try of any writer waiting, however long it has.
IMPORT_PAUSE = 0.1


class _Changed(BundleError):
    pass


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did; the same counts are the ``bundle_imported`` event's detail."""

    bundle_id: str
    exporter: str
    new: int
    already_present: int
    payloads_filled: int
    rejected: int
    pending: int

    def detail(self) -> dict[str, Any]:
        return {
            "bundle": self.bundle_id,
            "exporter": self.exporter,
            "new": self.new,
            "already_present": self.already_present,
            "payloads_filled": self.payloads_filled,
            "rejected": self.rejected,
            "pending": self.pending,
        }


async def import_bundle(
    store: Store,
    mesh: bytes,
    path: Path,
    *,
    progress: Progress | None = None,
    chunk: int = IMPORT_CHUNK,
    pause: float = IMPORT_PAUSE,
) -> ImportReport:
    """Verify the bundle at ``path`` whole, then apply it ``chunk`` entries a transaction, the
    write lock left free at least ``pause`` seconds between two (see the module docstring); a
    refused bundle raises ``BundleError`` and leaves the store as it was."""
    membership = store.membership if isinstance(store.membership, Membership) else None
    verified = await verify_bundle(path, mesh, membership, progress, chunk)
    resumed = await _Resumed.read(store, verified.end.bundle_id)
    run = _Import(store, path, verified, resumed, chunk)
    index = 0
    try:
        async for entries in _chunks(path, chunk, verified.end, progress):
            await run.apply(index, entries, pause)
            index += 1
    except _Changed as exc:
        raise _Changed(
            f"{path} changed while it was being imported ({exc}); {run.stored_so_far()}"
        ) from None
    except StoreError as exc:
        if isinstance(exc.__cause__, BundleError):
            raise exc.__cause__ from None
        raise
    return run.report


async def _chunks(
    path: Path, size: int, end: BundleEnd, progress: Progress | None
) -> AsyncIterator[list[Entry]]:
    """The bundle's entries, ``size`` at a time; the last chunk (empty for a bundle of none)
    only once the end frame has matched the verified one and the file has ended."""
    chunk = list[Entry]()
    async for event in bundle_events(path, "import", progress):
        if isinstance(event, Entry):
            if len(chunk) == size:
                yield chunk
                chunk = []
            chunk.append(event)
        elif isinstance(event, BundleEnd) and event.digest != end.digest:
            raise _Changed("its digest differs")
    yield chunk


@dataclass(frozen=True, slots=True)
class _Resumed:
    """An import's progress, kept in ``state`` with each chunk but the last: the key its
    subjects are kept under, how many of the bundle's entries are applied, and the counts so
    far.  A run that finds it goes on from there (docs/bundles.md §What an import guarantees)."""

    key: bytes
    done: int
    total: tuple[int, int, int, int, int]  # stored, duplicate, filled, pending, rejected

    @staticmethod
    def state_key(bundle_id: str) -> str:
        return f"bundle_import:{bundle_id}"

    @classmethod
    async def read(cls, store: Store, bundle_id: str) -> _Resumed | None:
        value = await store.get_state(cls.state_key(bundle_id))
        return cls.decode(value) if value is not None else None

    @classmethod
    def decode(cls, value: bytes) -> _Resumed:
        key, done, *total = decode_canonical(value, what="a bundle import's progress")
        return cls(bytes(key), int(done), tuple(int(n) for n in total))  # type: ignore[arg-type]

    def encode(self) -> bytes:
        return encode_canonical([self.key, self.done, *self.total])


class _Import:
    """One run of an import: the chunks it applies, each in its own transaction, and what
    they did with those of earlier runs of the same bundle."""

    def __init__(
        self,
        store: Store,
        path: Path,
        verified: VerifiedBundle,
        resumed: _Resumed | None,
        size: int,
    ) -> None:
        self.store, self.path, self.verified, self.size = store, path, verified, size
        self.ingest = Ingest(store)
        self.saved = resumed  # what ``state`` holds now, as this run knows it
        self.key = resumed.key if resumed else os.urandom(16)  # names what it brought
        self.done = resumed.done if resumed else 0
        self.total = Report()
        if resumed is not None:
            t = self.total
            t.stored, t.duplicate, t.filled, t.pending, t.rejected = resumed.total
        self.source = f"bundle:{verified.end.bundle_id}"
        self._state = _Resumed.state_key(verified.end.bundle_id)
        self._committed: float | None = None
        self.report = self._report()

    def stored_so_far(self) -> str:
        if self.done == 0:
            return "nothing was stored"
        return (
            f"its first {self.done:,} entries were stored as verified; importing the "
            "same file again finishes it"
        )

    async def apply(self, index: int, chunk: list[Entry], pause: float) -> None:
        """Apply what the bundle's ``index``th chunk holds that no run has applied yet; the
        last chunk writes the import's event."""
        start = index * self.size
        self._check(index, chunk)
        last = start + len(chunk) == self.verified.end.count
        fresh = chunk[max(0, self.done - start) :]
        if not fresh and not last:
            return
        checked = self.ingest.precheck(fresh)  # while the write lock is left free
        await self._pause(pause)
        done = start + len(chunk)
        result: tuple[Report, _Resumed] = await self.store.run(self._op(checked, done, last))
        self._committed = time.monotonic()
        self.total, self.saved = result
        self.done = done
        self.report = self._report()

    def _check(self, index: int, chunk: list[Entry]) -> None:
        """The file still holds, here, what the verifying pass saw (it was verified whole)."""
        prints = self.verified.prints
        if chunk and (index >= len(prints) or chunk_fingerprint(chunk) != prints[index]):
            raise _Changed(f"its entries from entry {index * self.size + 1:,} on differ")

    async def _pause(self, pause: float) -> None:
        """Leave the write lock free between chunks (``IMPORT_PAUSE``); reading the next chunk
        from the file and pre-checking its entries are part of the gap."""
        if self._committed is None:
            return
        wait = self._committed + pause - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    def _op(self, fresh: list[Prechecked], done: int, last: bool) -> Operation:
        async def op(txn: Txn) -> tuple[Report, _Resumed]:
            await self._same_progress(txn)
            total = _copy(self.total)
            for i in range(0, len(fresh), BATCH_ENTRIES):
                part = await self.ingest.receive_in(
                    txn, fresh[i : i + BATCH_ENTRIES], source=self.source, event=None
                )
                _add(total, part)
                bundle_subjects(txn, self.key, part.subjects)
            resumed = _Resumed(
                self.key,
                done,
                (total.stored, total.duplicate, total.filled, total.pending, total.rejected),
            )
            if last:
                self.store.delete_state(txn, self._state)
                self._audit(txn, total)
            else:
                self.store.put_state(txn, self._state, resumed.encode())
            return total, resumed

        return op

    async def _same_progress(self, txn: Txn) -> None:
        """Refuse to go on if another import of the same bundle moved its progress meanwhile
        (read under the write lock)."""
        now = await self.store.select_state(txn, self._state)
        if now != (self.saved.encode() if self.saved is not None else None):
            raise BundleError(
                f"{self.path} is being imported by another process as well; "
                "this import stopped (the other finishes it)"
            )

    def _audit(self, txn: Txn, total: Report) -> None:
        report = self._report(total)
        at = self.store.now_ms()
        audit(txn, AuditEvent.BUNDLE_IMPORTED, at, detail=report.detail() | {"subjects": self.key})

    def _report(self, total: Report | None = None) -> ImportReport:
        t, v = total or self.total, self.verified
        return ImportReport(
            v.end.bundle_id,
            node_id(v.header.exporter),
            t.stored,
            t.duplicate,
            t.filled,
            t.rejected,
            t.pending,
        )


def _copy(total: Report) -> Report:
    out = Report()
    _add(out, total)
    return out


def _add(total: Report, part: Report) -> None:
    total.stored += part.stored
    total.duplicate += part.duplicate
    total.filled += part.filled
    total.pending += part.pending
    total.rejected += part.rejected
    total.forks += part.forks
