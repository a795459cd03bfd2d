"""Sync over the network: a listener, dialled peers kept connected, one ``Link`` per
connection (docs/mesh.md §Sync in practice, docs/protocol.md).

``Sync`` takes the store as a ``Replica`` of one mesh (``Node.replica``) and this node's key.
``listen`` accepts connections and ``dial`` keeps one peer connected, reconnecting with
exponential backoff (with jitter) after a failure; each connection resumes from both sides'
committed frontiers, and the store's idempotent receive means nothing is applied twice.
Either may run over TLS: pass the ``ssl.SSLContext`` to ``listen``/``dial`` and a ``peer_key``
function that returns the verified key of the peer's certificate (or raises a ``NodeError``) —
the link then refuses a hello that names another key.  ``attach`` runs a link over streams
connected some other way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from node.errors import NodeError
from node.logging import get_logger
from node.mesh.errors import LinkError, StoreFailed
from node.mesh.host import LinkHost, LinkOptions
from node.mesh.link import Link
from node.mesh.peers import Peer, PeerTable, TooManyConnections
from node.ports import Handler, Handshakes, TlsGate
from node.refusals import REFUSALS
from node.replica import OFFERED, Commits, Replica
from protocol.messages import Error, ErrorCode
from protocol.session import Session

__all__ = ["PeerKey", "Sync", "SyncOptions"]

_log = get_logger("node.mesh.sync")

Opener = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
"""Opens one connection to a dialled peer (``asyncio.open_connection`` with its address)."""

PeerKey = Callable[[ssl.SSLObject | None], bytes]
"""The verified node key of a connection's TLS peer (``certs.verified_peer``), or raises."""


@dataclass(frozen=True, slots=True)
class SyncOptions:
    """Node-wide sync settings (seconds); the defaults are the documented ones."""

    link: LinkOptions = field(default_factory=LinkOptions)
    max_connections: int = 32
    # Connections one node key may hold at once, counted from its TLS certificate before
    # hello, so one member cannot take every slot (docs/mesh.md §Memory and limits).
    max_connections_per_key: int = 4
    # Connections not yet past their TLS handshake, counted from accept (docs/operations.md
    # §Ports): so plain TCP connections cannot take the process's file descriptors.
    handshakes: Handshakes = field(default_factory=Handshakes)
    poll_interval: float = 0.02  # how often the store's commit counter is looked at
    connect_timeout: float = 10.0
    backoff_initial: float = 0.25
    backoff_max: float = 30.0
    # A link whose peer stopped answering — its machine gone, the network between cut — is
    # closed after this long (TCP keepalive probes while it is idle, TCP_USER_TIMEOUT while
    # what it sent is unacknowledged): ``memlane peers`` then says so, and a peer that comes
    # back is not turned away by a link that only looks open (docs/mesh.md §Sync in practice).
    dead_peer_after: float = 30.0
    # What this node's hello offers beyond the protocol's own features: the kinds it applies
    # that an older node only stores and relays (docs/erasure.md).
    features: tuple[str, ...] = OFFERED


