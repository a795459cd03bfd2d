"""Bearer tokens: issued by this node, stored only as SHA-256 hashes (docs/authority.md §Tokens).

A token is ``mlt_`` + 32 random bytes in URL-safe base64.  Its public ``token_id`` (``tok_`` +
the first 6 bytes of the hash, hex) names it in listings and revocations.  A missing, unknown,
expired or revoked token authenticates as nothing, with one and the same error.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node.access.callers import SCOPES, Caller
from node.errors import Refusal, Unauthenticated
from node.identity import random_bytes
from node.store import Store, Txn
from node.store.reader import Fetch
from protocol.kinds import PRINCIPAL, WORKSPACE

__all__ = [
    "ARCHIVED_COLUMNS",
    "DROP_ARCHIVED",
    "TAKE_ARCHIVED",
    "TOKEN_STEPS",
    "IssuedToken",
    "TokenInfo",
    "authenticate",
    "authenticate_in",
    "issue",
    "put_back",
    "revoke",
    "select_tokens",
]

# The tokens' table, made by the store's first step (``node.schema`` composes the steps).
_TOKENS = """\
CREATE TABLE tokens (
    hash BLOB PRIMARY KEY,
    token_id TEXT NOT NULL UNIQUE,
    principal TEXT NOT NULL,
    workspace TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created INTEGER NOT NULL,
    expires INTEGER,
    revoked INTEGER
) WITHOUT ROWID;
"""
TOKEN_STEPS: Mapping[int, str] = {1: _TOKENS}


# The token rows as an archive keeps them, apart from its copy of the store
# (node/transfer/archive): the hash, four texts and three times, in this order.
ARCHIVED_COLUMNS = "hash, token_id, principal, workspace, scopes, created, expires, revoked"
TAKE_ARCHIVED = f"SELECT {ARCHIVED_COLUMNS} FROM tokens ORDER BY token_id"  # noqa: S608
DROP_ARCHIVED = "DELETE FROM tokens"
_PUT_BACK = f"INSERT INTO tokens ({ARCHIVED_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"  # noqa: S608


def put_back(txn: Txn, rows: Iterable[Sequence[object]]) -> None:
    """Queue archived rows (``ARCHIVED_COLUMNS``) into the table of a store being restored."""
    for row in rows:
        txn.add(_PUT_BACK, row)


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: str
    token_id: str


@dataclass(frozen=True, slots=True)
class TokenInfo:
    token_id: str
    principal: str
    workspace: str
    scopes: tuple[str, ...]
    created: int
    expires: int | None
    revoked: int | None


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _token_id(digest: bytes) -> str:
    return "tok_" + digest[:6].hex()


def _check(principal: str, workspace: str, scopes: Iterable[str]) -> tuple[str, ...]:
    if not isinstance(principal, str) or not re.fullmatch(PRINCIPAL, principal):
        raise Refusal(f"invalid principal {principal!r}")
    if not isinstance(workspace, str) or not re.fullmatch(WORKSPACE, workspace):
        raise Refusal(f"invalid workspace {workspace!r}")
    chosen = tuple(dict.fromkeys(scopes))
    bad = [s for s in chosen if s not in SCOPES]
    if bad or not chosen:
        raise Refusal(f"scopes must be among {', '.join(SCOPES)} (got {', '.join(bad) or 'none'})")
    return chosen


async def issue(
    store: Store, principal: str, workspace: str, scopes: Iterable[str], expires: int | None
) -> IssuedToken:
    chosen = _check(principal, workspace, scopes)
    now = store.wall()
    if expires is not None and expires <= now:
        raise Refusal("expires must be in the future")
    token = "mlt_" + base64.urlsafe_b64encode(random_bytes(32)).decode().rstrip("=")
    digest = _hash(token)

    async def op(txn: Txn) -> None:
        txn.add(
            "INSERT INTO tokens (hash, token_id, principal, workspace, scopes, created, expires) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (digest, _token_id(digest), principal, workspace, " ".join(chosen), now, expires),
        )

    await store.run(op)
    return IssuedToken(token, _token_id(digest))


_BY_HASH = (
    "SELECT token_id, principal, workspace, scopes, expires, revoked FROM tokens WHERE hash = ?"
)


async def authenticate(store: Store, token: str | None) -> Caller:
    assert store.reader is not None
    rows = await store.reader.fetchall(_BY_HASH, (_hash(_checked(token)),))
    return _caller(rows, store.wall())


def authenticate_in(fetch: Fetch, token: str | None, now: int) -> Caller:
    """``authenticate`` as one read among others on the reader's thread (``Reader.run``),
    ``now`` the store's wall clock."""
    return _caller(fetch(_BY_HASH, (_hash(_checked(token)),)), now)


def _checked(token: str | None) -> str:
    if not token or not isinstance(token, str) or len(token) > 200:
        raise Unauthenticated
    return token


def _caller(rows: Sequence[Sequence[Any]], now: int) -> Caller:
    if not rows:
        raise Unauthenticated
    token_id, principal, workspace, scopes, expires, revoked = rows[0]
    if revoked is not None or (expires is not None and expires <= now):
        raise Unauthenticated
    return Caller(principal, workspace, frozenset(scopes.split()), token_id, expires)


async def select_tokens(store: Store) -> list[TokenInfo]:
    assert store.reader is not None
    rows = await store.reader.fetchall(
        "SELECT token_id, principal, workspace, scopes, created, expires, revoked FROM tokens "
        "ORDER BY created, token_id"
    )
    return [TokenInfo(r[0], r[1], r[2], tuple(r[3].split()), r[4], r[5], r[6]) for r in rows]


async def revoke(store: Store, token_id: str) -> bool:
    """Revoke by id; False when no unrevoked token has that id."""
    now = store.wall()

    async def op(txn: Txn) -> bool:
        row = await txn.fetchone(
            "SELECT 1 FROM tokens WHERE token_id = ? AND revoked IS NULL", (token_id,)
        )
        if row:
            txn.add("UPDATE tokens SET revoked = ? WHERE token_id = ?", (now, token_id))
        return row is not None

    result: bool = await store.run(op)
    return result
