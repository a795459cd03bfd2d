"""Membership: the mesh authority's log decides which writers may write which workspaces
(docs/mesh.md §Members, §The admission rule).

An entry of a writer with no ``member.add`` waits in the pending area and is applied when one
arrives — in the same batch or later, received or authored; an entry outside its writer's
workspaces, past its writer's revocation, or a member entry from anyone but the authority is
rejected, audited, and leaves nothing stored.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from node.identity import AUTHORITY_KEY_FILE
from node.members.errors import MeshError, NotAuthority, UnknownMember
from node.members.membership import Cutoff, Membership
from node.node import Node
from node.store import StoreOptions
from node.store.views import AppliedEntry, HiddenEntries
from protocol.clock import Hlc
from protocol.entry import Entry
from protocol.kinds import encode_payload
from tests.node.helpers import (
    FAR_FUTURE_MS,
    ForeignWriter,
    admit,
    counts,
    events,
    pending,
    sr_payload,
)


async def stored_ids(node: Node) -> set[bytes]:
    return {e.id for e in await node.entries()}


async def authority_log(node: Node) -> list[Entry]:
    return [e for e in await node.entries() if e.header.writer == node.membership.authority_key]


def writer(node: Node, n: int, **kw: Any) -> ForeignWriter:
    return ForeignWriter(node.info.mesh, seed=bytes([0x20 + n]) * 32, **kw)


def sr_in(workspace: str, n: int) -> dict[str, Any]:
    return sr_payload(f"00000000-0000-7000-8000-{n:012d}", workspace, title=f"in {workspace}")


@pytest_asyncio.fixture
async def pair(tmp_path: Path, wall: Any) -> AsyncIterator[tuple[Node, Node]]:
    """The authority node and a member node that holds the authority's log as it was at
    ``init`` (a copy made then, without the authority key): what reaches the member of the
    authority's later entries is what the test hands it."""
    await Node.init(tmp_path / "a", wall=wall)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / AUTHORITY_KEY_FILE).unlink()
    async with Node.open(tmp_path / "a", wall=wall) as a, Node.open(tmp_path / "b", wall=wall) as b:
        yield a, b


# -- the authority and its first member ----------------------------------------------------------


@pytest.mark.asyncio
async def test_a_new_node_is_the_authority_of_its_mesh_and_its_first_member(node: Node) -> None:
    (me,) = node.membership.members()
    assert (me.key, me.workspaces, me.revoked) == (node.info.public_key, ("*",), None)
    assert me.node_id == node.info.node_id
    assert node.membership.authority_key not in (None, node.info.public_key)
    (add,) = await authority_log(node)
    assert (add.header.kind, add.header.seq) == ("member.add", 1)


@pytest.mark.asyncio
async def test_only_the_authority_node_changes_membership(pair: tuple[Node, Node]) -> None:
    _, member = pair
    before = await counts(member)
    with pytest.raises(NotAuthority):
        await member.membership.admit_member(b"\x01" * 32)
    with pytest.raises(NotAuthority):
        member.membership.create_invite()
    assert await counts(member) == before


# -- a writer not admitted yet waits -----------------------------------------------------------


@pytest.mark.asyncio
async def test_a_writer_never_admitted_waits_and_nothing_is_stored(node: Node) -> None:
    stranger = writer(node, 1)
    before = await counts(node)
    report = await node.receive(stranger.run(3), source="peer")
    assert (report.stored, report.pending, report.rejected) == (0, 3, 0)
    assert await counts(node) == before
    assert await pending(node) == {e.id for e in stranger.entries}
    assert await events(node, "entry_rejected") == []
    assert await events(node, "sr_synced") == []


@pytest.mark.asyncio
async def test_admitting_a_writer_applies_its_waiting_entries_in_order(node: Node) -> None:
    late = writer(node, 1)
    entries = late.run(3)
    await node.receive(entries[1:], source="peer")
    await node.receive(entries[:1], source="peer")
    assert await pending(node) == {e.id for e in entries}
    await admit(node, late)
    assert await pending(node) == set()
    assert [r.entry for r in await events(node, "sr_synced")] == [e.id for e in entries]
    assert {e.id for e in entries} <= await stored_ids(node)


