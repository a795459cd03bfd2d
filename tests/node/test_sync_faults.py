"""A misbehaving peer over loopback TCP (docs/mesh.md §When a peer misbehaves,
docs/protocol.md §9).

Each peer here is driven by hand, frame by frame, without a session to stop it.  Whatever it
does — garbage, an oversized frame, an unknown message, a bad body, a hello of another mesh,
entries beyond the credit it was granted, a flood of fork proofs, silence, not reading — the
node answers with a typed error and a closed connection, and stores nothing: no header,
payload, log, view or fork row changes.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tracemalloc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import msgpack
import pytest
import pytest_asyncio

from node.mesh.errors import (
    LinkError,
    PeerFlooding,
    PeerGone,
    PeerProtocolError,
    PeerSilent,
    PeerStalled,
)
from node.mesh.host import LinkOptions
from node.mesh.sync import Sync, SyncOptions
from node.node import Node
from protocol.entry import Entry
from protocol.frames import MAX_FRAME_BYTES
from protocol.frontier import Frontier
from protocol.messages import (
    Credit,
    Entries,
    Error,
    ErrorCode,
    ForkProof,
    FrontierDigest,
    Hello,
    Push,
)
from tests.node.helpers import ForeignWriter, admit, counts, events
from tests.node.synckit import RawPeer, wire

pytestmark = pytest.mark.asyncio

WINDOW = 4
BATCH = 3
PROOFS = 8
OPTIONS = SyncOptions(
    link=LinkOptions(
        credit_entries=WINDOW,
        batch_entries=BATCH,
        hello_timeout=0.3,
        write_timeout=0.3,
        close_timeout=0.3,
        max_fork_proofs=PROOFS,
    ),
    max_connections=2,
    poll_interval=0.01,
)


@dataclass
class Served:
    """A node accepting sync connections; each connection's outcome is queued."""

    node: Node
    sync: Sync
    address: tuple[str, int]
    outcomes: asyncio.Queue[LinkError | None]
    peers: list[RawPeer] = field(default_factory=list)

    async def outcome(self) -> LinkError | None:
        async with asyncio.timeout(5):
            return await self.outcomes.get()

    def peer(self, mesh: bytes | None = None) -> RawPeer:
        peer = RawPeer(mesh or self.node.info.mesh)
        self.peers.append(peer)
        return peer


@pytest_asyncio.fixture
async def served(node: Node) -> AsyncIterator[Served]:
    sync = Sync(node.replica(), key=node.key.public, options=OPTIONS)
    outcomes: asyncio.Queue[LinkError | None] = asyncio.Queue()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await outcomes.put(await sync.attach(reader, writer))

    async with sync:
        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        address = server.sockets[0].getsockname()[:2]
        served = Served(node, sync, address, outcomes)
        try:
            yield served
        finally:
            for peer in served.peers:
                peer.close()
            server.close()


def codes(messages: list[object]) -> list[int]:
    return [m.code for m in messages if isinstance(m, Error)]


async def hello(served: Served, *, rcvbuf: int | None = None) -> RawPeer:
    """A connected peer that has said hello and granted credit, and heard the node's digest."""
    peer = served.peer()
    await peer.connect(served.address, rcvbuf=rcvbuf)
    peer.say(peer.hello, Credit(1024, 1 << 31))
    await peer.until(FrontierDigest)
    return peer


async def test_garbage_before_hello_is_refused_at_its_length_prefix(served: Served) -> None:
    before = await counts(served.node)
    peer = served.peer()
    await peer.connect(served.address)
    peer.send_raw(b"GET / HTTP/1.1\r\nHost: memlane\r\n\r\n")  # "GET " is a 1.2 GB length
    assert isinstance(await served.outcome(), PeerProtocolError)
    assert codes(await peer.closed()) == [ErrorCode.LIMIT]
    assert await counts(served.node) == before


BAD_FRAMES = {
    # Only the prefix is sent: the node must refuse without waiting for a body.
    "oversized": ((MAX_FRAME_BYTES + 1).to_bytes(4, "big"), ErrorCode.LIMIT),
    "empty": (b"\0\0\0\0", ErrorCode.PROTOCOL),
    "not msgpack": (b"\0\0\0\1\xc1", ErrorCode.PROTOCOL),
    "unknown type": (b"\0\0\0\2" + msgpack.packb([42]), ErrorCode.PROTOCOL),
    "a map": (b"\0\0\0\3" + msgpack.packb({1: 2}), ErrorCode.PROTOCOL),
    "non-canonical": (b"\0\0\0\3" + b"\x91\xcc\x09", ErrorCode.PROTOCOL),  # bye, long int
}


