"""Certificates and TLS contexts of the mesh (docs/mesh.md §Certificates, §TLS between nodes).

- The **authority certificate** is the mesh's CA: self-signed by the authority key, its subject
  names the mesh.  It is a function of (authority key, mesh), so re-issuing it gives the same
  bytes (Ed25519 signatures are deterministic).
- A **node certificate** binds a node key to the mesh: signed by the authority, subject
  ``O=memlane, OU=<mesh hex>, CN=<node id>``, valid until the ``cert_expires`` of the node's
  ``member.add``.  Its key *is* the node's Ed25519 key, so the TLS peer is the log's writer.
- **TLS contexts**: TLS 1.3 only, mutual authentication, chains to the authority certificate
  alone, no host names (a peer is known by its key), no session tickets (every connection
  shows its certificate).  Right after the handshake, before any application byte is read or
  written, ``verified_peer`` checks that the peer's key is an admitted, unrevoked node key of
  this mesh.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from node.identity import load_key, node_id, random_bytes
from node.members.errors import MeshError, PeerRefused

__all__ = [
    "authority_certificate",
    "client_context",
    "der",
    "issued_by",
    "join_client_context",
    "join_server_context",
    "load_pem",
    "node_certificate",
    "peer_key",
    "pem",
    "private_key",
    "raw_public",
    "server_context",
    "verified_peer",
]

_ORGANISATION = "memlane"
# RFC 5280 §4.1.2.5: 99991231235959Z means "no well-defined expiration date".
_NO_EXPIRY = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC)
_CA_NOT_BEFORE = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
# A node certificate is valid from a little before it is issued, so that a peer whose clock
# is somewhat behind accepts it at once.
NOT_BEFORE_SLACK_MS = 5 * 60 * 1000


def private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in a node's key file (``node.key``, ``authority.key``)."""
    load_key(path)  # refuses a missing, malformed or world-readable file
    return Ed25519PrivateKey.from_private_bytes(path.read_bytes())


def raw_public(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of a key's public half (a node key, a writer)."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _serial(*parts: bytes) -> int:
    # Positive and at most 20 octets (RFC 5280 §4.1.2.2), fixed by what the certificate says.
    return int.from_bytes(hashlib.sha256(b"".join(parts)).digest()[:16], "big") >> 1 or 1


def _at(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).replace(microsecond=0)


def _authority_name(mesh: bytes) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, _ORGANISATION),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, mesh.hex()),
            x509.NameAttribute(NameOID.COMMON_NAME, "mesh authority"),
        ]
    )


def authority_certificate(authority: Ed25519PrivateKey, mesh: bytes) -> x509.Certificate:
    """The mesh's CA certificate, self-signed by the authority key."""
    name, public = _authority_name(mesh), authority.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(_serial(b"memlane authority", mesh, raw_public(public)))
        .not_valid_before(_CA_NOT_BEFORE)
        .not_valid_after(_NO_EXPIRY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(authority, None)
    )


def node_certificate(
    authority: Ed25519PrivateKey, mesh: bytes, node_key: bytes, *, issued: int, expires: int
) -> x509.Certificate:
    """A certificate for ``node_key`` (32 raw bytes), valid from ``issued`` (less a little
    slack) until ``expires`` (ms since the Unix epoch)."""
    try:
        public = Ed25519PublicKey.from_public_bytes(node_key)
    except ValueError as exc:
        raise MeshError("a node key is a 32-byte Ed25519 public key") from exc
    not_before = issued - NOT_BEFORE_SLACK_MS
    if expires <= not_before:
        raise MeshError("a certificate must expire after it is issued")
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, _ORGANISATION),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, mesh.hex()),
            x509.NameAttribute(NameOID.COMMON_NAME, node_id(node_key)),
        ]
    )
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(_authority_name(mesh))
        .public_key(public)
        .serial_number(_serial(b"memlane node", mesh, node_key, expires.to_bytes(8, "big")))
        .not_valid_before(_at(not_before))
        .not_valid_after(_at(expires))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.public_key()),
            critical=False,
        )
        .sign(authority, None)
    )


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def der(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.DER)


