"""The archive: a backup of a whole node, and restoring one (docs/operations.md §Backups).

``create_archive`` copies the store with SQLite's online backup API (a consistent snapshot
while the node runs and writes), takes the tokens out of the copy, and writes one gzipped tar:

- ``manifest.json``: what the archive holds, each file's SHA-256 and size, the key-derivation
  parameters and the cipher's nonce;
- ``memlane.db`` (without its tokens) and the data directory's plain files (configuration,
  certificates) as they were;
- ``secrets.enc``: the node key, the authority key if the node holds it, and every token row
  (hashes only: tokens are never stored in clear), encrypted with AES-256-GCM under a key
  derived from the passphrase with Scrypt (memory-hard), the manifest as associated data — so
  a changed manifest, like a wrong passphrase, opens nothing.

``restore_archive`` verifies every file against the manifest and decrypts the secrets before
it writes anything, builds the node in a directory beside ``--data`` and moves it into place.
The restored node writes no audit event; it starts a new random epoch whose seq 1 links to the
last head of the epoch it continues (docs/entries.md §The header: a restore never reuses a
position its peers may hold), does the same for the authority's log when it holds the authority
key, gets a new audit ``feed_id``, and revokes the tokens it brought back unless asked to keep
them.

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
import io
import json
import os
import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from node.errors import NodeError
from node.identity import (
    AUTHORITY_KEY_FILE,
    DB_FILE,
    NODE_KEY_FILE,
    node_id,
    random_bytes,
    write_key,
)
from node.progress import Progress
from node.store import Store, StoreOptions, Txn
from node.store.backup import backup_without
from node.store.schema import SCHEMA_VERSION
from node.views import default_views
from protocol.canonical import decode_canonical, encode_canonical
from protocol.errors import ProtocolError
from protocol.signing import SigningKey

__all__ = [
    "PLAIN_FILES",
    "ArchiveError",
    "ArchiveReport",
    "Kdf",
    "RestoreReport",
    "WrongPassphrase",
    "create_archive",
    "read_passphrase",
    "restore_archive",
]

PLAIN_FILES = ("config.toml", "ca.crt", "node.crt")
"""Files of the data directory an archive carries as they are (none of them secret)."""

_FORMAT = "memlane-archive"
_VERSION = 1
_MANIFEST, _SECRETS = "manifest.json", "secrets.enc"
_MAX_SECRETS = 1 << 26  # bytes: the key files and every token row, with room to spare
_MAX_MANIFEST = 1 << 16  # bytes: memlane writes about 1 KiB
_MAX_MANIFEST_DEPTH = 8  # levels of arrays and objects: memlane writes 3
# Scrypt's cost as a manifest may ask for it: near the default memlane writes (Kdf), since the
# derivation runs before the passphrase can be checked (docs/operations.md §Backups).
_LOG_N, _MAX_R, _MAX_P, _MAX_KDF_MEMORY = range(10, 18), 8, 1, 128 << 20
_SALT_BYTES = range(16, 65)
# Decompressed bytes beyond the members' own: tar headers (pax ones included), padding and the
# end of the archive — memlane's take a few KiB.
_HEADROOM = 1 << 16
_TOKEN_COLUMNS = "hash, token_id, principal, workspace, scopes, created, expires, revoked"  # noqa: S105


class ArchiveError(NodeError):
    """An archive could not be written, or was refused; a refused restore wrote nothing."""


class WrongPassphrase(ArchiveError):
    """The passphrase does not open the archive's secrets (or the archive was altered)."""


@dataclass(frozen=True, slots=True)
class Kdf:
    """Scrypt's cost: 2**log_n rounds of 128·r bytes each (64 MiB at the defaults)."""

    log_n: int = 16
    r: int = 8
    p: int = 1

    def derive(self, passphrase: bytes, salt: bytes) -> bytes:
        return Scrypt(salt=salt, length=32, n=1 << self.log_n, r=self.r, p=self.p).derive(
            passphrase
        )


@dataclass(frozen=True, slots=True)
class ArchiveReport:
    path: Path
    node_id: str
    bytes: int
    tokens: int


