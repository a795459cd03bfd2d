"""Sync between real nodes over loopback TCP (docs/mesh.md §Sync in practice,
docs/protocol.md §6).

Every node is a real store in its own directory; nodes of one mesh are made by copying an
initialised node and giving each copy its own node key (``synckit.make_mesh``).  The checks:
logs end identical, the tools answer alike, each arriving entry writes exactly one
``sr_synced`` event and a locally authored one none; a line of nodes converges, entries
written while connected included; a connection cut mid-stream resumes from the committed
frontier and sends nothing twice.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.identity import NODE_KEY_FILE
from node.members import certs
from node.mesh.host import LinkOptions
from node.mesh.peers import PeerState
from node.mesh.sync import PeerKey, Sync, SyncOptions
from node.node import Node
from protocol.entry import Entry, decode_header
from tests.node.helpers import ForeignWriter, Wall, events, sr_payload
from tests.node.synckit import (
    FAST,
    Relay,
    converged,
    held,
    make_mesh,
    own_ids,
    syncing,
    until,
)

pytestmark = pytest.mark.asyncio


async def alice(node: Node) -> Caller:
    issued = await node.create_token("alice", "team", ("read:workspace", "write:workspace"))
    return await node.authenticate(issued.token)


async def write(node: Node, caller: Caller, *titles: str) -> None:
    for title in titles:
        await node.e_write(caller, title=title, text=f"{title}, written on {node.info.node_id}")


async def synced_since(node: Node, audit_seq: int) -> Counter[bytes]:
    """How many ``sr_synced`` events each entry has had since ``audit_seq``."""
    rows = await events(node, "sr_synced")
    return Counter(row.entry for row in rows if row.seq > audit_seq and row.entry is not None)


async def live(sync: Sync, n: int) -> None:
    """Wait until exactly ``n`` of the node's peers are caught up both ways."""
    async with asyncio.timeout(5):
        await sync.peers.wait_for(lambda t: [p.state for p in t].count(PeerState.LIVE) == n)
    assert sync.peers.open_connections == n


async def audit_seq(node: Node) -> int:
    return await node.reader().max_audit_seq()


async def ids(node: Node) -> set[bytes]:
    return {e.id for e in await node.entries()}


async def answers(node: Node, caller: Caller) -> list[dict[str, Any]]:
    """What the tools say about the whole workspace: the timeline and its changes."""
    return [
        await node.e_timeline(caller, action="list", page_size=100),
        await node.e_timeline(caller, action="changes", since="2020-01-01", page_size=100),
        await node.e_timeline(caller, action="find", query="written", page_size=100),
    ]


def sized(writer: ForeignWriter, n: int, *, text: int = 300) -> list[Entry]:
    """``n`` SR entries of the writer, each with a text of ``text`` characters."""
    out = []
    for _ in range(n):
        seq = len(writer.entries) + 1
        sr_id = f"00000000-0000-7000-8000-{seq:012d}"
        out.append(writer.next(payload=sr_payload(sr_id, title=f"t{seq}", text="x" * text)))
    return out


async def test_two_nodes_end_with_the_same_logs_and_answers(tmp_path: Path, wall: Wall) -> None:
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        on_a, on_b = await alice(a), await alice(b)
        await write(a, on_a, "alpha", "beta", "gamma", "delta", "epsilon")
        await a.receive(writer.run(20), source="bundle")  # another node's log, held by A
        await write(b, on_b, "one", "two", "three")
        before = {a: (await ids(a), await audit_seq(a)), b: (await ids(b), await audit_seq(b))}
        assert await answers(a, on_a) != await answers(b, on_b)

        async with syncing(a) as sync_a, syncing(b) as sync_b:
            sync_b.dial(*await sync_a.listen())
            await converged([a, b], [sync_a, sync_b])
            await live(sync_b, 1)
            # A batch is counted once its commit's waiter runs again, which may be just
            # after the store shows it (converged) — wait for the count, not for luck.
            async with asyncio.timeout(5):
                await sync_b.peers.wait_for(lambda t: sum(p.received for p in t) >= 25)
            (peer,) = sync_b.peers
            assert (peer.received, peer.sent, peer.lag_in, peer.lag_out) == (25, 3, 0, 0)
            assert peer.node_id == a.info.node_id

        assert await held(a) == await held(b)
        assert len(await held(a)) == len(before[a][0]) + 3
        assert await answers(a, on_a) == await answers(b, on_b)
        for node in (a, b):
            known, seq = before[node]
            arrived = await ids(node) - known
            synced = await synced_since(node, seq)
            assert synced == Counter(dict.fromkeys(arrived, 1))  # one event per arrival
            assert not set(synced) & await own_ids(node)  # none for what it wrote itself
        assert len(await synced_since(b, before[b][1])) == 25
        assert {
            row.detail["source"] for row in await events(b, "sr_synced") if row.seq > before[b][1]
        } == {f"peer:{a.info.node_id}"}