class Sync:
    """This node's side of the mesh: its listener, its dialled peers, its links."""

    def __init__(
        self,
        replica: Replica,
        *,
        key: bytes,
        options: SyncOptions | None = None,
        admits: Callable[[bytes], bool] | None = None,
        peer_key: PeerKey | None = None,
    ) -> None:
        self.options = options or SyncOptions()
        self.mesh = replica.mesh
        self.key = key
        self.replica = replica
        self.commits = Commits(self.replica, interval=self.options.poll_interval)
        self.peers = PeerTable(key, max_connections=self.options.max_connections)
        self.host = LinkHost(self.replica, self.commits, self.peers, self.options.link, admits)
        self.peer_key = peer_key
        self._servers: list[asyncio.Server] = []
        self._dialers: set[asyncio.Task[None]] = set()
        self._hung_up: dict[Peer, asyncio.Event] = {}
        self._connections: set[asyncio.Task[Any]] = set()
        self._links: set[Link] = set()
        self._per_key: dict[bytes, int] = {}
        self._random = random.Random()  # noqa: S311 — jitter, not secrets
        self._started = False
        self._closing = False

    async def __aenter__(self) -> Sync:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        self._closing = False
        if not self._started:
            await self.commits.start()
            self._started = True

    async def close(self) -> None:
        """Stop listening and dialling, say bye on every link and wait for them to end."""
        self._closing = True
        for server in self._servers:
            server.close()
        for link in list(self._links):
            link.stop()
        pending = [*self._dialers, *self._connections]
        if pending:  # each link ends after the peer's bye, each dialler after its link
            await asyncio.wait(pending, timeout=self.options.link.close_timeout * 2)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        await self.commits.stop()
        self._started = False

    # -- connections -------------------------------------------------------------------------

    async def listen(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ssl: ssl.SSLContext | None = None,
        sock: socket.socket | None = None,
    ) -> tuple[str, int]:
        """Accept sync connections on ``host``:``port`` (0: any free port), or on ``sock``
        when one is given (bound and listening); the address.  Over TLS each connection is
        counted from its accept and its handshake bounded (``SyncOptions.handshakes``)."""
        await self.start()
        accepted: Handler = self._accepted
        if ssl is not None:
            accepted = TlsGate(ssl, self.options.handshakes, self._accepted, port="sync")
        if sock is not None:
            server = await asyncio.start_server(accepted, sock=sock)
        else:
            server = await asyncio.start_server(accepted, host, port)
        self._servers.append(server)
        name = server.sockets[0].getsockname()
        return str(name[0]), int(name[1])

    def dial(
        self,
        host: str,
        port: int,
        *,
        ssl: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> Peer:
        """Keep a connection to ``host``:``port``, reconnecting after every failure."""
        peer = self.peers.dialled(f"{host}:{port}")
        self._hung_up[peer] = asyncio.Event()
        opener = functools.partial(
            asyncio.open_connection, host, port, ssl=ssl, server_hostname=server_hostname
        )
        task = asyncio.create_task(
            self._dial(peer, opener), name=f"memlane-sync-dial-{host}:{port}"
        )
        self._dialers.add(task)
        task.add_done_callback(self._dialers.discard)
        return peer

    def hang_up(self, peer: Peer) -> None:
        """Stop redialling a dialled peer: its open link, if any, runs to its end, and then
        the peer leaves the table."""
        stop = self._hung_up.get(peer)
        if stop is not None:
            stop.set()

    async def attach(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        peer: Peer | None = None,
    ) -> LinkError | None:
        """Sync over an already connected stream pair until it closes; the error it ended
        with, if any.  ``peer`` is the record of a dialled peer (None: accepted here)."""
        await self.start()
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            return await self._run(reader, writer, peer)
        finally:
            if task is not None:
                self._connections.discard(task)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.attach(reader, writer)

    async def _run(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Peer | None
    ) -> LinkError | None:
        address = _address(writer)
        _close_when_silent(writer, self.options.dead_peer_after)
        key = self._certified_key(writer)
        cap = self.options.max_connections_per_key
        if key is not None and self._per_key.get(key, 0) >= cap:
            _log.info("sync connection refused", address=address, reason="per-key limit")
            REFUSALS.count("sync_per_key")
            await self._refuse(writer, f"already {cap} connections open from this node")
            return None
        try:
            peer = self.peers.open(peer, address)
        except TooManyConnections as exc:
            REFUSALS.count("sync_connections")
            await self._refuse(writer, str(exc))
            return None
        if key is not None:
            self._per_key[key] = self._per_key.get(key, 0) + 1
        try:
            error = await self._link(reader, writer, peer)
        finally:
            if key is not None:
                self._release(key)
            if not peer.outbound and (peer.key is None or self.peers.get(peer.key) is not peer):
                self.peers.forget(peer)  # unnamed, or refused: the table keeps nothing of it
        return error  # the link logged its closing

    def _certified_key(self, writer: asyncio.StreamWriter) -> bytes | None:
        """The node key of the connection's certificate, if it is an admitted one (a refused
        certificate is refused again, and recorded, by ``_link``)."""
        if self.peer_key is None:
            return None
        try:
            return self.peer_key(writer.get_extra_info("ssl_object"))
        except NodeError:
            return None

    def _release(self, key: bytes) -> None:
        held = self._per_key.pop(key, 0) - 1
        if held > 0:
            self._per_key[key] = held

    async def _link(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Peer
    ) -> LinkError | None:
        expected = None
        if self.peer_key is not None:
            try:
                expected = self.peer_key(writer.get_extra_info("ssl_object"))
            except NodeError as exc:  # refused before any byte of the protocol
                self.peers.closed(peer, str(exc))
                await self._refuse(writer, None)
                return None
        session = Session(mesh=self.mesh, node=self.key, features=self.options.features)
        link = Link(
            reader, writer, host=self.host, peer=peer, session=session, expected_key=expected
        )
        self._links.add(link)
        try:
            return await link.run()
        finally:
            self._links.discard(link)

    async def _refuse(self, writer: asyncio.StreamWriter, text: str | None) -> None:
        """Close a connection this node will not serve; tell the peer why when it may know."""
        if text is not None:
            refusal = Session(mesh=self.mesh, node=self.key).send(Error(ErrorCode.REFUSED, text))
            writer.write(refusal)
        writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(self.options.link.close_timeout):
                await writer.wait_closed()

    async def _dial(self, peer: Peer, opener: Opener) -> None:
        opts = self.options
        delay = opts.backoff_initial
        stop = self._hung_up[peer]
        try:
            while not (self._closing or stop.is_set()):
                rounds, error = peer.rounds, None
                if peer.key is None or not self.peers.linked(peer.key, besides=peer):
                    error = await self._connect(peer, opener)
                # else: the peer dialled here and that link is up; no second one
                if peer.rounds > rounds and not isinstance(error, StoreFailed):
                    delay = opts.backoff_initial  # it synced: the next failure starts afresh
                if self._closing:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay * (0.5 + self._random.random())):
                        await stop.wait()
                delay = min(delay * 2, opts.backoff_max)
        finally:
            self._hung_up.pop(peer, None)
            self.peers.forget(peer)

    async def _connect(self, peer: Peer, opener: Opener) -> LinkError | None:
        try:
            async with asyncio.timeout(self.options.connect_timeout):
                reader, writer = await opener()
        except (OSError, TimeoutError) as exc:
            self.peers.closed(peer, f"cannot connect to {peer.address}: {_why_not(exc)}")
            return None
        return await self.attach(reader, writer, peer=peer)