@dataclass(frozen=True, slots=True)
class RestoreReport:
    path: Path
    node_id: str
    epoch: str
    feed_id: str
    tokens: int
    tokens_revoked: int


def read_passphrase(path: Path) -> bytes:
    """The passphrase in ``path`` (its trailing newline dropped); an empty one is refused."""
    try:
        text = path.read_bytes().rstrip(b"\r\n")
    except OSError as exc:
        raise ArchiveError(f"cannot read the passphrase file {path}: {exc.strerror}") from exc
    if not text:
        raise ArchiveError(f"the passphrase file {path} is empty")
    return text


# -- create --------------------------------------------------------------------------------------


async def create_archive(
    data: Path,
    out: Path,
    passphrase: bytes,
    *,
    now: int,
    kdf: Kdf = Kdf(),
    progress: Progress | None = None,
) -> ArchiveReport:
    """Write an archive of the node in ``data`` to ``out`` (the node may be running).
    ``progress`` is told the copy of the store (phase ``snapshot``: one consistent read, done
    or not), then the bytes written into the archive (``write``)."""
    key_file = _check_source(data, out)
    work = out.with_name(f".{out.name}.{random_bytes(4).hex()}")
    work.mkdir(mode=0o700)
    told = progress or _quiet
    try:
        copy = work / DB_FILE
        told("snapshot", 0, 1)
        tokens, state = await _snapshot(data / DB_FILE, copy)
        told("snapshot", 1, 1)
        node_key = key_file.read_bytes()
        secrets = {"node_key": node_key, "tokens": tokens,
                   "authority_key": _read_optional(data / AUTHORITY_KEY_FILE)}  # fmt: skip
        files = {DB_FILE: copy} | {n: data / n for n in PLAIN_FILES if (data / n).exists()}
        manifest = _manifest(files, state, node_key, now, kdf)
        sealed = _seal(encode_canonical(secrets), passphrase, manifest)
        size = await asyncio.to_thread(_write_tar, work / out.name, manifest, files, sealed,
                                       told)  # fmt: skip
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
    take = f"SELECT {_TOKEN_COLUMNS} FROM tokens ORDER BY token_id"  # noqa: S608
    tokens, state = await backup_without(db, copy, take=take, drop="DELETE FROM tokens")
    info = {"mesh": state.get("mesh", b"").hex(), "feed_id": state.get("feed_id", b"").decode(),
            "epoch": state.get("epoch", b"").hex(), "node_id": ""}  # fmt: skip
    return tokens, info


def _digest(path: Path) -> tuple[str, int]:
    h, size = hashlib.sha256(), 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _manifest(
    files: dict[str, Path], state: dict[str, Any], node_key: bytes, now: int, kdf: Kdf
) -> dict[str, Any]:
    state["node_id"] = node_id(SigningKey(node_key).public)
    listed = {}
    for name, path in files.items():
        sha, size = _digest(path)
        listed[name] = {"sha256": sha, "size": size}
    return {
        "format": _FORMAT, "version": _VERSION, "created": now, "schema_version": SCHEMA_VERSION,
        **state, "files": listed,
        "kdf": {"name": "scrypt", "log_n": kdf.log_n, "r": kdf.r, "p": kdf.p,
                "salt": random_bytes(16).hex()},
        "cipher": {"name": "AES-256-GCM", "nonce": random_bytes(12).hex()},
    }  # fmt: skip


def _manifest_bytes(manifest: dict[str, Any]) -> bytes:
    return json.dumps(manifest, sort_keys=True, indent=2).encode()


def _seal(plain: bytes, passphrase: bytes, manifest: dict[str, Any]) -> bytes:
    key = _kdf(manifest).derive(passphrase, bytes.fromhex(manifest["kdf"]["salt"]))
    nonce = bytes.fromhex(manifest["cipher"]["nonce"])
    return AESGCM(key).encrypt(nonce, plain, _manifest_bytes(manifest))