@pytest.mark.asyncio
async def test_a_member_add_received_later_releases_the_waiting_entries(
    pair: tuple[Node, Node],
) -> None:
    authority, member = pair
    w = writer(authority, 1)
    await admit(authority, w, workspaces=["team"])
    entries = w.run(3)
    assert (await member.receive(entries, source="peer")).pending == 3

    report = await member.receive(await authority_log(authority), source="authority")

    (add,) = (await authority_log(authority))[1:]
    assert report.stored_ids == [add.id, *(e.id for e in entries)]
    assert (report.duplicate, report.rejected) == (1, 0)  # the init entry it already held
    assert await pending(member) == set()
    assert member.membership.member(w.key.public) == authority.membership.member(w.key.public)


@pytest.mark.asyncio
async def test_a_member_add_in_the_same_batch_admits_its_writers_entries(
    pair: tuple[Node, Node],
) -> None:
    authority, member = pair
    w = writer(authority, 1)
    await admit(authority, w)
    entries = w.run(3)
    # The writer's entries first: the authority's log is taken first whatever the order.
    report = await member.receive([*entries, *await authority_log(authority)], source="peer")
    assert (report.stored, report.pending, report.rejected) == (4, 0, 0)
    assert {e.id for e in entries} <= await stored_ids(member)


@pytest.mark.asyncio
async def test_waiting_entries_are_checked_when_they_are_released(
    pair: tuple[Node, Node],
) -> None:
    authority, member = pair
    w = writer(authority, 1)
    await admit(authority, w, workspaces=["team"])
    ok = w.next(payload=sr_in("team", 1))
    outside = w.next(payload=sr_in("other", 2))
    after = w.next(payload=sr_in("team", 3))
    await member.receive([ok, outside, after], source="peer")

    report = await member.receive(await authority_log(authority), source="authority")

    assert ok.id in report.stored_ids
    assert report.rejected == 1
    (row,) = await events(member, "entry_rejected")
    assert (row.entry, row.detail["reason"]) == (
        outside.id,
        "its writer may not write into workspace 'other'",
    )
    assert await pending(member) == {after.id}  # its predecessor will never attach
    assert outside.id not in await stored_ids(member)


@pytest.mark.asyncio
async def test_waiting_entries_count_against_the_pending_area(node_dir: Path, wall: Any) -> None:
    async with Node.open(node_dir, wall=wall, options=StoreOptions(pending_limit=2)) as node:
        before = await counts(node)
        report = await node.receive(writer(node, 1).run(3), source="hostile")
        assert (report.pending, report.rejected) == (2, 1)
        (row,) = await events(node, "entry_rejected")
        assert row.detail["reason"] == "the pending area is full"
        assert await counts(node) == before


# -- rejected: outside the grant, member entries, past a revocation -------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("sr.put", sr_in("other", 1)),
        (
            "episode.record",
            {
                "id": "00000000-0000-7000-8000-000000000001",
                "vault": "other",
                "caller": "remote",
                "channel": "api",
                "episode_type": "task",
            },
        ),
    ],
)
async def test_a_workspace_outside_the_grant_is_rejected_and_nothing_is_stored(
    node: Node, kind: str, payload: dict[str, Any]
) -> None:
    w = writer(node, 1)
    await admit(node, w, workspaces=["team", "ops"])
    before = await counts(node)
    report = await node.receive([w.next(kind, payload)], source="peer")
    assert (report.stored, report.pending, report.rejected) == (0, 0, 1)
    assert await counts(node) == before
    assert await pending(node) == set()
    (row,) = await events(node, "entry_rejected")
    assert row.detail == {
        "source": "peer",
        "count": 1,
        "reason": "its writer may not write into workspace 'other'",
    }

    # The same writer's next entry, in a granted workspace, is stored.
    w.entries.pop()
    assert (await node.receive([w.next(payload=sr_in("ops", 2))], source="peer")).stored == 1


@pytest.mark.asyncio
async def test_a_grant_of_every_workspace_admits_any(node: Node, foreign: ForeignWriter) -> None:
    assert (await node.receive([foreign.next(payload=sr_in("other", 1))], source="p")).stored == 1