def _why_not(exc: OSError) -> str:
    """Why a dial failed, in words: the system's text for its errno (asyncio's own message
    holds the address as a Python tuple), a TLS failure's reason, or a timeout."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, ssl.SSLError):
        said = getattr(exc, "verify_message", None) or exc.reason or exc.strerror
        return f"TLS: {said or type(exc).__name__}"
    if exc.errno is not None:
        return os.strerror(exc.errno)
    return str(exc) or type(exc).__name__


def _close_when_silent(writer: asyncio.StreamWriter, after: float) -> None:
    """Have the kernel end the connection once its peer has answered nothing for ``after``
    seconds: keepalive probes from a third of it, three of them a sixth apart; and at most
    ``after`` for what was sent to be acknowledged."""
    sock = writer.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    timers = {
        "TCP_KEEPIDLE": max(1, round(after / 3)),
        "TCP_KEEPINTVL": max(1, round(after / 6)),
        "TCP_KEEPCNT": 3,
        "TCP_USER_TIMEOUT": round(after * 1000),
    }
    for name, value in timers.items():
        option = getattr(socket, name, None)  # Linux has them all; others, some
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def _address(writer: asyncio.StreamWriter) -> str:
    name = writer.get_extra_info("peername")
    if isinstance(name, tuple) and len(name) >= 2:
        return f"{name[0]}:{name[1]}"
    return str(name)
