"""An archive's secrets — the node key, the authority key if the node holds it, and every
token row — sealed with AES-256-GCM under a key derived from the passphrase, the manifest as
associated data, and opened again only in the shape ``create_archive`` seals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from node.transfer.archive.manifest import (
    MAX_SECRETS_BYTES,
    ArchiveError,
    WrongPassphrase,
    manifest_bytes,
    manifest_kdf,
)
from protocol.canonical import decode_canonical
from protocol.errors import ProtocolError

__all__ = ["open_secrets", "read_passphrase", "seal_secrets"]


def read_passphrase(path: Path) -> bytes:
    """The passphrase in ``path`` (its trailing newline dropped); an empty one is refused."""
    try:
        text = path.read_bytes().rstrip(b"\r\n")
    except OSError as exc:
        raise ArchiveError(f"cannot read the passphrase file {path}: {exc.strerror}") from exc
    if not text:
        raise ArchiveError(f"the passphrase file {path} is empty")
    return text


def seal_secrets(plain: bytes, passphrase: bytes, manifest: dict[str, Any]) -> bytes:
    """``plain`` encrypted under the passphrase's key, ``manifest`` as associated data."""
    key = manifest_kdf(manifest).derive(passphrase, bytes.fromhex(manifest["kdf"]["salt"]))
    nonce = bytes.fromhex(manifest["cipher"]["nonce"])
    return AESGCM(key).encrypt(nonce, plain, manifest_bytes(manifest))


def open_secrets(sealed: bytes, passphrase: bytes, manifest: dict[str, Any]) -> Any:
    """The secrets ``seal_secrets`` sealed, refused unless they have the shape it seals."""
    try:
        key = manifest_kdf(manifest).derive(passphrase, bytes.fromhex(manifest["kdf"]["salt"]))
        nonce = bytes.fromhex(manifest["cipher"]["nonce"])
        plain = AESGCM(key).decrypt(nonce, sealed, manifest_bytes(manifest))
    except InvalidTag as exc:
        raise WrongPassphrase(
            "the passphrase does not open this archive (or the archive was altered)"
        ) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise ArchiveError(f"the archive's manifest is malformed: {exc}") from exc
    try:
        secrets = decode_canonical(plain, what="secrets", max_bytes=MAX_SECRETS_BYTES)
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
    return (
        all(type(k) is bytes and len(k) == 32 for k in keys)
        and isinstance(tokens, list)
        and all(_is_token_row(row) for row in tokens)
    )


def _is_token_row(row: Any) -> bool:
    """A row of ``tokens`` as ``ARCHIVED_COLUMNS`` (node.access.tokens) names them: hash, four
    texts, three times."""
    if not isinstance(row, list) or len(row) != 8 or type(row[0]) is not bytes:
        return False
    texts, times = row[1:5], row[5:]
    return (
        all(type(t) is str for t in texts)
        and type(times[0]) is int
        and all(t is None or (type(t) is int and -(1 << 63) <= t < 1 << 63) for t in times)
    )