@pytest.mark.parametrize("name", BAD_FRAMES)
async def test_a_bad_frame_after_hello_closes_the_connection(served: Served, name: str) -> None:
    data, code = BAD_FRAMES[name]
    before = await counts(served.node)
    peer = await hello(served)
    peer.send_raw(data)
    error = await served.outcome()
    assert isinstance(error, PeerProtocolError), error
    assert codes(await peer.closed()) == [code]
    assert await counts(served.node) == before


async def test_a_frame_of_empty_arrays_is_refused_unread_and_an_honest_peer_syncs(
    served: Served, foreign: ForeignWriter
) -> None:
    """4 MiB of empty arrays, 10,000 to an array so that each is within msgpack's length
    limits, would unpack into 4 million lists (some 260 MiB, for seconds): the node refuses
    the frame from a scan of its headers (docs/protocol.md §2) and goes on serving."""
    arrays = (MAX_FRAME_BYTES - 3) // 10_003
    body = b"\xdc" + arrays.to_bytes(2, "big") + (b"\xdc\x27\x10" + b"\x90" * 10_000) * arrays
    before = await counts(served.node)
    peer = await hello(served)
    tracemalloc.start()
    peer.send_raw(len(body).to_bytes(4, "big") + body)
    error = await served.outcome()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(error, PeerProtocolError), error
    assert "within limits" in str(error)
    assert codes(await peer.closed()) == [ErrorCode.PROTOCOL]
    assert peak < 8 * len(body)  # the frame's bytes on both ends of the socket, not its objects
    assert await counts(served.node) == before
    honest = await hello(served)
    honest.say(*await honest.until(FrontierDigest))
    honest.say(Push(wire(foreign.run(WINDOW))))
    await honest.until(Credit, count=2)
    assert len(await events(served.node, "sr_synced")) == WINDOW
    honest.close()
    assert isinstance(await served.outcome(), PeerGone)


async def test_a_refused_frame_is_freed_when_its_link_ends_without_a_collection(
    served: Served,
) -> None:
    """The refused frame's body must not wait for Python's cycle collector: thirty members
    refused at once would otherwise leave the node holding some 300 MiB until it runs."""
    body = b"\x92\x03" + b"\x91" * (MAX_FRAME_BYTES - 3) + b"\x90"  # too deep for a frontier
    peer = await hello(served)
    gc.collect()
    gc.disable()
    try:
        tracemalloc.start()
        peer.send_raw(len(body).to_bytes(4, "big") + body)
        error = await served.outcome()
        await peer.closed()
        del error
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    finally:
        gc.enable()
    assert held < len(body) // 4, f"{held} bytes still held"


async def test_a_connection_cut_inside_a_frame_is_a_cut(served: Served) -> None:
    before = await counts(served.node)
    peer = await hello(served)
    peer.send_raw((100).to_bytes(4, "big") + b"\x92" + b"\0" * 9)  # 10 of 100 bytes
    peer.writer.write_eof()
    assert isinstance(await served.outcome(), PeerGone)
    assert codes(await peer.closed()) == []
    assert await counts(served.node) == before


async def test_a_hello_of_another_mesh_is_refused(served: Served) -> None:
    peer = served.peer(os.urandom(16))
    await peer.connect(served.address)
    peer.say(peer.hello)
    assert isinstance(await served.outcome(), PeerProtocolError)
    assert codes(await peer.closed()) == [ErrorCode.MESH]


async def test_entries_beyond_credit_close_the_connection_and_store_nothing(
    served: Served, foreign: ForeignWriter
) -> None:
    before = await counts(served.node)
    peer = await hello(served)
    peer.say(*await peer.until(FrontierDigest))  # the same digest: both sides are live at once
    (granted,) = await peer.until(Credit)
    assert granted.entries == WINDOW
    peer.say(Push(wire(foreign.run(WINDOW + 1))))  # authentic, admitted, one too many
    error = await served.outcome()
    assert isinstance(error, PeerProtocolError)
    assert "credit" in str(error)
    assert codes(await peer.closed()) == [ErrorCode.CREDIT]
    assert await counts(served.node) == before
    assert await events(served.node, "sr_synced") == []


