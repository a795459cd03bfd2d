"""A bundle's export: what this node holds, or what a frontier lacks, written to one file."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from node.progress import Progress
from node.replica import Replica
from node.store import Store
from node.transfer.bundles.files import (
    BATCH_ENTRIES,
    BundleError,
    finish_file,
    open_write,
    read_frontier,
    refuse_existing,
)
from protocol.bundle import BundleHeader, BundleWriter
from protocol.entry import Entry
from protocol.errors import ProtocolError
from protocol.frontier import Frontier, LogRange
from protocol.kinds import decode_payload, is_known, workspace_of
from protocol.signing import SigningKey

__all__ = ["ExportReport", "export_bundle"]


@dataclass(frozen=True, slots=True)
class ExportReport:
    path: Path
    bundle_id: str
    entries: int
    payloads: int
    bytes: int


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
    refuse_existing(out)
    theirs = read_frontier(since, mesh) if since is not None else None
    replica = Replica(store, mesh)
    snap = await replica.snapshot()
    try:
        header = BundleHeader(mesh, key.public, wall(), snap.frontier, theirs, workspace)
    except ProtocolError as exc:
        raise BundleError(f"cannot export a bundle: {exc}") from exc
    writer = BundleWriter(key, header)
    spans = replica.authority_first(snap.frontier.lacking(theirs or Frontier()))
    tmp = out.with_name(out.name + ".partial")
    f = open_write(tmp)
    size, payloads, total = 0, 0, sum(s.last - s.first + 1 for s in spans)
    try:
        size += f.write(writer.start())
        for span in spans:
            async for entry in _span_entries(replica, snap.log_ids[span.log], span):
                kept = entry if _carries(entry, workspace) else entry.without_payload()
                payloads += kept.payload is not None
                size += f.write(writer.entry(kept))
                if progress is not None and writer.count % BATCH_ENTRIES == 0:
                    progress("export", writer.count, total)
        size += f.write(writer.finish())
        if progress is not None:
            progress("export", writer.count, writer.count)
        finish_file(f, tmp, out)
    except BaseException:
        f.close()
        tmp.unlink(missing_ok=True)
        raise
    assert writer.end is not None
    return ExportReport(out, writer.end.bundle_id, writer.count, payloads, size)


async def _span_entries(replica: Replica, log_id: int, span: LogRange) -> AsyncIterator[Entry]:
    after = span.first - 1
    while after < span.last:
        rows = await replica.span(
            log_id, gt=after, lte=span.last, limit=BATCH_ENTRIES, max_bytes=1 << 62
        )
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
