"""Certificates and TLS between nodes (docs/mesh.md §Certificates, §TLS between nodes).

Real TLS 1.3 over loopback sockets (asyncio streams), with Ed25519 certificates: a pair of
admitted nodes connects and talks; a certificate from another authority, an expired one, a
revoked node and plain TCP are refused before any application byte moves.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from node.identity import NODE_KEY_FILE, node_id
from node.members import certs
from node.members.errors import MeshError, PeerRefused, UnknownMember
from node.node import Node, system_wall
from tests.node.helpers import FAR_FUTURE_MS

HOUR = 3_600_000
MESH = b"\x5a" * 16


def key_of(seed: int) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)


@dataclass
class Mesh:
    """An authority and its nodes' keys, certificates from it, and who is admitted."""

    authority: Ed25519PrivateKey
    mesh: bytes = MESH
    admitted: set[bytes] = field(default_factory=set)

    @property
    def ca(self) -> x509.Certificate:
        return certs.authority_certificate(self.authority, self.mesh)

    def cert(self, key: Ed25519PrivateKey, *, issued: int = 0, expires: int = 0) -> Any:
        now = system_wall()
        node = certs.raw_public(key)
        issued, expires = issued or now, expires or now + HOUR
        return certs.node_certificate(
            self.authority, self.mesh, node, issued=issued, expires=expires
        )

    def admits(self, key: bytes) -> bool:
        return key in self.admitted

    def server(self, key: Ed25519PrivateKey, **cert: int) -> ssl.SSLContext:
        return certs.server_context(self.ca, self.cert(key, **cert), key)

    def client(self, key: Ed25519PrivateKey, **cert: int) -> ssl.SSLContext:
        return certs.client_context(self.ca, self.cert(key, **cert), key)


ALICE, BOB, CAROL = key_of(0x0A), key_of(0x0B), key_of(0x0C)


@pytest.fixture
def ours() -> Mesh:
    return Mesh(key_of(0xA1), admitted={certs.raw_public(k) for k in (ALICE, BOB)})