def _kdf(manifest: dict[str, Any]) -> Kdf:
    """The manifest's Scrypt cost — bounded, since it is read before anything is verified: at
    most 128 MiB and well under a second, near what memlane writes."""
    spec = manifest.get("kdf")
    if not isinstance(spec, dict) or not _makes(spec):
        shown = json.dumps(spec)[:200] if isinstance(spec, dict) else type(spec).__name__
        raise ArchiveError(f"the archive's key derivation is not one memlane makes: {shown}")
    return Kdf(spec["log_n"], spec["r"], spec["p"])


def _makes(spec: dict[str, Any]) -> bool:
    """Whether ``spec`` is a Scrypt cost and salt in the range memlane writes."""
    values = [spec.get(k) for k in ("log_n", "r", "p")]
    if spec.get("name") != "scrypt" or not all(type(v) is int for v in values):
        return False
    log_n, r, p = cast(list[int], values)
    if not (log_n in _LOG_N and 1 <= r <= _MAX_R and 1 <= p <= _MAX_P):
        return False
    return 128 * (1 << log_n) * r * p <= _MAX_KDF_MEMORY and _is_hex(spec.get("salt"), _SALT_BYTES)


def _is_hex(value: Any, sizes: range) -> bool:
    try:
        return isinstance(value, str) and len(bytes.fromhex(value)) in sizes
    except ValueError:
        return False


def _write_tar(
    out: Path, manifest: dict[str, Any], files: dict[str, Path], sealed: bytes, told: Progress
) -> int:
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    total = sum(path.stat().st_size for path in files.values())
    done = _Counted("write", total, told)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        _add_bytes(tar, _MANIFEST, _manifest_bytes(manifest))
        for name, path in files.items():
            with path.open("rb") as f:
                tar.addfile(tar.gettarinfo(path, arcname=name), cast(IO[bytes], _Reading(f, done)))
        done.finish()
        _add_bytes(tar, _SECRETS, sealed)
        tar.close()
        raw.flush()
        os.fsync(raw.fileno())
        return raw.tell()


def _quiet(phase: str, done: int, total: int) -> None:
    pass


class _Counted:
    """Bytes gone through, told to ``told`` a MiB at a time, and once at the end."""

    def __init__(self, phase: str, total: int, told: Progress) -> None:
        self.phase, self.total, self.told, self.done = phase, total, told, 0

    def add(self, n: int) -> None:
        before, self.done = self.done, self.done + n
        if before >> 20 != self.done >> 20:
            self.told(self.phase, self.done, max(self.total, self.done))

    def finish(self) -> None:
        self.told(self.phase, self.done, self.done)


class _Reading:
    """A file that counts the bytes read from it (all ``tarfile`` asks of a file)."""

    def __init__(self, f: IO[bytes], counted: _Counted) -> None:
        self.f, self.counted = f, counted

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.counted.add(len(data))
        return data


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o600
    tar.addfile(info, io.BytesIO(data))


# -- restore -------------------------------------------------------------------------------------


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
        manifest, secrets = await asyncio.to_thread(_unpack, archive, stage, passphrase,
                                                    progress or _quiet, room)  # fmt: skip
        report = await _rebuild(stage, manifest, secrets, now=now, keep_tokens=keep_tokens)
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


