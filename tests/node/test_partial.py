"""Partial replication (docs/partial.md) between real nodes: every node holds every header,
and only the payloads of the workspaces its grant ``holds``.

The store: a payload outside the grant is never stored (received whole, it is kept as its
header, its place recorded), a header-only entry carries its place from its tag, the fill path
takes a payload later, a want is answered with the payload, ``ERASED``, ``WITHHELD`` or
``ABSENT``; a grant that shrinks withholds what it no longer holds and rebuilds the views,
one that grows wants it again.  A raw scan of a node's files finds no byte of a payload
outside its grant.  Over real TLS, three nodes in a line whose middle holds nothing: the ends
converge on every header, the middle holds no payload, and once the ends meet they fetch
from each other what the middle could not pass on.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from node.access.callers import Caller
from node.errors import Refusal
from node.identity import NODE_KEY_FILE, random_bytes
from node.members import certs
from node.mesh.fetch import MAX_REFILLS, Fetch
from node.mesh.host import LinkOptions
from node.mesh.sync import PeerKey, Sync, SyncOptions
from node.node import Node
from node.store.partial import answer_wants
from protocol.entry import decode_header
from protocol.frontier import Frontier
from protocol.kinds import decode_payload
from protocol.messages import Credit, Entries, Error, ErrorCode, FrontierDigest, Hello
from protocol.payloads import PARTIAL, Answer, Payloads, Want
from protocol.signing import SigningKey
from tests.node.helpers import ForeignWriter, Wall, counts, sr_payload
from tests.node.synckit import RawPeer, converged, make_mesh

pytestmark = pytest.mark.asyncio

SCOPES = ("read:workspace", "write:workspace")
QUICK = SyncOptions(
    link=LinkOptions(hello_timeout=2.0, write_timeout=2.0, close_timeout=1.0, payload_retry=0.1),
    poll_interval=0.01,
    backoff_initial=0.02,
    backoff_max=0.2,
)


async def caller(node: Node, workspace: str, principal: str = "alice") -> Caller:
    issued = await node.create_token(principal, workspace, SCOPES)
    return await node.authenticate(issued.token)


async def write(node: Node, workspace: str, *marks: str) -> None:
    who = await caller(node, workspace)
    for mark in marks:
        await node.e_write(who, title=f"{mark} title", text=f"{mark} text in {workspace}")


async def headers(node: Node) -> set[bytes]:
    return {e.id for e in await node.entries()}


async def payloads(node: Node) -> dict[bytes, bytes]:
    return {e.id: e.payload for e in await node.entries() if e.payload is not None}


async def places(node: Node) -> dict[bytes, str | None]:
    rows = await node.reader().fetchall("SELECT id, workspace FROM headers")
    return {bytes(r[0]): r[1] for r in rows}


async def missing(node: Node) -> set[bytes]:
    rows = await node.reader().fetchall(
        "SELECT h.id FROM missing m JOIN headers h ON h.pos = m.pos"
    )
    return {bytes(r[0]) for r in rows}


def file_bytes(data: Path) -> bytes:
    """Every byte of a node's store: the database, its WAL and shared memory."""
    return b"".join(p.read_bytes() for p in sorted(data.glob("memlane.db*")))


async def titles(node: Node, who: Caller) -> list[str]:
    page = await node.e_timeline(who, action="list", page_size=100)
    return sorted(r["title"] for r in page["results"])


async def hand_over(src: Node, dst: Node, *, grants: bool = False) -> None:
    """Every entry of ``src`` (or only its grants), whole, offered to ``dst``'s receive path
    (as a bundle or a peer that ignores grants would)."""
    entries = [e for e in await src.entries() if not grants or e.header.kind == "member.add"]
    await dst.replica().receive([(e.raw, e.payload) for e in entries], source="test")


