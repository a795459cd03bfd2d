"""Sync as ``memlane serve`` runs it (docs/mesh.md §Running sync): this node's certificates,
its TLS contexts checked against the live membership, a listener and the dialled peers, and
a snapshot of the peer table kept in the store for ``memlane peers``.

- **Certificate files** in the data directory: ``ca.crt`` (the mesh's authority certificate)
  and ``node.crt`` (this node's certificate), both PEM.  The authority node certifies itself:
  it writes both when either is missing or its certificate has expired.  A member node needs
  both, issued by the authority (``MeshMembers.authority_certificate`` and
  ``node_certificate``).
- **The peer snapshot** is the ``state`` row ``sync_peers`` (JSON): whether sync runs, where
  it listens, when the snapshot was taken, and one row per peer.  It is written when sync
  starts, whenever the table changed (looked at every second, written at least every 30 s)
  and when sync stops, with every peer then closed.
- **Certificate renewal**, online, before expiry: on the authority node the service renews
  every member whose grant ends within ``RENEW_BEFORE_MS`` (30 days) for another
  ``DEFAULT_CERT_LIFETIME_MS`` (90 days) — a ``member.add`` carrying the new certificate —
  and a member's service takes a renewed certificate from its own grant once it arrives
  (through any peer), writes it to ``node.crt`` and presents it on every new connection.
  A link to a node that is no longer admitted (revoked, or its grant expired) is closed.
- **Discovery** (``node.mesh.discovery``), when asked for: the listener is advertised with
  zeroconf, and nodes of this mesh found that way are dialled like static peers — at most
  ``max_peers`` of them, taking turns with the waiting ones when they do not link
  (``node.mesh.candidates``), dropped when their service goes.  A node of another mesh, or
  this node itself, is ignored; a static peer's address is not dialled twice.
- **Writes by other processes** (``memlane write`` on the same data directory) do not move
  this process's commit counter: the store is looked at once a second as well, so they go
  out to the peers within about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from node.address import Listen, bind_for
from node.errors import NodeError
from node.identity import NODE_KEY_FILE
from node.logging import get_logger
from node.members import certs
from node.members.authority import DEFAULT_CERT_LIFETIME_MS
from node.members.errors import MeshError
from node.members.mesh import PEERS_STATE
from node.mesh.candidates import Candidates, Dialled
from node.mesh.discovery import Discovery, Sighting
from node.mesh.peers import PeerNode, PeerTable
from node.mesh.sync import Sync, SyncOptions

if TYPE_CHECKING:
    from node.node import Node

__all__ = [
    "CA_FILE",
    "NODE_CERT_FILE",
    "PEERS_STATE",
    "DiscoverySettings",
    "SyncService",
    "certificates",
    "holds_authority",
    "read_peers",
    "tls_contexts",
]

_log = get_logger("node.mesh.service")

CA_FILE = "ca.crt"
NODE_CERT_FILE = "node.crt"
LOOK_INTERVAL = 1.0  # seconds between looks at the store and at the peer table
SNAPSHOT_MAX_AGE = 30.0  # the snapshot is written at least this often while sync runs
RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000  # the authority renews grants ending sooner


def _expires_ms(certificate: x509.Certificate) -> int:
    return int(certificate.not_valid_after_utc.timestamp() * 1000)


def _expired(certificate: x509.Certificate, now_ms: int) -> bool:
    return _expires_ms(certificate) <= now_ms


def _write(path: Path, data: bytes) -> None:
    """Replace ``path`` at once: a reader sees the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def holds_authority(node: Node) -> bool:
    """Whether this is the authority node (its data directory holds the authority key)."""
    return node.membership.holds_authority()


def certificates(node: Node) -> tuple[x509.Certificate, x509.Certificate]:
    """(the authority certificate, this node's certificate) from ``ca.crt`` and ``node.crt``;
    the authority node writes them first when needed.  ``MeshError`` when they are missing,
    expired or not this node's."""
    ca_path, cert_path = node.path / CA_FILE, node.path / NODE_CERT_FILE
    now = node.wall()
    if holds_authority(node):
        current = cert_path.exists() and ca_path.exists()
        if not current or _expired(certs.load_pem(cert_path.read_bytes()), now):
            _write(ca_path, certs.pem(node.membership.authority_certificate()))
            _write(cert_path, certs.pem(node.membership.node_certificate()))
    missing = [p.name for p in (ca_path, cert_path) if not p.exists()]
    if missing:
        raise MeshError(
            f"no {' or '.join(missing)} in {node.path}: a member node syncs with the "
            f"certificate the authority issued it ({NODE_CERT_FILE}) and the authority's "
            f"({CA_FILE})"
        )
    ca, certificate = (certs.load_pem(p.read_bytes()) for p in (ca_path, cert_path))
    ca_key = ca.public_key()
    if not isinstance(ca_key, Ed25519PublicKey) or (
        certs.raw_public(ca_key) != node.membership.authority_key
    ):
        raise MeshError(f"{ca_path} is not the certificate of this mesh's authority")
    if _expired(certificate, now):
        raise MeshError(f"{cert_path} has expired: ask the authority for a new one")
    return ca, certificate


