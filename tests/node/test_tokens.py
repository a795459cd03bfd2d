"""Bearer tokens (docs/authority.md §Tokens): issued here, stored only as SHA-256 hashes, and a
missing, unknown, revoked or expired token authenticates as nothing — all with one and the same
error."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from node.access.callers import Caller
from node.errors import Refusal, Unauthenticated
from node.node import Node

READ_WRITE = ("read:workspace", "write:workspace")


async def token_rows(node: Node) -> list[tuple[bytes, str]]:
    reader = node.reader()
    return [(bytes(h), i) for h, i in await reader.fetchall("SELECT hash, token_id FROM tokens")]


async def unauthenticated(node: Node, token: object) -> str:
    with pytest.raises(Unauthenticated) as info:
        await node.authenticate(token)  # type: ignore[arg-type]
    return info.value.text


@pytest.mark.asyncio
async def test_create_and_authenticate(node):
    issued = await node.create_token("alice", "team", ["read:workspace", "write:workspace"])
    assert issued.token.startswith("mlt_")
    assert len(issued.token) >= 4 + 43  # 32 random bytes, base64
    assert issued.token_id.startswith("tok_")
    caller = await node.authenticate(issued.token)
    assert caller == Caller(
        "alice", "team", frozenset({"read:workspace", "write:workspace"}), issued.token_id, None
    )
    assert caller.has("write:workspace")
    assert not caller.is_admin


@pytest.mark.asyncio
async def test_tokens_differ_and_name_their_own_caller(node):
    one = await node.create_token("alice", "team", ["read:workspace"])
    two = await node.create_token("alice", "team", ["read:workspace"])
    bob = await node.create_token("bob", "ops", ["admin:workspace"])
    assert len({one.token, two.token, bob.token}) == 3
    assert len({one.token_id, two.token_id, bob.token_id}) == 3
    caller = await node.authenticate(bob.token)
    assert (caller.principal, caller.workspace, caller.token_id) == ("bob", "ops", bob.token_id)
    assert caller.has("write:workspace")  # admin implies write and read
    assert caller.has("read:workspace")
    assert not (await node.authenticate(one.token)).has("write:workspace")


def store_files(data: Path) -> list[bytes]:
    """The bytes of the node's SQLite files (the database, its WAL and shared memory)."""
    return [p.read_bytes() for p in sorted(data.iterdir()) if p.name.startswith("memlane.db")]


@pytest.mark.asyncio
async def test_only_the_hash_is_stored(node_dir, wall):
    async with Node.open(node_dir, wall=wall) as node:
        issued = await node.create_token("alice", "team", READ_WRITE)
        digest = hashlib.sha256(issued.token.encode()).digest()
        assert await token_rows(node) == [(digest, issued.token_id)]
        assert issued.token_id == "tok_" + digest[:6].hex()
        assert (await node.authenticate(issued.token)).token_id == issued.token_id
        open_files = store_files(node_dir)
    closed_files = store_files(node_dir)  # checkpointed into the database file
    secret = issued.token.removeprefix("mlt_").encode()
    for files in (open_files, closed_files):
        assert not any(issued.token.encode() in data or secret in data for data in files)
        # the digest is there, so the search looked at the right bytes
        assert any(digest in data for data in files)


@pytest.mark.asyncio
async def test_scopes_are_deduplicated_in_order(node):
    issued = await node.create_token(
        "alice", "team", ["write:workspace", "read:workspace", "write:workspace"]
    )
    tokens = await node.list_tokens()
    assert tokens[0].scopes == ("write:workspace", "read:workspace")
    assert (await node.authenticate(issued.token)).scopes == frozenset(tokens[0].scopes)


