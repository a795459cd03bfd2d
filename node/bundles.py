"""Bundles on disk: export, frontier files and import (docs/bundles.md).

The format is ``protocol.bundle``'s; this module reads the store and the file.  An import
reads the file twice.  The first pass verifies all of it — the header, every entry (payload
hashes, mesh, order, authenticity chain-amortised), the count, the digest, the exporter's
signature, and that the exporter is a member — without touching the store.  The second feeds
the entries, batch by batch, to the store's receive path (``Store.receive_in``) inside **one**
transaction and writes one ``bundle_imported`` event; if the file's digest has changed between
the passes, the transaction is rolled back.  Both passes hold one batch at a time.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from node.errors import NodeError, StoreError
from node.identity import node_id
from node.members.membership import Membership
from node.progress import Progress
from node.replica import Replica
from node.store import Event, Report, Store, Txn
from node.store.audit import audit, bundle_subjects
from protocol.bundle import (
    BundleEnd,
    BundleEvent,
    BundleHeader,
    BundleReader,
    BundleWriter,
    FrontierFile,
    decode_frontier_file,
    encode_frontier_file,
)  # fmt: skip
from protocol.entry import Entry
from protocol.errors import ProtocolError
from protocol.kinds import decode_payload, is_known, workspace_of
from protocol.messages import Frontier, Span
from protocol.signing import SigningKey

__all__ = [
    "BundleError",
    "ExportReport",
    "ImportReport",
    "export_bundle",
    "import_bundle",
    "read_frontier",
    "write_frontier",
]

_CHUNK = 1 << 20  # bytes read at a time
_BATCH = 1000  # entries per receive batch (and per read of the store on export)


class BundleError(NodeError):
    """A bundle (or frontier file) was refused; nothing of it was stored."""


class _Changed(BundleError):
    pass


@dataclass(frozen=True, slots=True)
class ExportReport:
    path: Path
    bundle_id: str
    entries: int
    payloads: int
    bytes: int


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
            "bundle": self.bundle_id, "exporter": self.exporter, "new": self.new,
            "already_present": self.already_present, "payloads_filled": self.payloads_filled,
            "rejected": self.rejected, "pending": self.pending,
        }  # fmt: skip


# -- files -------------------------------------------------------------------------------------


def _open_read(path: Path) -> IO[bytes]:
    try:
        return path.open("rb")
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _open_write(path: Path) -> IO[bytes]:
    try:
        return path.open("xb")
    except OSError as exc:
        raise BundleError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _refuse_existing(out: Path) -> None:
    if out.exists():
        raise BundleError(f"{out} already exists")


def _finish_file(f: IO[bytes], tmp: Path, out: Path) -> None:
    f.flush()
    os.fsync(f.fileno())
    f.close()
    tmp.replace(out)


# -- frontier files ------------------------------------------------------------------------------


async def write_frontier(store: Store, key: SigningKey, mesh: bytes, out: Path) -> Frontier:
    """Write this node's frontier to ``out`` for an exporter (``memlane bundle frontier``)."""
    frontier = (await Replica(store, mesh).snapshot()).frontier
    data = encode_frontier_file(FrontierFile(mesh, key.public, frontier))
    tmp = out.with_name(out.name + ".partial")
    f = _open_write(tmp)
    f.write(data)
    _finish_file(f, tmp, out)
    return frontier


def read_frontier(path: Path, mesh: bytes) -> Frontier:
    f = _open_read(path)
    with f:
        data = f.read(1 << 22)
    try:
        file = decode_frontier_file(data)
    except ProtocolError as exc:
        raise BundleError(f"{path} is not a usable frontier file: {exc}") from exc
    if file.mesh != mesh:
        raise BundleError(f"{path} is the frontier of a node of another mesh")
    return file.frontier


# -- export --------------------------------------------------------------------------------------


