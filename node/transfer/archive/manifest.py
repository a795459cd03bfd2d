"""The archive's format: what its manifest lists and how a restore checks it before
anything is used, the key derivation it names, and the errors a refused archive raises
(docs/operations.md §Backups)."""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from node.errors import NodeError
from node.identity import (
    DB_FILE,
    node_id,
    random_bytes,
)
from node.schema import SCHEMA_VERSION
from protocol.signing import SigningKey

__all__ = [
    "MANIFEST_MEMBER",
    "MAX_MANIFEST_BYTES",
    "MAX_SECRETS_BYTES",
    "PLAIN_FILES",
    "SECRETS_MEMBER",
    "TAR_HEADROOM",
    "ArchiveError",
    "Kdf",
    "WrongPassphrase",
    "listed_size",
    "make_manifest",
    "manifest_bytes",
    "manifest_kdf",
    "member_file",
    "read_manifest",
]


PLAIN_FILES = ("config.toml", "ca.crt", "node.crt")
"""Files of the data directory an archive carries as they are (none of them secret)."""

_FORMAT = "memlane-archive"
_VERSION = 1
MANIFEST_MEMBER, SECRETS_MEMBER = "manifest.json", "secrets.enc"
MAX_SECRETS_BYTES = 1 << 26  # bytes: the key files and every token row, with room to spare
MAX_MANIFEST_BYTES = 1 << 16  # bytes: memlane writes about 1 KiB
_MAX_MANIFEST_DEPTH = 8  # levels of arrays and objects: memlane writes 3
# Scrypt's cost as a manifest may ask for it: near the default memlane writes (Kdf), since the
# derivation runs before the passphrase can be checked (docs/operations.md §Backups).
_LOG_N, _MAX_R, _MAX_P, _MAX_KDF_MEMORY = range(10, 18), 8, 1, 128 << 20
_SALT_BYTES = range(16, 65)
# Decompressed bytes beyond the members' own: tar headers (pax ones included), padding and the
# end of the archive — memlane's take a few KiB.
TAR_HEADROOM = 1 << 16


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


def _digest(path: Path) -> tuple[str, int]:
    h, size = hashlib.sha256(), 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def make_manifest(
    files: dict[str, Path], state: dict[str, Any], node_key: bytes, now: int, kdf: Kdf
) -> dict[str, Any]:
    """The manifest of an archive of ``files``: each one's SHA-256 and size, the node's
    ``state``, and the key derivation's and cipher's parameters (a fresh salt and nonce)."""
    state["node_id"] = node_id(SigningKey(node_key).public)
    listed = {}
    for name, path in files.items():
        sha, size = _digest(path)
        listed[name] = {"sha256": sha, "size": size}
    return {
        "format": _FORMAT,
        "version": _VERSION,
        "created": now,
        "schema_version": SCHEMA_VERSION,
        **state,
        "files": listed,
        "kdf": {
            "name": "scrypt",
            "log_n": kdf.log_n,
            "r": kdf.r,
            "p": kdf.p,
            "salt": random_bytes(16).hex(),
        },
        "cipher": {"name": "AES-256-GCM", "nonce": random_bytes(12).hex()},
    }


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The manifest as ``manifest.json`` holds it, and as the secrets' associated data."""
    return json.dumps(manifest, sort_keys=True, indent=2).encode()


def manifest_kdf(manifest: dict[str, Any]) -> Kdf:
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


def member_file(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    """The content of ``member``, which must be a file."""
    f = tar.extractfile(member)
    if f is None:
        raise ArchiveError(f"the archive's {member.name} is not a file")
    return f


def read_manifest(tar: tarfile.TarFile) -> dict[str, Any]:
    """The archive's manifest, refused unless it is one memlane writes."""
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
    manifest_kdf(manifest)  # refused here, before any file is unpacked
    return manifest


def _parse_manifest(tar: tarfile.TarFile) -> Any:
    """The manifest's JSON — the archive's first member, as memlane writes it — refused
    unread when it is larger or deeper than memlane writes."""
    member = tar.next()
    if member is None or member.name != MANIFEST_MEMBER:
        raise ArchiveError("not a memlane archive (no manifest of one)")
    if member.size > MAX_MANIFEST_BYTES:
        raise ArchiveError(f"the archive's manifest is larger than {MAX_MANIFEST_BYTES:,} bytes")
    try:
        text = member_file(tar, member).read().decode()
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


def listed_size(listed: Any) -> int:
    """The size a manifest lists for a file (0 when it lists none)."""
    size = listed.get("size") if isinstance(listed, dict) else None
    return size if isinstance(size, int) else 0