@pytest.mark.asyncio
async def test_unknown_revoked_and_expired_tokens_fail_alike(node, wall):
    live = await node.create_token("alice", "team", READ_WRITE)
    revoked = await node.create_token("alice", "team", READ_WRITE)
    expiring = await node.create_token("alice", "team", READ_WRITE, expires=wall.now + 60_000)
    assert await node.revoke_token(revoked.token_id) is True

    texts = {
        await unauthenticated(node, "mlt_" + "A" * 43),
        await unauthenticated(node, live.token + "x"),
        await unauthenticated(node, live.token.upper()),
        await unauthenticated(node, revoked.token),
        await unauthenticated(node, None),
        await unauthenticated(node, ""),
        await unauthenticated(node, 12345),
        await unauthenticated(node, "mlt_" + "A" * 500),
    }
    wall.now += 59_999
    assert (await node.authenticate(expiring.token)).expires == wall.now + 1
    wall.now += 1  # expiry is exclusive: at `expires` the token is dead
    texts.add(await unauthenticated(node, expiring.token))
    assert texts == {"unauthenticated: a valid token is required"}
    assert isinstance(Unauthenticated(), Refusal)
    # the live one still works, and revoking one token leaves the others alone
    assert (await node.authenticate(live.token)).token_id == live.token_id


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("principal", "workspace", "scopes", "fragment"),
    [
        ("alice", "team", ["root"], "scopes must be among"),
        ("alice", "team", ["read:workspace", "write:all"], "write:all"),
        ("alice", "team", [], "got none"),
        ("alice", "team", ["READ:WORKSPACE"], "READ:WORKSPACE"),
        ("", "team", ["read:workspace"], "invalid principal"),
        ("has space", "team", ["read:workspace"], "invalid principal"),
        ("-dash-first", "team", ["read:workspace"], "invalid principal"),
        ("a" * 129, "team", ["read:workspace"], "invalid principal"),
        (7, "team", ["read:workspace"], "invalid principal"),
        ("alice", "", ["read:workspace"], "invalid workspace"),
        ("alice", "a/b", ["read:workspace"], "invalid workspace"),
        ("alice", "*", ["read:workspace"], "invalid workspace"),
        ("alice", "w" * 65, ["read:workspace"], "invalid workspace"),
        ("alice", None, ["read:workspace"], "invalid workspace"),
    ],
)
async def test_invalid_tokens_are_refused(node, principal, workspace, scopes, fragment):
    with pytest.raises(Refusal) as info:
        await node.create_token(principal, workspace, scopes)
    assert fragment in info.value.text
    assert await token_rows(node) == []


@pytest.mark.asyncio
async def test_expiry_must_be_in_the_future(node, wall):
    for expires in (wall.now, wall.now - 1, 0):
        with pytest.raises(Refusal) as info:
            await node.create_token("alice", "team", READ_WRITE, expires=expires)
        assert info.value.text == "expires must be in the future"
    assert await token_rows(node) == []


@pytest.mark.asyncio
async def test_list_shows_ids_never_secrets(node, wall):
    one = await node.create_token("alice", "team", READ_WRITE)
    wall.now += 1000
    two = await node.create_token("bob", "ops", ["read:workspace"], expires=wall.now + 5000)
    listed = await node.list_tokens()
    assert [t.token_id for t in listed] == [one.token_id, two.token_id]
    first, second = listed
    assert (first.principal, first.workspace, first.scopes) == ("alice", "team", READ_WRITE)
    assert (first.created, first.expires, first.revoked) == (wall.now - 1000, None, None)
    assert (second.principal, second.expires) == ("bob", wall.now + 5000)
    text = repr(listed)
    for issued in (one, two):
        assert issued.token not in text
        assert issued.token.removeprefix("mlt_") not in text
        assert hashlib.sha256(issued.token.encode()).hexdigest() not in text


@pytest.mark.asyncio
async def test_revoke(node, wall):
    issued = await node.create_token("alice", "team", READ_WRITE)
    wall.now += 42
    assert await node.revoke_token(issued.token_id) is True
    assert (await node.list_tokens())[0].revoked == wall.now
    assert await node.revoke_token(issued.token_id) is False  # already revoked
    assert await node.revoke_token("tok_000000000000") is False
    assert await node.revoke_token("") is False
    assert [t.token_id for t in await node.list_tokens()] == [issued.token_id]


@pytest.mark.asyncio
async def test_tokens_survive_a_restart_and_so_do_revocations(node_dir, wall):
    async with Node.open(node_dir, wall=wall) as first:
        kept = await first.create_token("alice", "team", READ_WRITE)
        dropped = await first.create_token("alice", "team", READ_WRITE)
        await first.revoke_token(dropped.token_id)
    async with Node.open(node_dir, wall=wall) as again:
        assert (await again.authenticate(kept.token)).principal == "alice"
        with pytest.raises(Unauthenticated):
            await again.authenticate(dropped.token)