def load_pem(data: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise MeshError(f"not a PEM certificate: {exc}") from exc


# -- TLS -------------------------------------------------------------------------------------


def server_context(
    ca: x509.Certificate, certificate: x509.Certificate, key: Ed25519PrivateKey
) -> ssl.SSLContext:
    """The accepting side: presents ``certificate``, requires a client certificate."""
    ctx = _context(ssl.PROTOCOL_TLS_SERVER, ca, certificate, key)
    ctx.num_tickets = 0
    return ctx


def client_context(
    ca: x509.Certificate, certificate: x509.Certificate, key: Ed25519PrivateKey
) -> ssl.SSLContext:
    """The connecting side: presents ``certificate``, requires the server's."""
    return _context(ssl.PROTOCOL_TLS_CLIENT, ca, certificate, key)


def _context(
    protocol: int, ca: x509.Certificate, certificate: x509.Certificate, key: Ed25519PrivateKey
) -> ssl.SSLContext:
    public = certificate.public_key()
    if not isinstance(public, Ed25519PublicKey) or raw_public(public) != raw_public(key):
        raise MeshError("the certificate is not for this key")
    ctx = ssl.SSLContext(protocol)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False  # a peer is known by its key (``verified_peer``), not a name
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.load_verify_locations(cadata=pem(ca).decode())
    load_chain(ctx, certificate, key)
    return ctx


def load_chain(ctx: ssl.SSLContext, certificate: x509.Certificate, key: Ed25519PrivateKey) -> None:
    """``ssl`` reads a key only from a file: it is written encrypted under a one-time
    password, into a private directory removed at once."""
    password = random_bytes(32).hex().encode()
    sealed = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    with tempfile.TemporaryDirectory(prefix="memlane-tls-") as tmp:
        path = Path(tmp) / "chain.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem(certificate) + sealed)
        ctx.load_cert_chain(path, password=password)


def join_server_context(certificate: x509.Certificate, key: Ed25519PrivateKey) -> ssl.SSLContext:
    """The authority's side of a join (docs/mesh.md §Joining): presents ``certificate``, asks
    for none (the joiner has none yet), TLS 1.3 only, no session tickets."""
    public = certificate.public_key()
    if not isinstance(public, Ed25519PublicKey) or raw_public(public) != raw_public(key):
        raise MeshError("the certificate is not for this key")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.verify_mode = ssl.CERT_NONE
    ctx.num_tickets = 0
    load_chain(ctx, certificate, key)
    return ctx


def join_client_context() -> ssl.SSLContext:
    """The joiner's side: TLS 1.3 only.  The joiner holds no CA certificate yet, so ``ssl``
    checks only that the server holds the key of the certificate it presents (TLS 1.3
    CertificateVerify); ``issued_by`` then checks that certificate against the invite's
    authority key, before any application byte is sent."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # checked by ``issued_by`` against the invite's key
    return ctx


def issued_by(der: bytes | None, authority: bytes, mesh: bytes, now_ms: int) -> bytes:
    """The node key of a certificate (DER) that the key ``authority`` (32 raw bytes) issued
    for ``mesh``, valid at ``now_ms``, for an Ed25519 key; else ``PeerRefused``."""
    why = "its certificate was not issued by the invite's authority key"
    if not der:
        raise PeerRefused("the server presented no certificate")
    try:
        certificate = x509.load_der_x509_certificate(der)
        Ed25519PublicKey.from_public_bytes(authority).verify(
            certificate.signature, certificate.tbs_certificate_bytes
        )
    except (ValueError, InvalidSignature) as exc:
        raise PeerRefused(why) from exc
    if certificate.issuer != _authority_name(mesh):
        raise PeerRefused(why + " for this mesh")
    start = certificate.not_valid_before_utc.timestamp() * 1000
    if not start <= now_ms < certificate.not_valid_after_utc.timestamp() * 1000:
        raise PeerRefused("its certificate is not valid now")
    public = certificate.public_key()
    if not isinstance(public, Ed25519PublicKey):
        raise PeerRefused("its certificate is not for an Ed25519 key")
    return raw_public(public)


def peer_key(ssl_object: ssl.SSLObject | ssl.SSLSocket) -> bytes:
    """The Ed25519 key (32 raw bytes) of the peer's verified certificate."""
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        raise PeerRefused("the peer presented no certificate")
    public = x509.load_der_x509_certificate(der).public_key()
    if not isinstance(public, Ed25519PublicKey):
        raise PeerRefused("the peer's certificate is not for an Ed25519 key")
    return raw_public(public)


def verified_peer(
    ssl_object: ssl.SSLObject | ssl.SSLSocket | None, admits: Callable[[bytes], bool]
) -> bytes:
    """The peer's node key once ``admits`` it (an admitted, unrevoked node key of this mesh,
    ``Membership.admits_peer``); else ``PeerRefused``.  Call it right after the handshake,
    on both sides, before the first application byte."""
    if ssl_object is None:
        raise PeerRefused("the connection is not TLS")
    key = peer_key(ssl_object)
    if not admits(key):
        raise PeerRefused(f"node {node_id(key)} is not an admitted member of this mesh")
    return key
