"""Invites: signed by the authority, expiring, single-use; redeeming one admits the joiner's key
and certifies it (docs/mesh.md §Invites and joining).  The network step of joining is not here:
these tests call the authority's side directly."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from node.identity import AUTHORITY_KEY_FILE
from node.members import certs, invites
from node.members.errors import InviteError, MeshError, NotAuthority
from node.node import Node
from protocol.signing import SigningKey
from tests.node.helpers import counts

HOUR = 3_600_000
NOW = 1_790_000_000_000
MESH = b"\x4d" * 16
AUTHORITY = SigningKey(b"\xa1" * 32)
PRIVATE = Ed25519PrivateKey.from_private_bytes(b"\xa1" * 32)
JOINER = SigningKey(b"\x0f" * 32).public


def issue(**kw: Any) -> str:
    args: dict[str, Any] = {
        "authority": AUTHORITY,
        "mesh": MESH,
        "invite_id": b"\x01" * 16,
        "workspaces": ["team", "ops"],
        "expires": NOW + HOUR,
    } | kw
    return invites.issue(**args)


def redeem(text: str, **kw: Any) -> invites.Redeemed:
    args: dict[str, Any] = {
        "authority": PRIVATE,
        "mesh": MESH,
        "used": False,
        "cert_lifetime_ms": 30 * 24 * HOUR,
    } | kw
    return invites.redeem(text, JOINER, NOW, **args)


async def state_rows(node: Node) -> list[tuple[Any, ...]]:
    reader = node.reader()
    return await reader.fetchall("SELECT key, value FROM state WHERE key LIKE 'invite:%'")


# -- the text form -------------------------------------------------------------------------------


def test_an_invite_is_compact_text_that_reads_back() -> None:
    text = issue(label="laptop")
    assert text.startswith(invites.PREFIX)
    assert len(text) < 260
    assert set(text[len(invites.PREFIX) :]) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    )
    assert invites.read(f"  {text}\n") == invites.Invite(
        MESH, AUTHORITY.public, b"\x01" * 16, ("team", "ops"), NOW + HOUR, "laptop"
    )


def test_every_truncation_tampering_and_trailing_data_is_refused() -> None:
    text = issue()
    for cut in range(len(text)):
        with pytest.raises(InviteError):
            invites.read(text[:cut])
    for extra in ("A", "AAAA", "=", ".x"):
        with pytest.raises(InviteError):
            invites.read(text + extra)
    blob = bytearray(base64.urlsafe_b64decode(text[len(invites.PREFIX) :] + "=="))
    for i in range(len(blob)):
        flipped = bytearray(blob)
        flipped[i] ^= 0x01
        with pytest.raises(InviteError):
            invites.read(_encoded(bytes(flipped)))


def _encoded(blob: bytes) -> str:
    return invites.PREFIX + base64.urlsafe_b64encode(blob).rstrip(b"=").decode()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400) | st.binary(max_size=300).map(_encoded))
def test_any_text_reads_as_an_invite_or_is_refused(text: str) -> None:
    with contextlib.suppress(InviteError):
        invites.read(text)


def test_an_invite_promises_only_a_valid_grant() -> None:
    for workspaces in ([], ["no spaces"], ["x" * 65]):
        with pytest.raises(MeshError):
            issue(workspaces=workspaces)


# -- redeeming (the authority's side, a pure function) -------------------------------------------


def test_redeeming_gives_the_grant_and_a_certificate_for_the_joiner() -> None:
    done = redeem(issue(label="laptop"))
    expires = NOW + 30 * 24 * HOUR
    assert done.payload == {
        "node": JOINER,
        "workspaces": ["team", "ops"],
        "cert_expires": expires,
        "label": "laptop",
    }
    done.certificate.verify_directly_issued_by(certs.authority_certificate(PRIVATE, MESH))
    assert certs.raw_public(done.certificate.public_key()) == JOINER
    assert int(done.certificate.not_valid_after_utc.timestamp() * 1000) == expires


@pytest.mark.parametrize(
    ("invite", "now", "used", "reason"),
    [
        (lambda: issue(authority=SigningKey(b"\xb2" * 32)), NOW, False, "not issued by this"),
        (lambda: issue(mesh=b"\x4e" * 16), NOW, False, "for another mesh"),
        (issue, NOW + HOUR, False, "has expired"),
        (issue, NOW, True, "already used"),
    ],
)
def test_an_invite_is_refused_when(invite: Any, now: int, used: bool, reason: str) -> None:
    with pytest.raises(InviteError, match=reason):
        invites.redeem(
            invite(), JOINER, now, authority=PRIVATE, mesh=MESH, used=used, cert_lifetime_ms=HOUR
        )


# -- through the authority node ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_authority_node_admits_a_joiner_once(node: Node) -> None:
    text = node.membership.create_invite(workspaces=["team"], lifetime_ms=HOUR, label="laptop")
    done = await node.membership.redeem_invite(text, JOINER)

    member = node.membership.member(JOINER)
    assert member is not None
    assert (member.workspaces, member.label, member.cert_expires) == (
        ("team",),
        "laptop",
        done.payload["cert_expires"],
    )
    done.certificate.verify_directly_issued_by(node.membership.authority_certificate())
    invite_id = invites.read(text).invite_id
    assert await state_rows(node) == [(f"invite:{invite_id.hex()}", JOINER)]

    before = await counts(node)
    for key in (JOINER, SigningKey(b"\x10" * 32).public):
        with pytest.raises(InviteError, match="already used"):
            await node.membership.redeem_invite(text, key)
    assert await counts(node) == before
    assert len(await state_rows(node)) == 1


@pytest.mark.asyncio
async def test_two_joiners_racing_for_one_invite_one_wins(node: Node) -> None:
    text = node.membership.create_invite()
    keys = [SigningKey(bytes([0x20 + i]) * 32).public for i in range(4)]
    results = await asyncio.gather(
        *(node.membership.redeem_invite(text, k) for k in keys), return_exceptions=True
    )
    won = [r for r in results if isinstance(r, invites.Redeemed)]
    assert len(won) == 1
    assert all(isinstance(r, InviteError) for r in results if r not in won)
    assert sum(node.membership.member(k) is not None for k in keys) == 1


@pytest.mark.asyncio
async def test_an_expired_or_foreign_invite_is_refused_and_nothing_is_stored(
    node: Node, wall: Any
) -> None:
    late = node.membership.create_invite(lifetime_ms=HOUR)
    wall.now += HOUR
    foreign = issue(expires=wall.now + HOUR)  # another authority, another mesh
    before = await counts(node)
    with pytest.raises(InviteError, match="expired"):
        await node.membership.redeem_invite(late, JOINER)
    with pytest.raises(InviteError, match="not issued by this mesh's authority"):
        await node.membership.redeem_invite(foreign, JOINER)
    with pytest.raises(InviteError, match="not a memlane invite"):
        await node.membership.redeem_invite("hello", JOINER)
    assert await counts(node) == before
    assert await state_rows(node) == []
    assert node.membership.member(JOINER) is None


@pytest.mark.asyncio
async def test_a_revoked_key_cannot_join_again(node: Node) -> None:
    await node.membership.redeem_invite(node.membership.create_invite(), JOINER)
    await node.membership.revoke_member(JOINER.hex())
    again = node.membership.create_invite()
    with pytest.raises(MeshError, match="revoked"):
        await node.membership.redeem_invite(again, JOINER)
    assert len(await state_rows(node)) == 1  # the second invite is still unused


@pytest.mark.asyncio
async def test_an_invite_needs_the_authority_key_and_some_lifetime(
    node_dir: Path, wall: Any
) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        with pytest.raises(MeshError, match="some time"):
            node.membership.create_invite(lifetime_ms=0)
    (node_dir / AUTHORITY_KEY_FILE).unlink()
    async with Node.open(node_dir, wall=wall) as node:
        with pytest.raises(NotAuthority, match="does not hold the mesh authority key"):
            node.membership.create_invite()
        with pytest.raises(NotAuthority):
            await node.membership.redeem_invite(issue(), JOINER)