async def test_entries_within_credit_are_stored_and_credit_comes_back(
    served: Served, foreign: ForeignWriter
) -> None:
    """The same exchange within credit stores the entries (so the test above can fail)."""
    peer = await hello(served)
    peer.say(*await peer.until(FrontierDigest))
    peer.say(Push(wire(foreign.run(WINDOW))))
    grants = await peer.until(Credit, count=2)
    assert (grants[0].entries, grants[1].entries) == (WINDOW, WINDOW)  # given back when stored
    assert len(await events(served.node, "sr_synced")) == WINDOW
    peer.close()
    assert isinstance(await served.outcome(), PeerGone)


async def test_catch_up_goes_in_batches_of_batch_entries_within_credit(
    served: Served, foreign: ForeignWriter
) -> None:
    """Batches of ``batch_entries``, as many as the peer's credit holds (its window holds
    more than one), then a wait for credit."""
    assert (await served.node.receive(foreign.run(7), source="test")).stored == 7
    peer = served.peer()
    await peer.connect(served.address)
    peer.say(peer.hello, Credit(5, 1 << 31))
    await peer.until(FrontierDigest)
    peer.say(FrontierDigest(Frontier().digest()), *Frontier().parts())
    await peer.until(Entries, count=2)
    await asyncio.sleep(0.1)  # nothing more comes without credit
    assert [len(m.entries) for m in peer.messages() if isinstance(m, Entries)] == [3, 2]
    peer.say(Credit(3, 1 << 31))
    batches = await peer.until(Entries, count=3)
    assert [len(m.entries) for m in batches] == [3, 2, 3]
    peer.close()
    assert isinstance(await served.outcome(), PeerGone)


async def test_entries_that_do_not_decode_are_rejected_as_a_receive_rejects_them(
    served: Served, foreign: ForeignWriter
) -> None:
    """The link decodes each header once and hands the store the entries; one whose payload
    is not its header's, or whose header does not decode, reaches the store as it came."""
    good, other = foreign.run(2)
    peer = await hello(served)
    peer.say(*await peer.until(FrontierDigest))
    peer.say(Push(((good.raw, good.payload), (other.raw, good.payload), (b"\x91", None))))
    await peer.until(Credit, count=2)
    assert len(await events(served.node, "sr_synced")) == 1
    rejected = await events(served.node, "entry_rejected")
    assert [(r.entry, r.detail["reason"]) for r in rejected] == [
        (None, "payload: hash differs from payload_hash")
    ]  # the second rejection is counted, not written (one per source and interval)
    peer.close()
    assert isinstance(await served.outcome(), PeerGone)


async def test_a_flood_of_fork_proofs_is_cut_off(served: Served) -> None:
    before = await counts(served.node)
    peer = await hello(served)
    for n in range(PROOFS + 1):
        peer.say(ForkProof(b"\x01" + n.to_bytes(2, "big"), b"\x02" + n.to_bytes(2, "big")))
    assert isinstance(await served.outcome(), PeerFlooding)
    assert codes(await peer.closed()) == [ErrorCode.REFUSED]
    assert await counts(served.node) == before
    rejected = await events(served.node, "entry_rejected")
    assert 1 <= len(rejected) <= 2  # rate-limited: the flood cannot flood the audit feed


async def test_a_peer_that_says_nothing_is_dropped(served: Served) -> None:
    peer = served.peer()
    await peer.connect(served.address)
    assert isinstance(await served.outcome(), PeerSilent)
    messages = await peer.closed()
    assert [type(m) for m in messages] == [Hello, Credit]


async def test_a_peer_that_stops_reading_is_dropped(served: Served) -> None:
    node = served.node
    blobs = ForeignWriter(node.info.mesh, seed=b"\x09" * 32)
    await admit(node, blobs)
    # 48 entries of 200 kB: far more than the socket buffers between the two ends hold.
    await node.receive([_blob(blobs) for _ in range(48)], source="bundle")
    peer = await hello(served, rcvbuf=4096)
    nothing = Frontier()
    peer.say(FrontierDigest(nothing.digest()), *nothing.parts())  # holds nothing, never reads
    assert isinstance(await served.outcome(), PeerStalled)
    peer.close()


def _blob(writer: ForeignWriter) -> Entry:
    return writer.next("x.blob", raw_payload=os.urandom(200_000))


async def test_connections_beyond_the_limit_are_refused(served: Served) -> None:
    first, second = await hello(served), await hello(served)
    assert served.sync.peers.open_connections == 2
    third = served.peer()
    await third.connect(served.address)
    assert codes(await third.closed()) == [ErrorCode.REFUSED]
    assert await served.outcome() is None
    assert served.sync.peers.open_connections == 2
    for peer in (first, second):
        peer.close()