def tls_contexts(node: Node) -> tuple[ssl.SSLContext, ssl.SSLContext, x509.Certificate]:
    """(server, client) contexts presenting this node's certificate, and the certificate."""
    ca, certificate = certificates(node)
    key = certs.private_key(node.path / NODE_KEY_FILE)
    server, client = (
        certs.server_context(ca, certificate, key),
        certs.client_context(ca, certificate, key),
    )
    return server, client, certificate


# -- the peer snapshot ------------------------------------------------------------------------


def _peer_row(peer: PeerNode, *, closed: bool = False) -> dict[str, Any]:
    return {
        "node_id": peer.node_id,
        "address": peer.address,
        "direction": peer.direction,
        "state": "closed" if closed else peer.state.value,
        "connected_at": None
        if closed or peer.connected_at is None
        else int(peer.connected_at * 1000),
        "connections": peer.connections,
        "lag_in": peer.lag_in,
        "lag_out": peer.lag_out,
        "received": peer.received,
        "sent": peer.sent,
        "rounds": peer.rounds,
        "last_error": peer.last_error,
        "last_error_at": None if peer.last_error_at is None else int(peer.last_error_at * 1000),
    }


def peer_rows(table: PeerTable, *, closed: bool = False) -> list[dict[str, Any]]:
    """One row per peer node (``PeerTable.nodes``), however many records stand behind it."""
    return [_peer_row(p, closed=closed) for p in table.nodes()]


async def read_peers(node: Node) -> dict[str, Any]:
    """The snapshot ``memlane serve`` left (an empty one when sync never ran here)."""
    raw = await node.membership.saved_peers()
    if raw is None:
        return {"serving": False, "at": None, "listen": None, "peers": []}
    found: dict[str, Any] = json.loads(raw)
    return found


# -- the service -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiscoverySettings:
    interfaces: tuple[str, ...] = ()  # () : every interface
    max_peers: int = 16
    max_waiting: int = 64
    evict_after: float = 10.0  # seconds a dialled node may go unlinked while others wait


@dataclass(frozen=True, slots=True)
class _Snapshot:
    serving: bool
    listen: str | None
    peers: list[dict[str, Any]]


