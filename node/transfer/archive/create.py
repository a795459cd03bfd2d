"""Writing an archive of a running node: the store's online backup without its tokens, the
data directory's plain files, and the sealed secrets, in one gzipped tar."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from node.access.tokens import DROP_ARCHIVED, TAKE_ARCHIVED
from node.identity import (
    AUTHORITY_KEY_FILE,
    DB_FILE,
    NODE_KEY_FILE,
    random_bytes,
)
from node.progress import Progress
from node.store.backup import backup_without
from node.transfer.archive.counting import ByteCounter, CountingReader, quiet
from node.transfer.archive.manifest import (
    MANIFEST_MEMBER,
    PLAIN_FILES,
    SECRETS_MEMBER,
    ArchiveError,
    Kdf,
    make_manifest,
    manifest_bytes,
)
from node.transfer.archive.secrets import seal_secrets
from protocol.canonical import encode_canonical

__all__ = ["ArchiveReport", "create_archive"]


@dataclass(frozen=True, slots=True)
class ArchiveReport:
    path: Path
    node_id: str
    bytes: int
    tokens: int


async def create_archive(
    data: Path,
    out: Path,
    passphrase: bytes,
    *,
    now: int,
    kdf: Kdf = Kdf(),  # noqa: B008 (frozen: one value shared by every call is safe)
    progress: Progress | None = None,
) -> ArchiveReport:
    """Write an archive of the node in ``data`` to ``out`` (the node may be running).
    ``progress`` is told the copy of the store (phase ``snapshot``: one consistent read, done
    or not), then the bytes written into the archive (``write``)."""
    key_file = _check_source(data, out)
    work = out.with_name(f".{out.name}.{random_bytes(4).hex()}")
    work.mkdir(mode=0o700)
    told = progress or quiet
    try:
        copy = work / DB_FILE
        told("snapshot", 0, 1)
        tokens, state = await _snapshot(data / DB_FILE, copy)
        told("snapshot", 1, 1)
        node_key = key_file.read_bytes()
        secrets = {
            "node_key": node_key,
            "tokens": tokens,
            "authority_key": _read_optional(data / AUTHORITY_KEY_FILE),
        }
        files = {DB_FILE: copy} | {n: data / n for n in PLAIN_FILES if (data / n).exists()}
        manifest = make_manifest(files, state, node_key, now, kdf)
        sealed = seal_secrets(encode_canonical(secrets), passphrase, manifest)
        size = await asyncio.to_thread(_write_tar, work / out.name, manifest, files, sealed, told)
        (work / out.name).replace(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ArchiveReport(out, str(state["node_id"]), size, len(tokens))


def _check_source(data: Path, out: Path) -> Path:
    """The node key's file, once ``data`` holds a node and ``out`` is free."""
    if out.exists():
        raise ArchiveError(f"{out} already exists")
    if not (data / DB_FILE).exists() or not (data / NODE_KEY_FILE).exists():
        raise ArchiveError(f"no node in {data}")
    return data / NODE_KEY_FILE


def _read_optional(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


async def _snapshot(db: Path, copy: Path) -> tuple[list[list[Any]], dict[str, Any]]:
    """Back the store up into ``copy`` (one consistent read), then take the token rows out of
    the copy — overwritten on disk, not just unlinked — and return them with the state the
    manifest names."""
    tokens, state = await backup_without(db, copy, take=TAKE_ARCHIVED, drop=DROP_ARCHIVED)
    info = {
        "mesh": state.get("mesh", b"").hex(),
        "feed_id": state.get("feed_id", b"").decode(),
        "epoch": state.get("epoch", b"").hex(),
        "node_id": "",
    }
    return tokens, info


def _write_tar(
    out: Path, manifest: dict[str, Any], files: dict[str, Path], sealed: bytes, told: Progress
) -> int:
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    total = sum(path.stat().st_size for path in files.values())
    done = ByteCounter("write", total, told)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        _add_bytes(tar, MANIFEST_MEMBER, manifest_bytes(manifest))
        for name, path in files.items():
            with path.open("rb") as f:
                tar.addfile(
                    tar.gettarinfo(path, arcname=name), cast(IO[bytes], CountingReader(f, done))
                )
        done.finish()
        _add_bytes(tar, SECRETS_MEMBER, sealed)
        tar.close()
        raw.flush()
        os.fsync(raw.fileno())
        return raw.tell()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o600
    tar.addfile(info, io.BytesIO(data))