def _unpack(
    archive: Path, stage: Path, passphrase: bytes, told: Progress, room: int
) -> tuple[dict[str, Any], Any]:
    """Extract the listed files into ``stage``, each checked against the manifest, and open
    the secrets; anything amiss raises ``ArchiveError`` (``stage`` is then thrown away)."""
    try:
        with gzip.open(archive, "rb") as raw:
            stream = _Inflated(cast(IO[bytes], raw), _MAX_MANIFEST + _HEADROOM)
            with tarfile.open(fileobj=cast(IO[bytes], stream), mode="r|") as tar:
                manifest = _read_manifest(tar)
                listed = manifest["files"]
                total = sum(_size(f) for f in listed.values())
                if total > room:
                    raise ArchiveError(f"the archive's files take {total:,} bytes, more than "
                                       f"the {room:,} that may be written")  # fmt: skip
                stream.allow(total + _MAX_SECRETS + _HEADROOM)
                sealed = _unpack_members(tar, stage, listed, _Counted("unpack", total, told))
            stream.drain()  # to the end: gzip checks its length and CRC there
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"{archive} is not a readable memlane archive: {exc}") from exc
    return manifest, _open_secrets(sealed, passphrase, manifest)


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
    tar: tarfile.TarFile, stage: Path, listed: dict[str, Any], done: _Counted
) -> bytes:
    """Every member after the manifest — each listed file once, then the secrets — refused
    from its header when it is anything else; return the sealed secrets."""
    expected, sealed = {*listed, _SECRETS}, b""
    while (member := tar.next()) is not None:
        if member.name not in expected or not member.isreg():
            raise ArchiveError("the archive holds other files than its manifest lists")
        expected.discard(member.name)
        if member.name == _SECRETS:
            sealed = _read_secrets(tar, member)
        else:
            _extract(tar, member, stage, listed[member.name], done)
    if expected:
        raise ArchiveError("the archive holds other files than its manifest lists")
    done.finish()
    return sealed


def _member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    f = tar.extractfile(member)
    if f is None:
        raise ArchiveError(f"the archive's {member.name} is not a file")
    return f


def _read_manifest(tar: tarfile.TarFile) -> dict[str, Any]:
    manifest = _parse_manifest(tar)
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        raise ArchiveError("not a memlane archive (no manifest of one)")
    if manifest.get("version") != _VERSION:
        raise ArchiveError(f"archive format {manifest.get('version')!r} is not supported")
    allowed = {DB_FILE, *PLAIN_FILES}
    if not isinstance(manifest.get("files"), dict) or not set(manifest["files"]) <= allowed:
        raise ArchiveError("the archive's manifest lists files a node does not have")
    if DB_FILE not in manifest["files"]:
        raise ArchiveError(f"the archive lacks {DB_FILE}")
    if not all(_is_listing(v) for v in manifest["files"].values()):
        raise ArchiveError("the archive's manifest is malformed: a file without its checksum")
    _kdf(manifest)  # refused here, before any file is unpacked
    return manifest


def _parse_manifest(tar: tarfile.TarFile) -> Any:
    """The manifest's JSON — the archive's first member, as memlane writes it — refused
    unread when it is larger or deeper than memlane writes."""
    member = tar.next()
    if member is None or member.name != _MANIFEST:
        raise ArchiveError("not a memlane archive (no manifest of one)")
    if member.size > _MAX_MANIFEST:
        raise ArchiveError(f"the archive's manifest is larger than {_MAX_MANIFEST:,} bytes")
    try:
        text = _member(tar, member).read().decode()
    except UnicodeDecodeError as exc:
        raise ArchiveError("the archive's manifest is not JSON") from exc
    if _too_deep(text, _MAX_MANIFEST_DEPTH):
        raise ArchiveError(
            f"the archive's manifest is nested more than {_MAX_MANIFEST_DEPTH} levels deep"
        )
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ArchiveError("the archive's manifest is not JSON") from exc


def _too_deep(text: str, limit: int) -> bool:
    """Whether the JSON ``text`` nests arrays and objects more than ``limit`` deep (brackets
    inside strings do not count); one pass, so ``json`` never recurses past ``limit``."""
    depth, in_string, escaped = 0, False, False
    for c in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (c == "\\", c != '"')
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > limit:
                return True
        elif c in "]}":
            depth -= 1
    return False


def _is_listing(listed: Any) -> bool:
    size = listed.get("size") if isinstance(listed, dict) else None
    return (
        isinstance(listed, dict)
        and isinstance(listed.get("sha256"), str)
        and (type(size) is int and size >= 0)
    )