async def test_a_line_of_nodes_converges_and_relays_what_is_written_live(
    tmp_path: Path, wall: Wall
) -> None:
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B", "C"], wall, [writer])
    async with (
        Node.open(dirs["A"], wall=wall) as a,
        Node.open(dirs["B"], wall=wall) as b,
        Node.open(dirs["C"], wall=wall) as c,
    ):
        callers = {a: await alice(a), c: await alice(c)}
        await write(a, callers[a], "a1", "a2", "a3")
        await a.receive(writer.run(10), source="bundle")
        await write(c, callers[c], "c1", "c2")
        start = {node: await audit_seq(node) for node in (a, b, c)}
        known = {node: await ids(node) for node in (a, b, c)}
        async with syncing(a) as sa, syncing(b) as sb, syncing(c) as sc:
            sb.dial(*await sa.listen())  # A – B – C: A and C never meet
            sb.dial(*await sc.listen())
            await converged([a, b, c], [sa, sb, sc])
            # Written while connected: live pushes, relayed by B.
            await write(a, callers[a], "a4", "a5")
            await write(c, callers[c], "c3")
            await a.receive(writer.run(5), source="bundle")
            await converged([a, b, c], [sa, sb, sc])
            assert [p.node_id for p in sa.peers] == [b.info.node_id]
            assert [p.node_id for p in sc.peers] == [b.info.node_id]
            await live(sb, 2)

        assert await held(a) == await held(b) == await held(c)
        assert await answers(a, callers[a]) == await answers(c, callers[c])
        for node in (a, b, c):
            arrived = await ids(node) - known[node] - await own_ids(node)
            assert await synced_since(node, start[node]) == Counter(dict.fromkeys(arrived, 1))
        via_b = f"peer:{b.info.node_id}"
        assert {
            row.detail["source"] for row in await events(c, "sr_synced") if row.seq > start[c]
        } == {via_b}


async def test_a_cut_connection_resumes_from_the_committed_frontier(
    tmp_path: Path, wall: Wall
) -> None:
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    entries = sized(writer, 300)
    total = sum(len(e.raw) + len(e.payload or b"") for e in entries)
    small = SyncOptions(
        link=LinkOptions(credit_entries=16, hello_timeout=2, write_timeout=2, close_timeout=1),
        poll_interval=0.01,
        backoff_initial=0.02,
        backoff_max=0.1,
    )
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await a.receive(entries, source="bundle")
        start = await audit_seq(b)
        async with syncing(a) as sa, syncing(b, small) as sb:
            relay = Relay(await sa.listen(), budget=total // 3)  # A's stream stalls a third in
            try:
                sb.dial(*await relay.start())
                async with asyncio.timeout(10):
                    await relay.stalled.wait()
                relay.cut()
                async with asyncio.timeout(10):
                    await sb.peers.wait_for(lambda t: not t.linked(a.key.public))
                    await sa.peers.wait_for(lambda t: not t.linked(b.key.public))
                (cut,) = sb.peers
                assert cut.last_error is not None  # the cut, while it is current
                await b.refresh()  # whatever B was committing is committed
                got = len(await synced_since(b, start))
                assert 0 < got < 300
                sent = sum(p.sent for p in sa.peers)
                relay.reopen()
                await converged([a, b], [sa, sb])
                # The new connection sent exactly what B had not committed.
                assert sum(p.sent for p in sa.peers) - sent == 300 - got
                assert relay.connections >= 2
                (peer,) = sb.peers
                assert peer.connections >= 2
                async with asyncio.timeout(10):  # live again: the cut is past
                    await sb.peers.wait_for(lambda _: peer.state is PeerState.LIVE)
                assert peer.last_error is None
            finally:
                await relay.close()
        assert await synced_since(b, start) == Counter({e.id: 1 for e in entries})
        assert await held(a) == await held(b)


async def test_two_nodes_dialling_each_other_keep_one_link(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, await alice(a), "from a")
        await write(b, await alice(b), "from b")
        before = {node: (await ids(node), await audit_seq(node)) for node in (a, b)}
        async with syncing(a) as sa, syncing(b) as sb:
            address_a, address_b = await sa.listen(), await sb.listen()
            sa.dial(*address_b)
            sb.dial(*address_a)
            await converged([a, b], [sa, sb])
            await write(a, await alice(a), "later")
            await converged([a, b], [sa, sb])
            for sync, other in ((sa, b), (sb, a)):
                await live(sync, 1)
                assert sync.peers.linked(other.key.public)
        assert await held(a) == await held(b)
        for node in (a, b):
            known, seq = before[node]
            arrived = await ids(node) - known - await own_ids(node)
            assert await synced_since(node, seq) == Counter(dict.fromkeys(arrived, 1))


async def test_sync_runs_inside_mutual_tls(tmp_path: Path, wall: Wall) -> None:
    """The TLS contexts of ``node.members.certs`` plug into ``listen``/``dial``; each side
    takes the peer's key from its certificate, and the hello must name that key."""
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, await alice(a), "over tls")
        ca = a.membership.authority_certificate()
        issued = {
            a: a.membership.node_certificate(),  # by the authority
            b: a.membership.node_certificate(b.key.public),
        }

        def tls(node: Node) -> tuple[ssl.SSLContext, ssl.SSLContext]:
            key = certs.private_key(node.path / NODE_KEY_FILE)
            return (
                certs.server_context(ca, issued[node], key),
                certs.client_context(ca, issued[node], key),
            )

        def peer_key(node: Node) -> PeerKey:
            admits = lambda key: node.membership.admits(key, wall())  # noqa: E731
            return lambda ssl_object: certs.verified_peer(ssl_object, admits)

        async with (
            Sync(a.replica(), key=a.key.public, options=FAST, peer_key=peer_key(a)) as sa,
            Sync(b.replica(), key=b.key.public, options=FAST, peer_key=peer_key(b)) as sb,
        ):
            sb.dial(*await sa.listen(ssl=tls(a)[0]), ssl=tls(b)[1])
            await converged([a, b], [sa, sb])
            await live(sb, 1)
        assert await held(a) == await held(b)


