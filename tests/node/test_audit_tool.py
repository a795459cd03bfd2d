"""e_audit (docs/tools/e_audit.md): the local catch-up feed over the read rule.

``e_audit(action="list", since_seq=N, limit=L)`` answers the events after N in seq order, each
with seq/event/at/subject/entry_id; events about SRs or episodes the caller cannot read are
left out, node events (rejections, clock skew) are shown to admins only; ``feed_id`` is the
node's; ``covered_seq`` lets a consumer page through everything exactly once.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio

from node.access.callers import Caller
from node.errors import Forbidden, Refusal
from node.node import Node
from protocol.clock import Hlc
from protocol.timefmt import format_instant
from tests.node.helpers import CallerFactory, ForeignWriter, Wall, admit, sr_payload, stored

READ_WRITE = ("read:workspace", "write:workspace")
ADMIN = ("read:workspace", "write:workspace", "admin:workspace")
SINCE_SEQ = "invalid since_seq: must be an integer from 0 to 4611686018427387904"
FIELDS = {"seq", "event", "at", "subject", "entry_id"}


async def every_event(node: Node, caller: Caller, limit: int = 1000) -> list[dict[str, Any]]:
    answer = await node.e_audit(caller, action="list", since_seq=0, limit=limit)
    return list(answer["events"])


async def page_through(node: Node, caller: Caller, limit: int) -> list[dict[str, Any]]:
    """A consumer: pass covered_seq back as since_seq until an answer has no events."""
    got: list[dict[str, Any]] = []
    since = 0
    for _ in range(1000):
        answer = await node.e_audit(caller, action="list", since_seq=since, limit=limit)
        assert answer["feed_id"] == node.info.feed_id
        assert len(answer["events"]) <= limit
        assert all(e["seq"] > since for e in answer["events"])
        assert answer["covered_seq"] >= since
        got += answer["events"]
        if not answer["events"]:
            return got
        assert answer["covered_seq"] >= answer["events"][-1]["seq"]
        since = answer["covered_seq"]
    raise AssertionError("the feed never ended")


@pytest_asyncio.fixture
async def history(node: Node, wall: Wall, make_caller: CallerFactory) -> dict[str, Any]:
    """A mixed feed: alice's and bob's SRs (one private), an SR of another workspace, a
    deletion and undeletion, a forgotten episode, a synced foreign SR, a future entry (clock
    skew) and a rejected entry."""
    h: dict[str, Any] = {
        "alice": await make_caller("alice", "team", READ_WRITE),
        "bob": await make_caller("bob", "team", READ_WRITE),
        "root": await make_caller("root", "team", ADMIN),
        "olga": await make_caller("olga", "other", ADMIN),
        "at": {},
    }
    alice, bob, olga = h["alice"], h["bob"], h["olga"]

    async def write(who: Caller, **args: Any) -> str:
        wall.now += 1000
        result = await node.e_write(who, **args)
        h["at"][result["entry_id"]] = wall.now
        return str(result["sr_id"])

    h["a1"] = await write(alice, title="a1", text="x")
    h["b_private"] = await write(bob, title="bob's", text="x", visibility="private")
    h["o1"] = await write(olga, title="olga's", text="x")
    h["a2"] = await write(alice, title="a2", text="x")
    wall.now += 1000
    await node.e_delete(alice, sr_id=h["a1"])
    wall.now += 1000
    await node.e_undelete(alice, sr_id=h["a1"])
    h["b_public"] = await write(bob, title="bob's public", text="x")
    wall.now += 1000
    episode = (await node.work_record(alice, summary="did it"))["id"]
    await node.work_forget(alice, id=episode)
    h["episode"] = episode
    foreign = ForeignWriter(node.info.mesh)
    await admit(node, foreign)
    h["synced"] = "00000000-0000-7000-8000-000000000001"
    wall.now += 1000
    synced = foreign.next(
        "sr.put", sr_payload(h["synced"], title="from a peer"), hlc=Hlc(wall.now - 500, 0)
    )
    h["synced_entry"] = synced.id.hex()
    assert (await node.receive([synced], source="peer-a")).stored == 1
    stranger = ForeignWriter(b"\x99" * 16)  # another mesh: rejected
    assert (await node.receive(stranger.run(2), source="peer-b")).rejected == 2
    h["a3"] = await write(alice, title="a3", text="x")
    return h


# -- what an answer holds ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_events_in_seq_order_with_their_fields(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice = await make_caller("alice", "team", READ_WRITE)
    written = []
    for i in range(3):
        wall.now += 1000
        written.append((await node.e_write(alice, title=f"sr {i}", text="x"), wall.now))
    wall.now += 1000
    corrected = await node.e_correct(alice, sr_id=written[0][0]["sr_id"], reason="r", text="y")
    wall.now += 1000
    await node.e_delete(alice, sr_id=written[1][0]["sr_id"])
    deleted_at = wall.now
    wall.now += 1000
    await node.e_undelete(alice, sr_id=written[1][0]["sr_id"])

    answer = await node.e_audit(alice, action="list", since_seq=0)
    assert set(answer) == {"feed_id", "events", "covered_seq"}
    assert answer["feed_id"] == node.info.feed_id
    events = answer["events"]
    assert all(set(e) == FIELDS for e in events)  # no detail for a non-admin
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert len({e["seq"] for e in events}) == len(events)
    assert [e["event"] for e in events] == ["sr_written"] * 4 + ["sr_deleted", "sr_undeleted"]
    assert [(e["subject"], e["entry_id"], e["at"]) for e in events[:3]] == [
        (w["sr_id"], w["entry_id"], format_instant(t)) for w, t in written
    ]
    assert (events[3]["subject"], events[3]["entry_id"]) == (
        written[0][0]["sr_id"],
        corrected["entry_id"],
    )
    assert events[4] == {
        "seq": events[4]["seq"],
        "event": "sr_deleted",
        "at": format_instant(deleted_at),
        "subject": written[1][0]["sr_id"],
        "entry_id": None,
    }
    assert answer["covered_seq"] == events[-1]["seq"]

    # since_seq: strictly after; limit: the first L.
    for n in range(len(events) + 1):
        since = events[n - 1]["seq"] if n else 0
        after = await node.e_audit(alice, action="list", since_seq=since)
        assert after["events"] == events[n:]
        for limit in range(1, 4):
            first = await node.e_audit(alice, action="list", since_seq=since, limit=limit)
            assert first["events"] == events[n : n + limit]
    beyond = await node.e_audit(alice, action="list", since_seq=10_000)
    assert (beyond["events"], beyond["covered_seq"]) == ([], 10_000)


@pytest.mark.asyncio
async def test_events_about_what_the_caller_cannot_read_are_left_out(
    node: Node, history: dict[str, Any]
) -> None:
    h = history
    subjects = {
        name: [e["subject"] for e in await every_event(node, h[name])]
        for name in ("alice", "bob", "root", "olga")
    }
    team_public = [h["a1"], h["a2"], h["a1"], h["a1"], h["b_public"]]
    assert subjects["alice"] == [
        h["a1"],
        h["a2"],
        h["a1"],
        h["a1"],
        h["b_public"],
        h["episode"],
        h["synced"],
        h["a3"],
    ]
    # Bob reads his private SR, not alice's forgotten episode.
    assert subjects["bob"] == [
        h["a1"],
        h["b_private"],
        h["a2"],
        h["a1"],
        h["a1"],
        h["b_public"],
        h["synced"],
        h["a3"],
    ]
    assert h["o1"] not in subjects["alice"] + subjects["bob"] + subjects["root"]
    # The workspace's admin reads everything of the workspace, and the node's own events.
    assert [s for s in subjects["root"] if s is not None] == [
        h["a1"],
        h["b_private"],
        h["a2"],
        h["a1"],
        h["a1"],
        h["b_public"],
        h["episode"],
        h["synced"],
        h["a3"],
    ]
    assert subjects["olga"].count(h["o1"]) == 1
    assert not set(team_public) & set(subjects["olga"])
    # The synced entry's event names the entry.
    synced = [e for e in await every_event(node, h["alice"]) if e["subject"] == h["synced"]]
    assert [(e["event"], e["entry_id"]) for e in synced] == [("sr_synced", h["synced_entry"])]


@pytest.mark.asyncio
async def test_node_events_only_for_admins(node: Node, history: dict[str, Any]) -> None:
    h = history
    for name in ("alice", "bob"):
        events = await every_event(node, h[name])
        assert all(e["subject"] is not None for e in events)
        assert {e["event"] for e in events} <= {
            "sr_written",
            "sr_synced",
            "sr_deleted",
            "sr_undeleted",
            "episode_forgotten",
        }
    for name in ("root", "olga"):
        node_events = [e for e in await every_event(node, h[name]) if e["subject"] is None]
        # Two bad entries in one interval: one rate-limited event that counts both.
        assert [e["event"] for e in node_events] == ["entry_rejected"]
        assert node_events[0]["detail"] == {
            "source": "peer-b",
            "count": 1,
            "reason": "entry belongs to another mesh",
        }
    # An entry from beyond the allowed clock skew: a clock_skew event, for admins only.
    foreign = ForeignWriter(node.info.mesh, seed=b"\x05" * 32)
    await admit(node, foreign)
    far = foreign.next(
        "sr.put",
        sr_payload("00000000-0000-7000-8000-000000000009", title="f"),
        hlc=Hlc(node.wall() + 3_600_000, 0),
    )
    await node.receive([far], source="peer-c")
    assert "clock_skew" not in {e["event"] for e in await every_event(node, h["alice"])}
    skew = [e for e in await every_event(node, h["root"]) if e["event"] == "clock_skew"]
    assert [(e["subject"], e["entry_id"]) for e in skew] == [(None, far.id.hex())]


# -- paging with covered_seq -------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("limit", [1, 2, 3, 5, 1000])
async def test_covered_seq_pages_through_everything_exactly_once(
    node: Node, history: dict[str, Any], limit: int
) -> None:
    for name in ("alice", "bob", "root", "olga"):
        caller = history[name]
        whole = await every_event(node, caller)
        assert whole
        assert await page_through(node, caller, limit) == whole
    # After the caller's last event, an answer covers the rest of the feed (hidden events
    # included), so a consumer does not scan it again.
    alice = history["alice"]
    events = await every_event(node, alice)
    reader = node.reader()
    top = await reader.max_audit_seq()
    last = await node.e_audit(alice, action="list", since_seq=events[-1]["seq"], limit=limit)
    assert (last["events"], last["covered_seq"]) == ([], top)


@pytest.mark.asyncio
async def test_a_consumer_picks_up_where_it_left_off(
    node: Node, wall: Wall, history: dict[str, Any]
) -> None:
    alice = history["alice"]
    first = await node.e_audit(alice, action="list", since_seq=0)
    wall.now += 1000
    written = await node.e_write(alice, title="after", text="x")
    nxt = await node.e_audit(alice, action="list", since_seq=first["covered_seq"])
    assert [(e["event"], e["subject"], e["entry_id"]) for e in nxt["events"]] == [
        ("sr_written", written["sr_id"], written["entry_id"])
    ]
    again = await node.e_audit(alice, action="list", since_seq=nxt["covered_seq"])
    assert again["events"] == []


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("args", "text"),
    [
        ({"since_seq": -1}, SINCE_SEQ),
        ({"since_seq": "3"}, SINCE_SEQ),
        ({"since_seq": 1.0}, SINCE_SEQ),
        ({"since_seq": True}, SINCE_SEQ),
        ({"since_seq": 1 << 63}, SINCE_SEQ),
        ({"limit": 0}, "invalid limit: must be an integer from 1 to 1000"),
        ({"limit": 1001}, "invalid limit: must be an integer from 1 to 1000"),
        ({"limit": "10"}, "invalid limit: must be an integer from 1 to 1000"),
        ({"limit": False}, "invalid limit: must be an integer from 1 to 1000"),
        ({"action": "tail"}, "invalid action: e_audit knows only list, not 'tail'"),
        ({"action": "LIST"}, "invalid action: e_audit knows only list, not 'LIST'"),
        ({"action": None}, "invalid action: e_audit knows only list, not None"),
        ({"cursor": 3}, "e_audit does not take cursor"),
        ({"since": "2026-01-01", "offset": 1}, "e_audit does not take offset, since"),
    ],
)
async def test_invalid_calls_are_refused_and_store_nothing(
    node: Node, history: dict[str, Any], args: dict[str, Any], text: str
) -> None:
    before = await stored(node)
    with pytest.raises(Refusal) as info:
        await node.e_audit(history["alice"], **({"action": "list"} | args))
    assert info.value.text == text
    assert await stored(node) == before


@pytest.mark.asyncio
async def test_defaults_and_scope(node: Node, history: dict[str, Any], make_caller: Any) -> None:
    alice = history["alice"]
    assert await node.e_audit(alice) == await node.e_audit(
        alice, action="list", since_seq=0, limit=100
    )
    writer = await make_caller("wendy", "team", ("write:workspace",))
    before = await stored(node)
    with pytest.raises(Forbidden):
        await node.e_audit(writer, action="list")
    assert await stored(node) == before
