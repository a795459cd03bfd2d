"""The peer table: every connection's state, its progress, its last error (docs/mesh.md §The
peer table).

A ``Peer`` is one connection record: for a dialled peer, the address it keeps reconnecting to
(one record across reconnects); for a peer that connected here, one record per connection,
merged into the record of its node key once its hello is in.  The table caps the number of
open connections and keeps at most one link per node key: when two nodes dial each other at
once, both keep the connection dialled by the smaller node key, so they agree without another
message.

So one node may stand behind several records — the address this node dials and the
connections it made here — and ``nodes()`` folds them into one ``PeerNode`` per node key: what
``memlane peers``, ``/metrics`` and ``/healthz`` show.  A connection that ends while another
link to the same node is up (the one of two not kept, or one replaced) is not that node's
error, so it leaves ``last_error`` alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from node.identity import node_id
from node.members.errors import MeshError

__all__ = ["DuplicateLink", "Peer", "PeerNode", "PeerState", "PeerTable", "TooManyConnections"]


class TooManyConnections(MeshError):
    """The table is full: the connection is refused (``REFUSED``, docs/protocol.md §9)."""


class DuplicateLink(MeshError):
    """A link to this node key already runs and is the one both sides keep."""


class PeerState(Enum):
    CONNECTING = "connecting"  # dialling, or connected and waiting for the peer's hello
    SYNCING = "syncing"  # hello exchanged; a round is in progress
    LIVE = "live"  # caught up both ways; pushes flow
    BACKOFF = "backoff"  # a dialled peer, waiting to reconnect
    CLOSED = "closed"


_OPEN = (PeerState.CONNECTING, PeerState.SYNCING, PeerState.LIVE)
# Which record speaks for a node: an open link first, then a dialled peer (it will be dialled
# again), then a closed connection.
_RANK = {
    PeerState.LIVE: 4,
    PeerState.SYNCING: 3,
    PeerState.CONNECTING: 2,
    PeerState.BACKOFF: 1,
    PeerState.CLOSED: 0,
}


@dataclass(slots=True, eq=False)
class Peer:
    """One connection record of a remote node: where it is, how far sync has got, what went
    wrong last."""

    address: str
    outbound: bool
    key: bytes | None = None
    state: PeerState = PeerState.CONNECTING
    connections: int = 0  # connections that reached hello
    connected_at: float | None = None  # wall time (s) of the current connection's hello
    last_error: str | None = None  # until a link to the node is next live
    last_error_at: float | None = None  # wall time (s) of ``last_error``
    # Entries the peer held that this node lacked, and the reverse, at the last round; each
    # counts down as entries arrive or go.
    lag_in: int = 0
    lag_out: int = 0
    received: int = 0  # entries received (all connections)
    sent: int = 0  # entries sent (all connections)
    rounds: int = 0
    close: Callable[[str | None], None] | None = field(default=None, repr=False)
    error_at: int = 0  # the table's version when last_error was set: the newer error wins

    @property
    def node_id(self) -> str | None:
        return None if self.key is None else node_id(self.key)


@dataclass(frozen=True, slots=True)
class PeerNode:
    """One remote node across its connection records: the link in use (or the record that
    will be dialled again, or the last one), the counts of every record summed, the newest
    error of any."""

    key: bytes | None
    address: str
    outbound: bool
    state: PeerState
    connected_at: float | None
    connections: int
    lag_in: int
    lag_out: int
    received: int
    sent: int
    rounds: int
    last_error: str | None
    last_error_at: float | None

    @property
    def node_id(self) -> str | None:
        return None if self.key is None else node_id(self.key)

    @property
    def direction(self) -> str:
        return "outbound" if self.outbound else "inbound"

    @property
    def connected(self) -> bool:
        return self.state in (PeerState.SYNCING, PeerState.LIVE)

    @classmethod
    def of(cls, records: list[Peer], kept: Peer | None) -> PeerNode:
        lead = max(records, key=lambda p: (_RANK[p.state], p is kept))
        errors = [p for p in records if p.last_error is not None]
        newest = max(errors, key=lambda p: p.error_at) if errors else None
        return cls(
            key=lead.key,
            address=lead.address,
            outbound=lead.outbound,
            state=lead.state,
            connected_at=lead.connected_at,
            lag_in=lead.lag_in,
            lag_out=lead.lag_out,
            connections=sum(p.connections for p in records),
            received=sum(p.received for p in records),
            sent=sum(p.sent for p in records),
            rounds=sum(p.rounds for p in records),
            last_error=None if newest is None else newest.last_error,
            last_error_at=None if newest is None else newest.last_error_at,
        )


class PeerTable:
    """Peers by node key and by connection; at most ``max_connections`` open at once."""

    def __init__(self, own_key: bytes, *, max_connections: int = 32) -> None:
        self.own_key = own_key
        self.max_connections = max_connections
        self._peers: list[Peer] = []
        self._by_key: dict[bytes, Peer] = {}
        self._changed = asyncio.Event()
        self.version = 0  # counts changes (``wait_for`` a later one)

    def __iter__(self) -> Iterator[Peer]:
        return iter(list(self._peers))

    @property
    def open_connections(self) -> int:
        return sum(1 for p in self._peers if p.state in _OPEN)

    def get(self, key: bytes) -> Peer | None:
        return self._by_key.get(key)

    def nodes(self) -> list[PeerNode]:
        """One ``PeerNode`` per remote node, in the order the table first saw each: the
        records of one node key folded together; a dialled address not reached yet is a node
        of its own; a connection here that has not said hello is no node yet."""
        groups: dict[bytes | Peer, list[Peer]] = {}
        for peer in self._peers:
            if peer.key is not None:
                groups.setdefault(peer.key, []).append(peer)
            elif peer.outbound:
                groups[peer] = [peer]
        return [
            PeerNode.of(records, self._by_key.get(key) if isinstance(key, bytes) else None)
            for key, records in groups.items()
        ]

    def linked(self, key: bytes, *, besides: Peer | None = None) -> bool:
        """Whether an open connection to node ``key`` runs (other than ``besides``'s)."""
        peer = self._by_key.get(key)
        return peer is not None and peer is not besides and peer.state in _OPEN

    def dialled(self, address: str) -> Peer:
        """A record for a peer this node dials; it lives across reconnects."""
        peer = Peer(address, outbound=True, state=PeerState.BACKOFF)
        self._peers.append(peer)
        return peer

    def open(self, peer: Peer | None, address: str) -> Peer:
        """A connection starts (``peer`` for a dialled one, None for one accepted here);
        ``TooManyConnections`` when the table is full."""
        if self.open_connections >= self.max_connections:
            if peer is not None:
                self._note_error(peer, "too many connections")
            raise TooManyConnections(f"already {self.max_connections} connections open")
        if peer is None:
            peer = Peer(address, outbound=False)
            self._peers.append(peer)
        peer.state = PeerState.CONNECTING
        self.touch()
        return peer

    def identify(self, peer: Peer, key: bytes) -> None:
        """The peer's hello named ``key``.  ``DuplicateLink`` if another open link to that key
        is the one to keep; if this one is, the other is closed."""
        other = self._by_key.get(key)
        if other is not None and other is not peer and other.state in _OPEN:
            if not self._keeps(peer, other, key):
                peer.key = key  # a dialled peer then waits while the other link is up
                raise DuplicateLink(f"already connected to node {node_id(key)}")
            if other.close is not None:
                other.close("replaced by a connection to the same node")
        if not peer.outbound:  # one record per node that connects here
            for old in [
                p
                for p in self._peers
                if p.key == key and p is not peer and not p.outbound and p.state not in _OPEN
            ]:
                self._merge(peer, old)
        peer.key = key
        self._by_key[key] = peer
        peer.connections += 1
        peer.connected_at = time.time()
        peer.state = PeerState.SYNCING
        self.touch()

    def _keeps(self, new: Peer, old: Peer, key: bytes) -> bool:
        """Whether ``new`` wins over ``old``: the link dialled by the smaller key is kept;
        between two links dialled by the same side, the older one."""
        dial_new = self.own_key if new.outbound else key
        dial_old = self.own_key if old.outbound else key
        return dial_new != dial_old and dial_new < dial_old

    def _merge(self, peer: Peer, old: Peer) -> None:
        _add_counts(peer, old)
        with contextlib.suppress(ValueError):
            self._peers.remove(old)

    def closed(self, peer: Peer, error: str | None) -> None:
        """A connection ended; a dialled peer goes on to ``BACKOFF``.  ``error`` is kept
        unless another link to the same node is up: then this one was the duplicate."""
        peer.state = PeerState.BACKOFF if peer.outbound else PeerState.CLOSED
        peer.close = None
        peer.connected_at = None
        if error is not None and not (peer.key and self.linked(peer.key, besides=peer)):
            self._note_error(peer, error)
        self.touch()

    def _note_error(self, peer: Peer, error: str) -> None:
        peer.last_error, peer.error_at = error, self.version + 1
        peer.last_error_at = time.time()

    def live(self, peer: Peer) -> None:
        """The link of ``peer`` caught up both ways: what went wrong before is past, so no
        record of its node keeps an error (docs/mesh.md §The peer table)."""
        peer.state = PeerState.LIVE
        for each in self._peers:
            if each is peer or (peer.key is not None and each.key == peer.key):
                each.last_error, each.last_error_at = None, None
        self.touch()

    def forget(self, peer: Peer) -> None:
        """Drop a peer that will not come back (a dialler stopped, a connection refused).
        Another record of the same node takes over its counts, so the node's totals never go
        back (they are counters in ``/metrics``)."""
        with contextlib.suppress(ValueError):
            self._peers.remove(peer)
        if peer.key is not None and self._by_key.get(peer.key) is peer:
            del self._by_key[peer.key]
        heir = next((p for p in self._peers if peer.key is not None and p.key == peer.key), None)
        if heir is not None:
            _add_counts(heir, peer)
        self.touch()

    def touch(self) -> None:
        """Something changed (a state, a count): wake whoever waits on the table."""
        self.version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_for(self, predicate: Callable[[PeerTable], bool]) -> None:
        """Wait until ``predicate(table)`` holds (bound it with ``asyncio.timeout``)."""
        while not predicate(self):
            await self._changed.wait()


def _add_counts(into: Peer, old: Peer) -> None:
    """``old``'s counts and, if newer, its error, taken over by ``into``."""
    into.connections += old.connections
    into.received += old.received
    into.sent += old.sent
    into.rounds += old.rounds
    if old.error_at > into.error_at:
        into.last_error, into.error_at = old.last_error, old.error_at
        into.last_error_at = old.last_error_at