async def poll(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 — a fetch moves no commit mark
            await asyncio.sleep(0.05)


# -- the store ---------------------------------------------------------------------------------


async def test_a_payload_outside_the_grant_is_kept_as_its_header(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, holds={"B": ["team"]})
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, "team", "shared")
        await write(a, "lab", "LABSECRET")
        await hand_over(a, b)
        assert await headers(b) == await headers(a)
        lab = {i for i, p in (await places(a)).items() if p == "lab"}
        assert len(lab) == 1
        assert lab.isdisjoint(await payloads(b))
        assert await missing(b) == lab
        assert (await places(b))[next(iter(lab))] == "lab"  # read from the payload, then dropped
        team = await caller(b, "team")
        assert await titles(b, team) == ["shared title"]
        with pytest.raises(Refusal, match="does not hold workspace 'lab'"):
            await b.create_token("bob", "lab", SCOPES)
        # A writer not admitted yet: its entries wait in the pending area, without the payload.
        stranger = ForeignWriter(b.info.mesh, seed=b"\x44" * 32)
        waiting = stranger.next(
            payload=sr_payload(f"{'0' * 8}-0000-7000-8000-{'1' * 12}", "lab", title="LABPENDING")
        )
        report = await b.replica().receive([(waiting.raw, waiting.payload)], source="test")
        assert (report.pending, report.withheld) == (1, 1)
    assert b"LABSECRET" not in file_bytes(dirs["B"])
    assert b"LABPENDING" not in file_bytes(dirs["B"])
    assert b"LABSECRET" in file_bytes(dirs["A"])  # the scan can find it where it is


async def test_a_tagged_header_is_placed_and_its_payload_filled_later(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, holds={"B": ["team"]})
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, "team", "later")
        sr = next(e for e in await a.entries() if e.header.kind == "sr.put")
        report = await b.replica().receive([(sr.raw, "team")], source="test")
        assert (report.stored, report.withheld) == (1, 0)
        assert await missing(b) == {sr.id}
        assert (await places(b))[sr.id] == "team"
        team = await caller(b, "team")
        assert await titles(b, team) == []
        wanted = await b.replica().wanted(after=0, limit=10, places=frozenset({"team"}))
        assert [w.id for w in wanted] == [sr.id]
        await b.replica().receive([(sr.raw, sr.payload)], source="test")  # the fill path
        assert await missing(b) == set()
        assert (await payloads(b))[sr.id] == sr.payload
        assert await titles(b, team) == ["later title"]


async def test_a_want_is_answered_by_what_the_asker_may_hold(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, holds={"B": ["team"]})
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, "team", "kept", "erased")
        await write(a, "lab", "theirs")
        puts = [e for e in await a.entries() if e.header.kind == "sr.put" and e.payload]
        by_title = {decode_payload(e.header.kind, e.payload or b"")["title"]: e for e in puts}
        who = await caller(a, "team")
        sr_id = (await a.e_timeline(who, action="find", query="erased"))["results"][0]["sr_id"]
        await a.e_erase(who, sr_id=sr_id, reason="gone")
        asked = [*sorted(e.id for e in by_title.values()), bytes(32)]
        answers = dict(await a.replica().answers(asked, b.key.public))
        assert answers[by_title["kept title"].id] == by_title["kept title"].payload
        assert answers[by_title["erased title"].id] == Answer.ERASED
        assert answers[by_title["theirs title"].id] == Answer.WITHHELD
        assert answers[bytes(32)] == Answer.ABSENT
        # B holds no lab payload: it answers ABSENT for it, whoever asks.
        await hand_over(a, b)
        mine = await answer_wants(
            b.reader().fetchall, [by_title["theirs title"].id], lambda _: True
        )
        assert mine == [(by_title["theirs title"].id, Answer.ABSENT)]


