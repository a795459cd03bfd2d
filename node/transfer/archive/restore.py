"""Restoring an archive into a new directory: every file verified and the secrets opened
before anything is written, the node built beside the target and moved into place.

Everything a restore reads is bounded before it is used, since nothing in an archive can be
trusted until the secrets open (docs/operations.md §Backups, "Limits"):

- ``manifest.json``: at most 64 KiB and 8 levels of nesting (memlane writes about 1 KiB and
  3 levels), checked before it is parsed — a deeply nested one cannot exhaust the stack;
- the key derivation: Scrypt with 2**10 ≤ n ≤ 2**17, 1 ≤ r ≤ 8, p = 1 and 128·n·r·p at most
  128 MiB (memlane writes n = 2**16, r = 8, p = 1: 64 MiB), a salt of 16 to 64 bytes — checked
  before any derivation, so a manifest cannot make a restore spend minutes and gigabytes
  before the passphrase is even tried;
- ``secrets.enc``: at most 64 MiB, refused from its size in the tar before it is read; its
  plaintext is canonical msgpack read with the same limit (nesting bounded by the decoder)
  and must have the shape memlane writes;
- what it inflates: the archive is read once, as a stream, through a counter of the bytes
  decompressed — the manifest first (at most 64 KiB of it and its headers before it is
  checked), then only the members it lists, each refused from its tar header unless its size
  is the manifest's, and the secrets — so a gzip bomb (a few KiB that inflate to gigabytes)
  inflates at most the manifest's sizes plus 64 KiB of headers before it is refused; those
  sizes must fit in the space free beside the target (or ``max_bytes``) before a byte is
  written.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import os
import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from node.access.tokens import put_back
from node.identity import (
    AUTHORITY_KEY_FILE,
    DB_FILE,
    NODE_KEY_FILE,
    node_id,
    random_bytes,
    write_key,
)
from node.progress import Progress
from node.schema import MIGRATIONS
from node.store import Store, StoreOptions, Txn
from node.transfer.archive.counting import ByteCounter, quiet
from node.transfer.archive.manifest import (
    MAX_MANIFEST_BYTES,
    MAX_SECRETS_BYTES,
    SECRETS_MEMBER,
    TAR_HEADROOM,
    ArchiveError,
    listed_size,
    member_file,
    read_manifest,
)
from node.transfer.archive.secrets import open_secrets
from node.views import default_views
from protocol.signing import SigningKey

__all__ = ["RestoreReport", "restore_archive"]


@dataclass(frozen=True, slots=True)
class RestoreReport:
    path: Path
    node_id: str
    epoch: str
    feed_id: str
    tokens: int
    tokens_revoked: int


async def restore_archive(
    archive: Path,
    data: Path,
    passphrase: bytes,
    *,
    now: int,
    keep_tokens: bool = False,
    progress: Progress | None = None,
    max_bytes: int | None = None,
) -> RestoreReport:
    """Restore the archive at ``archive`` into ``data`` (which must hold no node);
    ``progress`` is told the bytes unpacked (phase ``unpack``).  Its files may take at most
    ``max_bytes`` (None: the space free beside ``data``)."""
    _check_target(data)
    stage = data.with_name(f".{data.name}.restoring-{random_bytes(4).hex()}")
    stage.mkdir(mode=0o700, parents=True)
    room = shutil.disk_usage(stage).free if max_bytes is None else max_bytes
    try:
        secrets = await asyncio.to_thread(
            _unpack, archive, stage, passphrase, progress or quiet, room
        )
        report = await _rebuild(stage, secrets, now=now, keep_tokens=keep_tokens)
        _move_into_place(stage, data)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return RestoreReport(data, *report)


def _check_target(data: Path) -> None:
    if data.exists() and any(data.iterdir()):
        raise ArchiveError(f"{data} is not empty; restore into a new directory")


def _move_into_place(stage: Path, data: Path) -> None:
    if data.exists():
        data.rmdir()  # empty, as checked before
    stage.replace(data)


def _unpack(archive: Path, stage: Path, passphrase: bytes, told: Progress, room: int) -> Any:
    """Extract the listed files into ``stage``, each checked against the manifest; the
    secrets, opened.  Anything amiss raises ``ArchiveError`` (``stage`` is then thrown away)."""
    try:
        with gzip.open(archive, "rb") as raw:
            stream = _Inflated(cast(IO[bytes], raw), MAX_MANIFEST_BYTES + TAR_HEADROOM)
            with tarfile.open(fileobj=cast(IO[bytes], stream), mode="r|") as tar:
                manifest = read_manifest(tar)
                listed = manifest["files"]
                total = sum(listed_size(f) for f in listed.values())
                if total > room:
                    raise ArchiveError(
                        f"the archive's files take {total:,} bytes, more than "
                        f"the {room:,} that may be written"
                    )
                stream.allow(total + MAX_SECRETS_BYTES + TAR_HEADROOM)
                sealed = _unpack_members(tar, stage, listed, ByteCounter("unpack", total, told))
            stream.drain()  # to the end: gzip checks its length and CRC there
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"{archive} is not a readable memlane archive: {exc}") from exc
    return open_secrets(sealed, passphrase, manifest)


class _Inflated:
    """The archive's decompressed bytes, counted: reading past ``limit`` raises
    ``ArchiveError`` before more is inflated."""

    def __init__(self, f: IO[bytes], limit: int) -> None:
        self.f, self.limit, self.count = f, limit, 0

    def allow(self, more: int) -> None:
        self.limit = self.count + more

    def read(self, size: int = -1) -> bytes:
        room = self.limit - self.count
        data = self.f.read(room + 1 if size < 0 or size > room else size)
        self.count += len(data)
        if self.count > self.limit:
            raise ArchiveError(
                f"the archive inflates to more than its manifest lists ({self.limit:,} bytes)"
            )
        return data

    def drain(self) -> None:
        while self.read(1 << 16):
            pass


def _unpack_members(
    tar: tarfile.TarFile, stage: Path, listed: dict[str, Any], done: ByteCounter
) -> bytes:
    """Every member after the manifest — each listed file once, then the secrets — refused
    from its header when it is anything else; return the sealed secrets."""
    expected, sealed = {*listed, SECRETS_MEMBER}, b""
    while (member := tar.next()) is not None:
        if member.name not in expected or not member.isreg():
            raise ArchiveError("the archive holds other files than its manifest lists")
        expected.discard(member.name)
        if member.name == SECRETS_MEMBER:
            sealed = _read_secrets(tar, member)
        else:
            _extract(tar, member, stage, listed[member.name], done)
    if expected:
        raise ArchiveError("the archive holds other files than its manifest lists")
    done.finish()
    return sealed


def _read_secrets(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """``secrets.enc``, refused from its size in the tar before a byte of it is read."""
    if member.size > MAX_SECRETS_BYTES:
        raise ArchiveError(f"the archive's secrets are larger than {MAX_SECRETS_BYTES:,} bytes")
    return member_file(tar, member).read()


def _extract(
    tar: tarfile.TarFile, member: tarfile.TarInfo, stage: Path, listed: Any, done: ByteCounter
) -> None:
    name = member.name
    if member.size != listed.get("size"):  # refused from its header, before a byte is written
        raise ArchiveError(f"{name} in the archive does not match its checksum")
    src, h, size = member_file(tar, member), hashlib.sha256(), 0
    fd = os.open(stage / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as dst:
        while chunk := src.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
            dst.write(chunk)
            done.add(len(chunk))
    if (h.hexdigest(), size) != (listed.get("sha256"), listed.get("size")):
        raise ArchiveError(f"{name} in the archive does not match its checksum")


async def _rebuild(
    stage: Path, secrets: Any, *, now: int, keep_tokens: bool
) -> tuple[str, str, str, int, int]:
    """Keys back in their files, tokens back in the store, a new epoch for each log this node
    writes, a new feed id — all without an audit event."""
    node_key, authority = SigningKey(secrets["node_key"]), secrets.get("authority_key")
    write_key(stage / NODE_KEY_FILE, secrets["node_key"])
    logs = [(node_key.public, "epoch")]
    if authority is not None:
        write_key(stage / AUTHORITY_KEY_FILE, authority)
        logs.append((SigningKey(authority).public, "authority_epoch"))
    store = await Store.open(
        stage / DB_FILE,
        wall=lambda: now,
        options=StoreOptions(),
        views=default_views(),
        migrations=MIGRATIONS,
    )
    feed_id, epoch = random_bytes(8).hex(), random_bytes(8)
    tokens = [list(row) for row in secrets["tokens"]]
    revoked = 0 if keep_tokens else sum(row[7] is None for row in tokens)

    async def op(txn: Txn) -> None:
        for row in tokens:
            if not keep_tokens and row[7] is None:
                row[7] = now
        put_back(txn, tokens)
        for writer, name in logs:
            await _new_epoch(store, txn, writer, name, epoch if name == "epoch" else None)
        store.put_state(txn, "feed_id", feed_id.encode())

    try:
        await store.run(op)
    finally:
        await store.close()
    return node_id(node_key.public), epoch.hex(), feed_id, len(tokens), revoked


async def _new_epoch(store: Store, txn: Txn, writer: bytes, name: str, epoch: bytes | None) -> None:
    """Start a new epoch of ``writer``'s log whose seq 1 will name the old epoch's head as its
    ``prev``: the new log's row holds that head at seq 0 until its first entry is sealed."""
    epoch = epoch or random_bytes(8)
    old = await store.get_state(name)
    head = None if old is None else store.head_of((writer, old))
    store.put_state(txn, name, epoch)
    if head is None or head.id is None:
        return
    store.insert_new_epoch(txn, writer, epoch, head.id)