async def test_two_branches_of_a_log_meet_and_both_nodes_hold_the_fork(
    tmp_path: Path, wall: Wall
) -> None:
    """A holds one branch of a writer's log, B another from seq 3 (a restored clone): the
    catch-up starts one entry early so B sees A's branch, B's proof travels back as a fork
    proof, and both nodes end with the fork recorded and the log hidden from seq 3."""
    honest = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [honest])
    honest.run(5)
    clone = ForeignWriter(honest.mesh, seed=honest.seed, epoch=honest.epoch)
    clone.entries = list(honest.entries[:2])
    clone.wall = honest.entries[1].header.hlc.wall
    other = clone.next(payload=sr_payload("00000000-0000-7000-8000-0000000000bb", title="other"))
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await a.receive(honest.entries, source="bundle")
        await b.receive(clone.entries, source="bundle")
        async with syncing(a) as sa, syncing(b) as sb:
            sb.dial(*await sa.listen())

            async def both_forked() -> bool:
                return sa.commits.marks.forks == sb.commits.marks.forks == 1

            await until(both_forked, [sa, sb])
        for node in (a, b):
            (fork,) = await _forks(node)
            assert fork[:3] == (honest.key.public, honest.epoch, 3)
            assert {fork[3], fork[4]} == {honest.entries[2].raw, other.raw}
            assert len(await events(node, "fork_detected")) == 1
            (log,) = [g for g in await _logs(node) if g.writer == honest.key.public]
            assert log.forked_at == 3


async def _forks(node: Node) -> list[tuple[Any, ...]]:
    reader = node.reader()
    rows = [(decode_header(kept), kept, other) for kept, other in await reader.select_forks()]
    return [(h.writer, h.epoch, h.seq, kept, other) for h, kept, other in rows]


async def _logs(node: Node) -> list[Any]:
    reader = node.reader()
    return await reader.select_logs()


async def test_a_round_after_a_catch_up_of_many_batches_finds_nothing_to_send(
    tmp_path: Path, wall: Wall
) -> None:
    """The link stores two batches at once; a round begun after the catch-up snapshots what
    they brought, so nothing is sent twice."""
    fw = ForeignWriter(b"", wall=wall() - 60_000)
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [fw])
    often = SyncOptions(
        link=LinkOptions(
            round_interval=0.05, min_round_interval=0.01, close_timeout=1, batch_entries=64
        ),
        poll_interval=0.01,
    )
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await a.receive(fw.run(700), source="test")
        async with syncing(a, often) as sa, syncing(b, often) as sb:
            sb.dial(*await sa.listen())
            await converged([a, b], [sa, sb])
            async with asyncio.timeout(10):
                await sb.peers.wait_for(lambda t: all(p.rounds >= 4 for p in t))
            (peer,) = sb.peers
            assert (peer.received, peer.sent) == (700, 0)


async def test_rounds_start_again_on_a_timer_and_find_nothing_to_send(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    often = SyncOptions(
        link=LinkOptions(round_interval=0.05, min_round_interval=0.01, close_timeout=1),
        poll_interval=0.01,
    )
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, await alice(a), "once")
        async with syncing(a, often) as sa, syncing(b, often) as sb:
            sb.dial(*await sa.listen())
            await converged([a, b], [sa, sb])
            async with asyncio.timeout(5):
                await sb.peers.wait_for(lambda t: all(p.rounds >= 4 for p in t))
            (peer,) = sb.peers
            assert (peer.received, peer.sent) == (1, 0)  # the later rounds' digests matched