@pytest.mark.asyncio
async def test_a_bare_header_is_checked_when_its_payload_arrives(node: Node) -> None:
    w = writer(node, 1)
    await admit(node, w, workspaces=["team"])
    outside = w.next(payload=sr_in("other", 1))
    # Its workspace cannot be read without the payload: stored, not applied.
    assert (await node.receive([outside.without_payload()], source="peer")).stored == 1
    before = await counts(node)
    report = await node.receive([outside], source="peer")
    assert (report.filled, report.rejected) == (0, 1)
    assert await counts(node) == before


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["member.add", "member.revoke"])
async def test_member_entries_from_anyone_but_the_authority_are_rejected(
    node: Node, foreign: ForeignWriter, kind: str
) -> None:
    payload = (
        {"node": b"\x03" * 32, "workspaces": ["*"], "cert_expires": FAR_FUTURE_MS}
        if kind == "member.add"
        else {"node": node.info.public_key, "last_epoch": None, "last_seq": 0}
    )
    members = node.membership.members()
    before = await counts(node)
    stranger = writer(node, 1)  # not even a member: rejected, not kept waiting
    for w in (foreign, stranger):
        report = await node.receive([w.next(kind, payload)], source=f"from {w.seed[0]}")
        assert (report.stored, report.pending, report.rejected) == (0, 0, 1)
    assert await counts(node) == before
    assert node.membership.members() == members
    reasons = {r.detail["reason"] for r in await events(node, "entry_rejected")}
    assert reasons == {"member entries are valid only from the mesh authority's log"}


@pytest.mark.asyncio
async def test_a_revocation_cuts_the_writer_off_after_its_last_accepted_entry(node: Node) -> None:
    w = writer(node, 1)
    await admit(node, w)
    accepted = w.run(3)
    await node.receive(accepted, source="peer")

    revoked = await node.membership.revoke_member(w.key.public.hex())

    assert revoked.revoked is not None
    assert (revoked.revoked.epoch, revoked.revoked.seq) == (w.epoch, 3)
    before = await counts(node)
    report = await node.receive([w.next()], source="peer")  # seq 4: past the cut-off
    assert report.rejected == 1
    restored = writer(node, 1, epoch=b"\x09" * 8)  # an epoch not seen at revocation
    assert (await node.receive(restored.run(2), source="peer")).rejected == 2
    again = await node.receive(accepted, source="peer")  # what it wrote before: duplicates
    assert (again.duplicate, again.rejected) == (3, 0)
    assert await counts(node) == before
    reasons = {r.detail["reason"] for r in await events(node, "entry_rejected")}
    assert reasons == {"its writer was revoked: the entry is past the revocation's cut-off"}


@pytest.mark.asyncio
async def test_a_writer_revoked_before_anything_arrived_is_cut_off_entirely(node: Node) -> None:
    w = writer(node, 1)
    await admit(node, w)
    member = await node.membership.revoke_member(w.key.public.hex())
    assert member.revoked is not None
    assert (member.revoked.epoch, member.revoked.seq) == (None, 0)
    report = await node.receive(w.run(2), source="peer")
    assert (report.stored, report.pending, report.rejected) == (0, 0, 2)


@pytest.mark.asyncio
async def test_a_revocation_received_keeps_what_came_before_its_cutoff(
    pair: tuple[Node, Node],
) -> None:
    authority, member = pair
    w = writer(authority, 1)
    await admit(authority, w)
    e1, e2, e3, e4 = w.run(4)
    await authority.receive([e1, e2, e3], source="peer")
    await authority.membership.revoke_member(w.key.public.hex())
    _, add, revoke = await authority_log(authority)

    await member.receive([add, e1], source="peer")
    await member.receive([revoke], source="authority")
    report = await member.receive([e2, e3, e4], source="peer")

    assert report.stored_ids == [e2.id, e3.id]
    assert report.rejected == 1
    assert member.membership.member(w.key.public) == authority.membership.member(w.key.public)


