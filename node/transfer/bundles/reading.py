"""A bundle's file read as events, and an import's first pass over it: every entry verified,
the exporter a member, each chunk's fingerprint noted — without touching the store."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from node.identity import node_id
from node.members.membership import Membership
from node.progress import Progress
from node.transfer.bundles.files import READ_BYTES, BundleError, open_read
from protocol.bundle import BundleEnd, BundleEvent, BundleHeader, BundleReader
from protocol.entry import Entry
from protocol.errors import ProtocolError
from protocol.kinds import decode_payload

__all__ = ["VerifiedBundle", "bundle_events", "chunk_fingerprint", "verify_bundle"]


async def bundle_events(
    path: Path, phase: str, progress: Progress | None
) -> AsyncIterator[BundleEvent]:
    """Every event of the bundle at ``path``; a bad file raises ``BundleError``."""
    f = open_read(path)
    total, done = os.fstat(f.fileno()).st_size, 0
    reader = BundleReader()
    try:
        while chunk := await asyncio.to_thread(f.read, READ_BYTES):
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
class VerifiedBundle:
    """A bundle's first pass done: its header, its end, and what each chunk of it holds."""

    header: BundleHeader
    end: BundleEnd
    prints: list[bytes]  # each chunk's fingerprint, in the file's order


async def verify_bundle(
    path: Path, mesh: bytes, membership: Membership | None, progress: Progress | None, size: int
) -> VerifiedBundle:
    """Every entry of the bundle at ``path`` verified and its exporter a member, each chunk of
    ``size`` entries fingerprinted; a refused bundle raises ``BundleError``."""
    header: BundleHeader | None = None
    end: BundleEnd | None = None
    added: set[bytes] = set()
    authority = membership.authority if membership is not None else None
    chunk, prints = list[Entry](), list[bytes]()
    async for event in bundle_events(path, "verify", progress):
        if isinstance(event, BundleHeader):
            if event.mesh != mesh:
                raise BundleError(
                    f"{path} is refused: it is a bundle of another mesh "
                    f"({event.mesh.hex()}, this node's is {mesh.hex()})"
                )
            header = event
        elif isinstance(event, Entry):
            added |= _admits(event, authority)
            chunk.append(event)
            if len(chunk) == size:
                prints.append(chunk_fingerprint(chunk))
                chunk = []
        else:
            end = event  # the reader refuses anything after it, at the end of the file
    assert header is not None  # else the reader has refused the file
    assert end is not None
    _check_exporter(path, header.exporter, membership, added)
    return VerifiedBundle(header, end, prints + ([chunk_fingerprint(chunk)] if chunk else []))


def chunk_fingerprint(chunk: Sequence[Entry]) -> bytes:
    """What a chunk holds: its entries' ids (each binds its header, and so its payload's hash)
    and which of them carry their payload."""
    h = hashlib.sha256()
    for entry in chunk:
        h.update(entry.id)
        h.update(b"\x00" if entry.payload is None else b"\x01")
    return h.digest()


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
