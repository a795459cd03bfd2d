"""A node's identity on disk: its Ed25519 key (and, on an authority, the mesh authority key);
the random bytes it draws, and the identifiers it makes of them (UUIDv7), or of names (UUIDv8).

Keys are 32-byte seeds in files of mode 0600 inside a data directory of mode 0700.  A node id
is the short readable form of its public key: base32 of its first 10 bytes, in groups of four.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from node.errors import ConfigError, NotInitialised
from protocol.signing import SigningKey

__all__ = [
    "AUTHORITY_KEY_FILE",
    "DB_FILE",
    "NODE_KEY_FILE",
    "create_key",
    "load_key",
    "node_id",
    "random_bytes",
    "random_source",
    "uuid7",
    "uuid8",
    "write_key",
]

NODE_KEY_FILE = "node.key"
AUTHORITY_KEY_FILE = "authority.key"
DB_FILE = "memlane.db"


_source: Callable[[int], bytes] = secrets.token_bytes


def random_bytes(n: int) -> bytes:
    """Every random byte the node draws — keys, epochs, ids, tokens — comes from here."""
    return _source(n)


@contextmanager
def random_source(draw: Callable[[int], bytes]) -> Iterator[None]:
    """Draw the node's random bytes from ``draw`` meanwhile: a simulation's seeded generator,
    so a seed replays exactly.  Nothing but a simulation has a reason to use it."""
    global _source
    before, _source = _source, draw
    try:
        yield
    finally:
        _source = before


def node_id(public: bytes) -> str:
    """``abcd-efgh-ijkl-mnop``: 80 bits of the key, enough to tell nodes apart by eye."""
    text = base64.b32encode(public[:10]).decode().lower()
    return "-".join(text[i : i + 4] for i in range(0, 16, 4))


def create_key(path: Path) -> SigningKey:
    """Write a new key file (refusing to overwrite one) and return the key."""
    return write_key(path, random_bytes(32))


def write_key(path: Path, seed: bytes) -> SigningKey:
    """Write the key file of ``seed`` (owner-only, synced; refusing to overwrite one)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise ConfigError(f"{path} already exists; this directory already holds a node") from exc
    with os.fdopen(fd, "wb") as f:
        f.write(seed)
        f.flush()
        os.fsync(f.fileno())
    return SigningKey(seed)


def load_key(path: Path) -> SigningKey:
    try:
        seed = path.read_bytes()
    except FileNotFoundError as exc:
        raise NotInitialised(f"no node in {path.parent} (run `memlane init`)") from exc
    if len(seed) != 32:
        raise ConfigError(f"{path} is not a memlane key file")
    if path.stat().st_mode & 0o077:
        raise ConfigError(f"{path} is readable by others; run `chmod 600 {path}`")
    return SigningKey(seed)


def uuid7(ms: int) -> str:
    """A UUIDv7 (RFC 9562): 48-bit Unix ms, version 7, 74 random bits, variant 10."""
    rand = int.from_bytes(random_bytes(10))
    value = (ms & _MS_MASK) << 80 | 0x7 << 76 | (rand >> 62 & 0xFFF) << 64 | 0b10 << 62
    h = f"{value | rand & _LOW62:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid8(*parts: str) -> str:
    """A UUID of version 8 (RFC 9562) named by ``parts``: the first 16 bytes of the SHA-256
    of their NUL-joined text, with the version and variant bits set.  The same parts give the
    same id on every node: an imported record's (docs/export.md §Importing), a LangGraph
    item's (docs/langgraph.md)."""
    raw = bytearray(hashlib.sha256("\0".join(parts).encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x80
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_MS_MASK = (1 << 48) - 1
_LOW62 = (1 << 62) - 1