@pytest.mark.asyncio
async def test_revoking_is_refused_for_unknown_revoked_and_own_keys(node: Node) -> None:
    w = writer(node, 1)
    await admit(node, w)
    await node.membership.revoke_member(w.key.public.hex())
    before = await counts(node)
    with pytest.raises(UnknownMember, match="already revoked"):
        await node.membership.revoke_member(w.key.public.hex())
    with pytest.raises(UnknownMember, match="no member"):
        await node.membership.revoke_member("aaaa-bbbb-cccc-dddd")
    with pytest.raises(MeshError, match="its own key"):
        await node.membership.revoke_member(node.info.node_id)
    with pytest.raises(MeshError, match="cannot return"):
        await admit(node, w)
    assert await counts(node) == before


@pytest.mark.asyncio
async def test_a_new_grant_replaces_the_old_one(node: Node) -> None:
    w = writer(node, 1)
    await admit(node, w, workspaces=["team"])
    await node.membership.admit_member(
        w.key.public, workspaces=["ops"], cert_expires=FAR_FUTURE_MS - 1
    )
    member = node.membership.member(w.key.public)
    assert member is not None
    assert (member.workspaces, member.cert_expires) == (("ops",), FAR_FUTURE_MS - 1)
    report = await node.receive([w.next(payload=sr_in("team", 1))], source="peer")
    assert report.rejected == 1


# -- derived from the log ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_membership_survives_a_restart_and_a_views_rebuild(node_dir: Path, wall: Any) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        kept, gone = writer(node, 1), writer(node, 2)
        await admit(node, kept, workspaces=["team"])
        await admit(node, gone)
        await node.receive(gone.run(1), source="peer")
        await node.membership.revoke_member(gone.key.public.hex())
        members = node.membership.members()
        assert len(members) == 3

    async with Node.open(node_dir, wall=wall) as node:
        assert node.membership.members() == members
        assert (await node.receive([kept.next(payload=sr_in("other", 1))], source="p")).rejected
        assert (await node.receive([gone.next()], source="p")).rejected
        await node.rebuild_views()
        assert node.membership.members() == members
        kept.entries.pop()
        assert (await node.receive([kept.next(payload=sr_in("team", 2))], source="p")).stored


def _applied(
    log_id: int, epoch: bytes, seq: int, wall: int, kind: str, payload: Any
) -> AppliedEntry:
    encode_payload(kind, payload)  # a valid payload
    return AppliedEntry(seq, log_id, AUTHORITY, epoch, seq, Hlc(wall, 0), kind, payload, wall)


AUTHORITY = b"\xaa" * 32
K1, K2 = b"\x01" * 32, b"\x02" * 32


def _grant(key: bytes, *workspaces: str) -> dict[str, Any]:
    return {"node": key, "workspaces": list(workspaces), "cert_expires": FAR_FUTURE_MS}


@pytest.mark.asyncio
async def test_member_entries_fold_alike_in_any_arrival_order() -> None:
    """Two authority epochs (a restored authority) whose entries interleave in time: the
    members are the same whichever epoch arrives first; a hidden (forked) part withdraws."""
    old, new = b"\x01" * 8, b"\x02" * 8
    items = [
        _applied(1, old, 1, 100, "member.add", _grant(K1, "team")),
        _applied(1, old, 2, 300, "member.add", _grant(K2, "*")),
        _applied(2, new, 1, 200, "member.add", _grant(K1, "ops")),
        _applied(
            2, new, 2, 400, "member.revoke", {"node": K2, "last_epoch": b"\x07" * 8, "last_seq": 5}
        ),
        _applied(1, old, 3, 500, "member.add", _grant(K2, "team")),  # after its revoke
    ]
    folded = []
    for order in (items, items[2:4] + items[:2] + items[4:], items[::-1]):
        membership = Membership(AUTHORITY)
        for item in order:
            await membership.apply(None, item)
        folded.append(membership.members())
    assert folded[0] == folded[1] == folded[2]
    k1, k2 = folded[0]
    assert k1.workspaces == ("ops",)  # the newest grant by the fold's order
    assert k2.revoked == Cutoff(b"\x07" * 8, 5, 400)  # and a revocation is final

    membership = Membership(AUTHORITY)
    for item in items:
        await membership.apply(None, item)
    await membership.hide(None, HiddenEntries(2, 1, 0))
    k1, k2 = membership.members()
    assert (k1.workspaces, k2.workspaces, k2.revoked) == (("team",), ("team",), None)