def _read_secrets(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """``secrets.enc``, refused from its size in the tar before a byte of it is read."""
    if member.size > _MAX_SECRETS:
        raise ArchiveError(f"the archive's secrets are larger than {_MAX_SECRETS:,} bytes")
    return _member(tar, member).read()


def _size(listed: Any) -> int:
    size = listed.get("size") if isinstance(listed, dict) else None
    return size if isinstance(size, int) else 0


def _extract(
    tar: tarfile.TarFile, member: tarfile.TarInfo, stage: Path, listed: Any, done: _Counted
) -> None:
    name = member.name
    if member.size != listed.get("size"):  # refused from its header, before a byte is written
        raise ArchiveError(f"{name} in the archive does not match its checksum")
    src, h, size = _member(tar, member), hashlib.sha256(), 0
    fd = os.open(stage / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as dst:
        while chunk := src.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
            dst.write(chunk)
            done.add(len(chunk))
    if (h.hexdigest(), size) != (listed.get("sha256"), listed.get("size")):
        raise ArchiveError(f"{name} in the archive does not match its checksum")


def _open_secrets(sealed: bytes, passphrase: bytes, manifest: dict[str, Any]) -> Any:
    try:
        key = _kdf(manifest).derive(passphrase, bytes.fromhex(manifest["kdf"]["salt"]))
        nonce = bytes.fromhex(manifest["cipher"]["nonce"])
        plain = AESGCM(key).decrypt(nonce, sealed, _manifest_bytes(manifest))
    except InvalidTag as exc:
        raise WrongPassphrase(
            "the passphrase does not open this archive (or the archive was altered)"
        ) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise ArchiveError(f"the archive's manifest is malformed: {exc}") from exc
    try:
        secrets = decode_canonical(plain, what="secrets", max_bytes=_MAX_SECRETS)
    except ProtocolError as exc:
        raise ArchiveError(f"the archive's secrets are malformed: {exc}") from exc
    if not _is_secrets(secrets):
        raise ArchiveError("the archive's secrets are malformed: not the keys and tokens of a node")
    return secrets


def _is_secrets(secrets: Any) -> bool:
    """Whether the opened secrets have the shape ``create_archive`` seals."""
    if not isinstance(secrets, dict) or set(secrets) != {"node_key", "authority_key", "tokens"}:
        return False
    keys = [secrets["node_key"]] + [k for k in [secrets["authority_key"]] if k is not None]
    tokens = secrets["tokens"]
    return (all(type(k) is bytes and len(k) == 32 for k in keys) and isinstance(tokens, list)
            and all(_is_token_row(row) for row in tokens))  # fmt: skip


def _is_token_row(row: Any) -> bool:
    """A row of ``tokens`` as ``_TOKEN_COLUMNS`` names them: hash, four texts, three times."""
    if not isinstance(row, list) or len(row) != 8 or type(row[0]) is not bytes:
        return False
    texts, times = row[1:5], row[5:]
    return (
        all(type(t) is str for t in texts)
        and type(times[0]) is int
        and all(t is None or (type(t) is int and -(1 << 63) <= t < 1 << 63) for t in times)
    )


async def _rebuild(
    stage: Path, manifest: dict[str, Any], secrets: Any, *, now: int, keep_tokens: bool
) -> tuple[str, str, str, int, int]:
    """Keys back in their files, tokens back in the store, a new epoch for each log this node
    writes, a new feed id — all without an audit event."""
    node_key, authority = SigningKey(secrets["node_key"]), secrets.get("authority_key")
    write_key(stage / NODE_KEY_FILE, secrets["node_key"])
    logs = [(node_key.public, "epoch")]
    if authority is not None:
        write_key(stage / AUTHORITY_KEY_FILE, authority)
        logs.append((SigningKey(authority).public, "authority_epoch"))
    store = await Store.open(stage / DB_FILE, wall=lambda: now, options=StoreOptions(),
                             views=default_views())  # fmt: skip
    feed_id, epoch = random_bytes(8).hex(), random_bytes(8)
    tokens = [list(row) for row in secrets["tokens"]]
    revoked = 0 if keep_tokens else sum(row[7] is None for row in tokens)

    async def op(txn: Txn) -> None:
        for row in tokens:
            if not keep_tokens and row[7] is None:
                row[7] = now
            txn.add(f"INSERT INTO tokens ({_TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)  # noqa: S608
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