async def test_a_grant_that_shrinks_withholds_and_one_that_grows_wants_again(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await write(a, "team", "stays")
        await write(a, "lab", "LABGONE")
        lab_reader = await caller(b, "lab", "bob")
        await hand_over(a, b)
        assert await titles(b, lab_reader) == ["LABGONE title"]
        await a.membership.regrant(b.info.node_id, holds=["team"])
        await hand_over(a, b, grants=True)
        await poll(lambda: _not_due(b))
        lab = {i for i, p in (await places(a)).items() if p == "lab"}
        assert lab.isdisjoint(await payloads(b))
        assert await missing(b) == lab
        assert await titles(b, lab_reader) == []
        assert await titles(b, await caller(b, "team")) == ["stays title"]
        with pytest.raises(Refusal, match="does not hold workspace 'lab'"):
            await b.e_write(lab_reader, title="a token issued before", text="refused")
        audit = await b.reader().fetchall("SELECT count(*) FROM audit WHERE workspace = 'lab'")
        assert audit[0][0] == 0
        await b.store.scrub()
    assert b"LABGONE" not in file_bytes(dirs["B"])
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await a.membership.regrant(b.info.node_id, holds=["*"])
        await hand_over(a, b, grants=True)
        wanted = await b.replica().wanted(after=0, limit=10, places=b.replica().held())
        assert {w.id for w in wanted} == lab
        await hand_over(a, b)  # what a peer gives when asked
        assert await missing(b) == set()
        assert await titles(b, lab_reader) == ["LABGONE title"]


async def _not_due(node: Node) -> bool:
    return await node.reader().state("withhold_due") is None and not node.store.narrowed.is_set()


# -- over real TLS ----------------------------------------------------------------------------


def _tls(authority: Node, node: Node) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = authority.membership.authority_certificate()
    cert = authority.membership.node_certificate(node.key.public)
    key = certs.private_key(node.path / NODE_KEY_FILE)
    return certs.server_context(ca, cert, key), certs.client_context(ca, cert, key)


def _peer_key(node: Node, wall: Wall) -> PeerKey:
    admits = lambda key: node.membership.admits(key, wall())  # noqa: E731
    return lambda ssl_object: certs.verified_peer(ssl_object, admits)


def _sync(node: Node, wall: Wall) -> Sync:
    return Sync(node.replica(), key=node.key.public, options=QUICK, peer_key=_peer_key(node, wall))


async def test_a_line_whose_middle_holds_nothing_converges_over_tls(
    tmp_path: Path, wall: Wall
) -> None:
    """A (every payload) — M (none) — B ("team"): every header reaches both ends through M,
    which holds no payload; what M could not pass on, the ends fetch by id once they meet."""
    dirs = await make_mesh(tmp_path, ["A", "M", "B"], wall, holds={"M": [], "B": ["team"]})
    async with (
        Node.open(dirs["A"], wall=wall) as a,
        Node.open(dirs["M"], wall=wall) as m,
        Node.open(dirs["B"], wall=wall) as b,
    ):
        await write(a, "team", "from a")
        await write(a, "lab", "LABONLY")
        await write(b, "team", "from b")
        nodes = (a, m, b)
        async with _sync(a, wall) as sa, _sync(m, wall) as sm, _sync(b, wall) as sb:
            syncs = (sa, sm, sb)
            sm.dial(*await sa.listen(ssl=_tls(a, a)[0]), ssl=_tls(a, m)[1])
            sb.dial(*await sm.listen(ssl=_tls(a, m)[0]), ssl=_tls(a, b)[1])
            await converged(nodes, syncs)
            assert await headers(a) == await headers(m) == await headers(b)
            kinds = {e.header.kind for e in await m.entries() if e.payload is not None}
            assert kinds <= {"member.add", "member.revoke"}  # M holds no workspace's payload
            team_a, team_b = await caller(a, "team"), await caller(b, "team")
            assert await titles(a, team_a) == ["from a title"]  # B's came as a header only
            assert await titles(b, team_b) == ["from b title"]
            sb.dial(*await sa.listen(ssl=_tls(a, a)[0]), ssl=_tls(a, b)[1])  # the ends meet

            async def fetched() -> bool:
                return not await missing(a) and len(await titles(b, team_b)) == 2

            await poll(fetched)
            assert await titles(a, team_a) == await titles(b, team_b)
            assert await missing(b) == {i for i, p in (await places(a)).items() if p == "lab"}
    assert b"LABONLY" not in file_bytes(dirs["M"]) + file_bytes(dirs["B"])


# -- a served node and a peer speaking by hand --------------------------------------------------


async def _served_with_peer(tmp_path: Path, wall: Wall, holds: Sequence[str]) -> tuple[Path, bytes]:
    """A node that wrote a team and a lab SR, and the key of a peer it admitted with
    ``holds``."""
    peer = SigningKey(random_bytes(32)).public
    await Node.init(tmp_path / "node", wall=wall)
    async with Node.open(tmp_path / "node", wall=wall) as node:
        await node.membership.admit_member(peer, holds=holds)
        await write(node, "team", "open")
        await write(node, "lab", "LABSERVED")
    return tmp_path / "node", peer


async def _raw(node: Node, peer: bytes, address: tuple[str, int]) -> RawPeer:
    raw = RawPeer(node.info.mesh, peer)
    raw.hello = Hello(1, 2, node.info.mesh, peer, (PARTIAL,))
    await raw.connect(address)
    raw.say(raw.hello, Credit(1024, 1 << 31), FrontierDigest(Frontier.of(()).digest()))
    await raw.until(FrontierDigest)
    return raw


async def test_a_peer_is_sent_and_given_only_what_its_grant_holds(
    tmp_path: Path, wall: Wall
) -> None:
    data, peer = await _served_with_peer(tmp_path, wall, ["team"])
    async with Node.open(data, wall=wall) as node, _sync(node, wall) as sync:
        sync.peer_key = None  # plain TCP: the peer is named by its hello
        raw = await _raw(node, peer, await sync.listen())
        try:
            raw.say(Frontier.of(()).parts()[0])  # it holds nothing: the node streams it all
            assert [m.done for m in await raw.until(Entries)][-1]  # all of it, in one batch
            sent = {
                decode_header(h).kind: p
                for batch in raw.messages()
                if isinstance(batch, Entries)
                for h, p in batch.entries
            }
            places_ = await places(node)
            lab = next(i for i, p in places_.items() if p == "lab")
            team = next(i for i, p in places_.items() if p == "team")
            tags = [p for p in sent.values() if isinstance(p, str)]
            assert tags == ["lab"]  # the lab SR's header came with its tag, no payload
            raw.say(Want(tuple(sorted((lab, team)))))
            (answer,) = await raw.until(Payloads)
            got = dict(answer.items)
            assert got[lab] == Answer.WITHHELD
            assert isinstance(got[team], bytes)
            assert b"LABSERVED" not in bytes(raw.data)
        finally:
            raw.close()


async def test_a_want_beyond_its_bounds_ends_the_link_and_stores_nothing(
    tmp_path: Path, wall: Wall
) -> None:
    data, peer = await _served_with_peer(tmp_path, wall, ["*"])
    async with Node.open(data, wall=wall) as node, _sync(node, wall) as sync:
        sync.peer_key = None
        before = await counts(node)
        address = await sync.listen()
        too_many = object.__new__(Want)
        object.__setattr__(too_many, "ids", tuple(i.to_bytes(32, "big") for i in range(257)))
        one = Want((bytes(32),))
        for bad in ([too_many], [one, one]):  # too many ids; a second want unanswered
            raw = await _raw(node, peer, address)
            try:
                raw.say(*bad)
                sent = await raw.closed()
                assert [m.code for m in sent if isinstance(m, Error)] == [ErrorCode.PROTOCOL]
            finally:
                raw.close()
        assert await counts(node) == before


async def test_payloads_filled_in_wait_to_be_passed_on_within_a_bound(
    tmp_path: Path, wall: Wall
) -> None:
    """What one link filled in is passed on by the others — only what each peer's grant
    holds, and no more than ``MAX_REFILLS`` waiting (the peer fetches the rest)."""
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, holds={"B": ["team"]})
    async with Node.open(dirs["A"], wall=wall) as a:
        to_b = Fetch(a.replica(), (await _key(dirs["B"], wall)), (PARTIAL,), retry=30.0)
        filled = [(1, seq, "team" if seq % 2 else "lab") for seq in range(2 * MAX_REFILLS + 10)]
        to_b.refill(filled)
        to_b.refill(filled)
        taken = to_b.take_refills()
        assert len(taken) == MAX_REFILLS
        assert {place for _, _, place in taken} == {"team"}
        assert to_b.take_refills() == []


async def _key(data: Path, wall: Wall) -> bytes:
    async with Node.open(data, wall=wall) as node:
        return node.key.public