@dataclass
class Server:
    """A TLS listener that checks its peer before anything else, as a node does."""

    port: int
    seen: list[tuple[str, Any]]


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    servers: list[asyncio.Server] = []

    async def start(ctx: ssl.SSLContext, admits: Callable[[bytes], bool]) -> Server:
        seen: list[tuple[str, Any]] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                key = certs.verified_peer(writer.get_extra_info("ssl_object"), admits)
            except PeerRefused as exc:
                seen.append(("refused", str(exc)))
                writer.close()
                return
            seen.append(("peer", key))
            seen.append(("read", await reader.readexactly(5)))
            writer.write(b"hello back")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
        servers.append(server)
        return Server(server.sockets[0].getsockname()[1], seen)

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def exchange(port: int, ctx: ssl.SSLContext | None) -> bytes:
    """Connect, say hello, return what comes back (b"" when the server hangs up)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        writer.write(b"hello")
        await writer.drain()
        return await asyncio.wait_for(reader.read(100), 10)
    finally:
        writer.close()


async def refused(port: int, ctx: ssl.SSLContext | None) -> None:
    """The connection fails, or the server hangs up without a word."""
    try:
        answer = await exchange(port, ctx)
    except (ssl.SSLError, ConnectionError):
        return
    assert answer == b""


# -- the certificates ----------------------------------------------------------------------------


def test_the_authority_certificate_is_a_self_signed_ca_of_its_mesh(ours: Mesh) -> None:
    ca = ours.ca
    # The same key and mesh give the same certificate.
    assert ca.public_bytes(Encoding.DER) == ours.ca.public_bytes(Encoding.DER)
    ca.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value == (
        MESH.hex()
    )
    assert certs.raw_public(ca.public_key()) == certs.raw_public(ours.authority)


def test_a_node_certificate_names_its_mesh_and_node_and_expires_with_its_grant(
    ours: Mesh,
) -> None:
    expires = system_wall() + 7 * 24 * HOUR
    cert = ours.cert(ALICE, expires=expires)
    cert.verify_directly_issued_by(ours.ca)
    alice = certs.raw_public(ALICE)
    assert certs.raw_public(cert.public_key()) == alice
    subject = {a.oid: a.value for a in cert.subject}
    assert subject[NameOID.COMMON_NAME] == node_id(alice)
    assert subject[NameOID.ORGANIZATIONAL_UNIT_NAME] == MESH.hex()
    assert cert.not_valid_after_utc == datetime.datetime.fromtimestamp(
        expires // 1000, tz=datetime.UTC
    )
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}


def test_a_certificate_must_match_the_key_it_is_used_with(ours: Mesh) -> None:
    with pytest.raises(MeshError, match="not for this key"):
        certs.server_context(ours.ca, ours.cert(ALICE), BOB)
    with pytest.raises(MeshError, match="expire after"):
        ours.cert(ALICE, issued=system_wall(), expires=system_wall() - HOUR)


# -- TLS over loopback ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_admitted_nodes_connect_and_know_each_other(ours: Mesh, serve: Any) -> None:
    server = await serve(ours.server(ALICE), ours.admits)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ours.client(BOB))
    tls = writer.get_extra_info("ssl_object")
    assert tls.version() == "TLSv1.3"
    assert certs.verified_peer(tls, ours.admits) == certs.raw_public(ALICE)
    writer.write(b"hello")
    assert await asyncio.wait_for(reader.read(100), 10) == b"hello back"
    writer.close()
    assert server.seen == [("peer", certs.raw_public(BOB)), ("read", b"hello")]


@pytest.mark.asyncio
@pytest.mark.parametrize("case", ["another authority", "expired", "another mesh"])
async def test_a_client_certificate_that_does_not_chain_is_refused_in_the_handshake(
    ours: Mesh, serve: Any, case: str
) -> None:
    server = await serve(ours.server(ALICE), ours.admits)
    now = system_wall()
    if case == "another authority":
        ctx = Mesh(key_of(0xB2), admitted=ours.admitted).client(BOB)
    elif case == "expired":
        ctx = ours.client(BOB, issued=now - 48 * HOUR, expires=now - 24 * HOUR)
    else:  # the same authority key for another mesh is another CA
        ctx = Mesh(ours.authority, mesh=b"\x5b" * 16).client(BOB)
    await refused(server.port, ctx)
    assert server.seen == []  # the handler never ran: no byte reached the application


@pytest.mark.asyncio
async def test_a_server_from_another_authority_is_refused_by_the_client(
    ours: Mesh, serve: Any
) -> None:
    other = Mesh(key_of(0xB2), admitted=ours.admitted)
    server = await serve(other.server(ALICE), other.admits)
    with pytest.raises(ssl.SSLCertVerificationError):
        await exchange(server.port, ours.client(BOB))
    assert server.seen == []


@pytest.mark.asyncio
async def test_a_revoked_node_is_refused_before_any_byte_moves(ours: Mesh, serve: Any) -> None:
    """Its certificate still chains and has not expired: the key check refuses it."""
    ours.admitted.discard(certs.raw_public(BOB))
    server = await serve(ours.server(ALICE), ours.admits)
    await refused(server.port, ours.client(BOB))
    (why,) = server.seen
    assert why == (
        "refused",
        f"node {node_id(certs.raw_public(BOB))} is not an admitted member of this mesh",
    )

    # And a client refuses a server whose key is not admitted, the same way.
    carol = await serve(ours.server(CAROL), ours.admits)
    _, writer = await asyncio.open_connection("127.0.0.1", carol.port, ssl=ours.client(ALICE))
    with pytest.raises(PeerRefused):
        certs.verified_peer(writer.get_extra_info("ssl_object"), ours.admits)
    writer.close()


@pytest.mark.asyncio
async def test_plain_tcp_is_refused(ours: Mesh, serve: Any) -> None:
    server = await serve(ours.server(ALICE), ours.admits)
    try:
        answer = await exchange(server.port, None)
    except ConnectionError:
        answer = b""
    assert b"hello back" not in answer  # at most a TLS alert
    assert server.seen == []
    with pytest.raises(PeerRefused, match="not TLS"):
        certs.verified_peer(None, ours.admits)


# -- through the node ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_authority_node_certifies_admitted_members_only(node: Node) -> None:
    own = certs.private_key(node.path / NODE_KEY_FILE)
    ca = node.membership.authority_certificate()
    mine = node.membership.node_certificate()
    mine.verify_directly_issued_by(ca)
    assert certs.raw_public(mine.public_key()) == node.info.public_key
    certs.server_context(ca, mine, own)  # the pair a node serves with

    member = key_of(0x0D)
    key = certs.raw_public(member)
    await node.membership.admit_member(key, workspaces=["team"], cert_expires=FAR_FUTURE_MS - 1)
    theirs = node.membership.node_certificate(key)
    assert theirs.not_valid_after_utc.year == 9999
    now = node.wall()
    assert node.membership.admits(key, now)
    await node.membership.revoke_member(key.hex())
    assert not node.membership.admits(key, now)
    with pytest.raises(UnknownMember):
        node.membership.node_certificate(key)
    with pytest.raises(UnknownMember):
        node.membership.node_certificate(b"\x0e" * 32)


@pytest.mark.asyncio
async def test_a_grant_past_its_certificate_expiry_admits_no_peer(node: Node) -> None:
    key = certs.raw_public(key_of(0x0D))
    now = node.wall()
    await node.membership.admit_member(key, cert_expires=now + HOUR)
    assert node.membership.admits(key, now)
    assert not node.membership.admits(key, now + HOUR)
    assert not node.membership.admits(b"\x0e" * 32, now)  # never admitted