async def export_bundle(
    store: Store,
    key: SigningKey,
    mesh: bytes,
    out: Path,
    *,
    wall: Callable[[], int],
    since: Path | None = None,
    workspace: str | None = None,
    progress: Progress | None = None,
) -> ExportReport:
    """Write a bundle of what this node holds (all of it, or what the frontier in ``since``
    lacks); with ``workspace``, every header but only that workspace's payloads.  ``progress``
    is told the entries written (phase ``export``)."""
    _refuse_existing(out)
    theirs = read_frontier(since, mesh) if since is not None else None
    replica = Replica(store, mesh)
    snap = await replica.snapshot()
    try:
        header = BundleHeader(mesh, key.public, wall(), snap.frontier, theirs, workspace)
    except ProtocolError as exc:
        raise BundleError(f"cannot export a bundle: {exc}") from exc
    writer = BundleWriter(key, header)
    spans = _authority_first(snap.frontier.lacking(theirs or Frontier()), store)
    tmp = out.with_name(out.name + ".partial")
    f = _open_write(tmp)
    size, payloads, total = 0, 0, sum(s.last - s.first + 1 for s in spans)
    try:
        size += f.write(writer.start())
        for span in spans:
            async for entry in _span_entries(replica, snap.log_ids[span.log], span):
                kept = entry if _carries(entry, workspace) else entry.without_payload()
                payloads += kept.payload is not None
                size += f.write(writer.entry(kept))
                if progress is not None and writer.count % _BATCH == 0:
                    progress("export", writer.count, total)
        size += f.write(writer.finish())
        if progress is not None:
            progress("export", writer.count, writer.count)
        _finish_file(f, tmp, out)
    except BaseException:
        f.close()
        tmp.unlink(missing_ok=True)
        raise
    assert writer.end is not None
    return ExportReport(out, writer.end.bundle_id, writer.count, payloads, size)


def _authority_first(spans: list[Span], store: Store) -> list[Span]:
    """The authority's logs first: their member entries admit the other writers (docs/mesh.md
    §The authority)."""
    authority = store.membership.authority if store.membership else None
    return sorted(spans, key=lambda s: s.log[0] != authority)


async def _span_entries(replica: Replica, log_id: int, span: Span) -> AsyncIterator[Entry]:
    after = span.first - 1
    while after < span.last:
        rows = await replica.span(log_id, gt=after, lte=span.last, limit=_BATCH,
                                  max_bytes=1 << 62)  # fmt: skip
        if not rows:
            return
        for row in rows:
            yield Entry.decode(row.raw, row.payload)
        after = rows[-1].seq


def _carries(entry: Entry, workspace: str | None) -> bool:
    """Whether a workspace bundle carries this payload: the workspace's own, and those that
    name no workspace (the authority's member entries); an unknown kind's is withheld."""
    if workspace is None or entry.payload is None:
        return True
    kind = entry.header.kind
    if not is_known(kind):
        return False
    named = workspace_of(kind, decode_payload(kind, entry.payload))
    return named is None or named == workspace


# -- import --------------------------------------------------------------------------------------


async def _events(path: Path, phase: str, progress: Progress | None) -> AsyncIterator[BundleEvent]:
    """Every event of the bundle at ``path``; a bad file raises ``BundleError``."""
    f = _open_read(path)
    total, done = os.fstat(f.fileno()).st_size, 0
    reader = BundleReader()
    try:
        while chunk := await asyncio.to_thread(f.read, _CHUNK):
            done += len(chunk)
            reader.feed(chunk)
            while (event := reader.next_event()) is not None:
                yield event
            if progress is not None:
                progress(phase, done, total)
        reader.end_of_input()
    except ProtocolError as exc:
        raise BundleError(f"{path} is refused: {exc}") from exc
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        f.close()


@dataclass(slots=True)
class _Verified:
    header: BundleHeader
    end: BundleEnd


async def _verify(
    path: Path, mesh: bytes, membership: Membership | None, progress: Progress | None
) -> _Verified:
    header: BundleHeader | None = None
    end: BundleEnd | None = None
    added: set[bytes] = set()
    authority = membership.authority if membership is not None else None
    async for event in _events(path, "verify", progress):
        if isinstance(event, BundleHeader):
            if event.mesh != mesh:
                raise BundleError(f"{path} is refused: it is a bundle of another mesh "
                                  f"({event.mesh.hex()}, this node's is {mesh.hex()})")  # fmt: skip
            header = event
        elif isinstance(event, Entry):
            added |= _admits(event, authority)
        else:
            end = event  # the reader refuses anything after it, at the end of the file
    assert header is not None  # else the reader has refused the file
    assert end is not None
    _check_exporter(path, header.exporter, membership, added)
    return _Verified(header, end)