class SyncService:
    """A node's sync over mutual TLS: ``start`` listens and dials, ``close`` says bye on
    every link and leaves the final snapshot."""

    def __init__(self, node: Node, *, options: SyncOptions | None = None) -> None:
        self.node = node
        self.sync = Sync(
            node.replica(), key=node.key.public, options=options, peer_key=self._peer_key
        )
        self.address: tuple[str, int] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._written: _Snapshot | None = None
        self._written_at = 0.0
        self._running = False
        self._server: ssl.SSLContext | None = None
        self._client: ssl.SSLContext | None = None
        self._cert_expires = 0
        self._authority = False
        self._static: set[str] = set()
        self.discovery: Discovery | None = None
        self.candidates: Candidates | None = None
        self._rotation: asyncio.Task[None] | None = None

    def _peer_key(self, ssl_object: ssl.SSLObject | None) -> bytes:
        return certs.verified_peer(ssl_object, self.node.membership.admits)

    @property
    def listening(self) -> str | None:
        if self.address is None:
            return None
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def start(
        self,
        listen: Listen | socket.socket | None,
        peers: Sequence[Listen],
        discovery: DiscoverySettings | None = None,
    ) -> None:
        """Listen on ``listen`` (an address, or a socket bound and listening), then dial
        ``peers`` and, with ``discovery``, advertise and find the mesh's nodes."""
        self._server, self._client, certificate = tls_contexts(self.node)
        self._cert_expires = _expires_ms(certificate)
        self._authority = holds_authority(self.node)
        self._running = True
        await self.sync.start()
        if listen is not None:
            sock = listen if isinstance(listen, socket.socket) else bind_for(listen, "sync")
            self.address = await self.sync.listen(ssl=self._server, sock=sock)
        for peer in peers:
            self._static.add(f"{peer.host}:{peer.port}")
            self.sync.dial(peer.host, peer.port, ssl=self._client)
        if discovery is not None:
            await self._discover(discovery)
        await self._save(self._snapshot())
        self._watch = asyncio.create_task(self._look(), name="memlane-sync-snapshot")

    async def _discover(self, settings: DiscoverySettings) -> None:
        self.candidates = Candidates(
            max_peers=settings.max_peers,
            max_waiting=settings.max_waiting,
            evict_after=settings.evict_after,
            hang_up=self.sync.hang_up,
            dial=lambda seen: self.sync.dial(seen.host, seen.port, ssl=self._client),
            linked=lambda peer: peer.key is not None and self.sync.peers.linked(peer.key),
        )
        self.discovery = Discovery(
            mesh=self.node.info.mesh,
            key=self.node.key.public,
            interfaces=settings.interfaces,
            found=self.sighted,
            lost=self.vanished,
        )
        host, port = self.address if self.address is not None else (None, None)
        await self.discovery.start(host, port)
        self._rotation = asyncio.create_task(
            self._rotate(self.candidates), name="memlane-discovery-rotation"
        )

    @property
    def discovered(self) -> dict[str, Dialled]:
        """The discovered nodes dialled now, by service name."""
        return {} if self.candidates is None else dict(self.candidates.dialled)

    def sighted(self, seen: Sighting) -> None:
        """Discovery resolved a service: dial it, or let it wait for a place, if it is another
        node of this mesh and not a static peer."""
        address = f"{seen.host}:{seen.port}"
        if seen.key == self.node.key.public or address in self._static:
            return
        if seen.mesh != self.node.info.mesh:
            _log.info("ignoring a node of another mesh", name=seen.name, address=address)
            return
        if self.candidates is not None:
            self.candidates.sighted(seen)

    def vanished(self, name: str) -> None:
        """A discovered service went: stop dialling it (an open link runs to its end)."""
        if self.candidates is not None:
            self.candidates.vanished(name)

    @staticmethod
    async def _rotate(candidates: Candidates) -> None:
        """Give the places of dialled nodes that do not link to waiting ones, a few times
        within ``evict_after``."""
        while True:
            await asyncio.sleep(candidates.evict_after / 4)
            candidates.rotate()

    async def close(self) -> None:
        """Say bye on every link and save the final snapshot (once; nothing if never
        started)."""
        if not self._running:
            return
        self._running = False
        if self.discovery is not None:
            await self.discovery.close()
        if self._rotation is not None:
            self._rotation.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rotation
            self._rotation = None
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        final = _Snapshot(False, self.listening, peer_rows(self.sync.peers, closed=True))
        await self.sync.close()
        await self._save(final)

    def _snapshot(self) -> _Snapshot:
        return _Snapshot(True, self.listening, peer_rows(self.sync.peers))

    async def _look(self) -> None:
        while True:
            await asyncio.sleep(LOOK_INTERVAL)
            self.sync.commits.recheck()  # entries another process wrote here
            try:
                await self.node.refresh()  # … and membership changed by one
                self._close_unadmitted()
                await self._keep_certified()
            except NodeError as exc:  # e.g. a failed renewal: again at the next look
                _log.warning("keeping the mesh's certificates failed", error=str(exc))
            snapshot = self._snapshot()
            stale = time.monotonic() - self._written_at >= SNAPSHOT_MAX_AGE
            if snapshot != self._written or stale:
                try:
                    await self._save(snapshot)
                except NodeError as exc:  # a failed write: try again at the next look
                    _log.warning("saving the peer snapshot failed", error=str(exc))

    def _close_unadmitted(self) -> None:
        members, now = self.node.membership, self.node.wall()
        for peer in self.sync.peers:
            key, close = peer.key, peer.close
            if key is not None and close is not None and not members.admits(key, now):
                close("no longer an admitted member of this mesh")

    async def _keep_certified(self) -> None:
        """The authority renews the grants about to end; a member takes the certificate of
        its own renewed grant."""
        if self._authority:
            await self.node.membership.renew_due(
                before_ms=RENEW_BEFORE_MS, lifetime_ms=DEFAULT_CERT_LIFETIME_MS
            )
            return
        grant = self.node.membership.member(self.node.key.public)
        if grant is None or grant.certificate is None or self._server is None:
            return
        if grant.cert_expires // 1000 <= self._cert_expires // 1000:  # X.509 counts seconds
            return
        pem = grant.certificate.encode()
        certificate = certs.load_pem(pem)
        key = certs.private_key(self.node.path / NODE_KEY_FILE)
        for context in (self._server, self._client):  # new connections present it
            assert context is not None
            certs.load_chain(context, certificate, key)
        _write(self.node.path / NODE_CERT_FILE, pem)
        self._cert_expires = _expires_ms(certificate)
        _log.info("took a renewed certificate", expires=certificate.not_valid_after_utc.isoformat())

    async def _save(self, snapshot: _Snapshot) -> None:
        at = self.node.wall()
        data = json.dumps(
            {
                "serving": snapshot.serving,
                "at": at,
                "listen": snapshot.listen,
                "peers": snapshot.peers,
            },
            sort_keys=True,
        ).encode()
        await self.node.membership.save_peers(data)
        self._written, self._written_at = snapshot, time.monotonic()