def _admits(entry: Entry, authority: bytes | None) -> set[bytes]:
    """The key a ``member.add`` of the authority admits (one with a bad payload admits
    nothing: the receive path will reject it)."""
    h = entry.header
    if h.writer != authority or h.kind != "member.add" or entry.payload is None:
        return set()
    try:
        return {decode_payload(h.kind, entry.payload)["node"]}
    except ProtocolError:
        return set()


def _check_exporter(
    path: Path, exporter: bytes, membership: Membership | None, added: set[bytes]
) -> None:
    if membership is None:
        return
    member = membership.get(exporter)
    if member is not None and member.revoked is not None:
        raise BundleError(f"{path} is refused: its exporter {node_id(exporter)} was revoked")
    if (member is None or member.added_at is None) and exporter not in added:
        raise BundleError(
            f"{path} is refused: its exporter {node_id(exporter)} is not a member of this mesh"
        )


async def import_bundle(
    store: Store, mesh: bytes, path: Path, *, progress: Progress | None = None
) -> ImportReport:
    """Verify the bundle at ``path`` whole, then apply it in one transaction (see the module
    docstring); a refused bundle raises ``BundleError`` and leaves the store as it was."""
    membership = store.membership if isinstance(store.membership, Membership) else None
    verified = await _verify(path, mesh, membership, progress)

    async def op(txn: Txn) -> ImportReport:
        return await _apply(store, txn, path, verified, progress)

    try:
        report: ImportReport = await store.run(op)
    except StoreError as exc:
        if isinstance(exc.__cause__, BundleError):
            raise exc.__cause__ from None
        raise
    return report


class _Applier:
    """Hands batches to the receive path inside one transaction; each batch's rows are
    written on SQLite's thread while the next batch is read and decoded."""

    def __init__(self, store: Store, txn: Txn, source: str) -> None:
        self.store, self.txn, self.source = store, txn, source
        self.total = Report()
        self.key = os.urandom(16)  # names what it brought, by subject, for the feed
        self._writing: asyncio.Future[None] | None = None

    async def add(self, batch: list[Entry]) -> None:
        await self.settle()
        report = await self.store.receive_in(self.txn, batch, source=self.source, event=None)
        _add(self.total, report)
        bundle_subjects(self.txn, self.key, report.subjects)
        self._writing = asyncio.ensure_future(self.txn.flush())

    async def settle(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            await writing


async def _apply(
    store: Store, txn: Txn, path: Path, verified: _Verified, progress: Progress | None
) -> ImportReport:
    applier, batch = _Applier(store, txn, f"bundle:{verified.end.bundle_id}"), list[Entry]()
    try:
        async for event in _events(path, "import", progress):
            if isinstance(event, Entry):
                batch.append(event)
                if len(batch) >= _BATCH:
                    await applier.add(batch)
                    batch = []
            elif isinstance(event, BundleEnd) and event.digest != verified.end.digest:
                raise _Changed(f"{path} changed while it was being imported; nothing was stored")
        await applier.add(batch)
    finally:
        await applier.settle()
    total = applier.total
    result = ImportReport(verified.end.bundle_id, node_id(verified.header.exporter),
                          total.stored, total.duplicate, total.filled, total.rejected,
                          total.pending)  # fmt: skip
    at = max(store.clock.last.wall, store.wall())
    audit(txn, Event.BUNDLE_IMPORTED, at, detail=result.detail() | {"subjects": applier.key})
    return result


def _add(total: Report, part: Report) -> None:
    total.stored += part.stored
    total.duplicate += part.duplicate
    total.filled += part.filled
    total.pending += part.pending
    total.rejected += part.rejected
    total.forks += part.forks
