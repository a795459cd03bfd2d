"""Episode reads: work_episode_chain and work_episodes (docs/tools/work_episode_chain.md,
docs/tools/episodes.md).

The reader contract at every hop (forgotten, expired, another caller's, another vault's, not
yet come: the walk stops there and the last episode shown has ``prev_id: null``), ``k`` and
``truncated``, cycles, the response formats and their config default, hidden starts answering
exactly as unknown ones, ``prev_id`` across a restart, forget winning over any later arrival,
and amendments from the future.  test_episode_read_refusals.py holds the refusals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.node import Node
from protocol.clock import Hlc
from protocol.timefmt import format_instant
from tests.node.episode_helpers import (
    NOW,
    UNKNOWN,
    about,
    eid,
    listed,
    receive,
    record,
    record_ids,
    unavailable,
    walk,
)
from tests.node.helpers import ForeignWriter, Wall, admit, refused, stored

SECOND, MINUTE, HOUR = 1000, 60_000, 3_600_000
RW = ("read:workspace", "write:workspace")
# The chain[] fields, in the specification's order (docs/tools/work_episode_chain.md).
CHAIN_FIELDS = [
    "id",
    "ts",
    "vault",
    "session_id",
    "caller",
    "channel",
    "episode_type",
    "task_result",
    "verdict_at",
    "tool",
    "status",
    "error_code",
    "duration_ms",
    "result_size",
    "summary",
    "tags",
    "trust",
    "eligibility",
    "blocked",
    "prev_id",
]
# What concise keeps of an episode with every field set.
CONCISE_FIELDS = [
    "id",
    "ts",
    "status",
    "eligibility",
    "episode_type",
    "tool",
    "task_result",
    "verdict_at",
    "error_code",
    "summary",
    "tags",
    "prev_id",
]


# -- the reader contract at every hop ----------------------------------------------------------


@pytest.mark.asyncio
async def test_a_forgotten_hop_ends_the_chain_before_it(node, make_caller):
    alice = await make_caller()
    e1, e2, e3, e4, e5 = await record_ids(node, alice, 5)
    assert await walk(node, alice, e5) == ([e5, e4, e3, e2, e1], False)
    await node.work_forget(alice, id=e3)

    answer = await node.work_episode_chain(alice, id=e5)
    assert [e["id"] for e in answer["chain"]] == [e5, e4]
    assert [e["prev_id"] for e in answer["chain"]] == [e4, None]  # not e3, nor e2 past it
    assert answer["truncated"] is False
    assert await walk(node, alice, e5, k=1) == ([e5], True)
    assert await walk(node, alice, e5, k=2) == ([e5, e4], False)  # the next hop fails
    assert await walk(node, alice, e2) == ([e2, e1], False)
    assert await node.work_episode_chain(alice, id=e3) == unavailable(e3)
    assert await listed(node, alice) == [e5, e4, e2, e1]


@pytest.mark.asyncio
async def test_an_expired_hop_ends_the_chain_from_its_expiry_on(node, make_caller, wall):
    alice = await make_caller()
    e1 = (await node.work_record(alice, summary="1"))["id"]
    e2 = (
        await node.work_record(
            alice, summary="2", expires_at=format_instant(NOW + 2 * SECOND), tags=["ops"]
        )
    )["id"]
    e3 = (await node.work_record(alice, summary="3", expires_at="2027-01-01"))["id"]
    e4 = (await node.work_record(alice, summary="4"))["id"]
    wall.now = NOW + 2 * SECOND - 1
    assert await walk(node, alice, e4) == ([e4, e3, e2, e1], False)
    assert await listed(node, alice, tags=["ops"]) == [e2]

    wall.now = NOW + 2 * SECOND  # expires_at is the first moment it is gone
    answer = await node.work_episode_chain(alice, id=e4)
    assert [(e["id"], e["prev_id"]) for e in answer["chain"]] == [(e4, e3), (e3, None)]
    assert answer["truncated"] is False
    assert await walk(node, alice, e4, k=2) == ([e4, e3], False)
    assert await node.work_episode_chain(alice, id=e2) == unavailable(e2)
    assert await walk(node, alice, e1) == ([e1], False)
    assert await listed(node, alice) == [e4, e3, e1]
    assert await listed(node, alice, tags=["ops"]) == []


@pytest.mark.asyncio
async def test_an_episode_recorded_already_expired_never_surfaces(node, make_caller):
    alice = await make_caller()
    e1 = (await node.work_record(alice, summary="1"))["id"]
    e2 = (await node.work_record(alice, summary="2", expires_at="2026-01-01"))["id"]
    e3 = (await node.work_record(alice, summary="3"))["id"]
    assert await walk(node, alice, e3) == ([e3], False)
    assert (await node.work_episode_chain(alice, id=e3))["chain"][0]["prev_id"] is None
    assert await node.work_episode_chain(alice, id=e2) == unavailable(e2)
    assert await listed(node, alice) == [e3, e1]


@pytest.mark.asyncio
async def test_another_callers_hop_ends_the_chain_unless_an_admin_asks_for_any(
    node, make_caller, foreign
):
    alice = await make_caller()
    bob = await make_caller("bob")
    root = await make_caller("root", "team", ("admin:workspace",))
    elsewhere = await make_caller("root", "other", ("admin:workspace",))
    b1, b2, a1, a2, a3 = eid(1), eid(2), eid(3), eid(4), eid(5)
    await receive(
        node,
        [
            foreign.next("episode.record", record(b1, caller="bob")),
            foreign.next("episode.record", record(b2, caller="bob", prev=b1)),
            foreign.next("episode.record", record(a1, prev=b2)),  # a peer linked across callers
            foreign.next("episode.record", record(a2, prev=a1)),
            foreign.next("episode.record", record(a3, prev=a2)),
        ],
    )

    answer = await node.work_episode_chain(alice, id=a3)
    assert [(e["id"], e["prev_id"]) for e in answer["chain"]] == [
        (a3, a2),
        (a2, a1),
        (a1, None),
    ]
    assert answer["truncated"] is False
    assert await walk(node, alice, a3, k=3) == ([a3, a2, a1], False)
    assert await walk(node, bob, b2) == ([b2, b1], False)
    for hidden in (b1, b2):
        assert await node.work_episode_chain(alice, id=hidden) == unavailable(hidden)
    assert await node.work_episode_chain(bob, id=a3) == unavailable(a3)
    assert await listed(node, alice) == [a3, a2, a1]

    # An admin who asks for any caller walks across callers within the vault.
    answer = await node.work_episode_chain(root, id=a3, any_caller=True)
    assert [e["id"] for e in answer["chain"]] == [a3, a2, a1, b2, b1]
    assert answer["chain"][2]["prev_id"] == b2
    assert [e["caller"] for e in answer["chain"]] == ["alice"] * 3 + ["bob"] * 2
    assert await walk(node, root, a3, any_caller=True, k=3) == ([a3, a2, a1], True)
    assert await listed(node, root, any_caller=True) == [a3, a2, a1, b2, b1]
    # Without any_caller an admin reads its own episodes only; another vault's admin nothing.
    assert await node.work_episode_chain(root, id=a3) == unavailable(a3)
    assert await listed(node, root) == []
    assert await node.work_episode_chain(elsewhere, id=a3, any_caller=True) == unavailable(a3)
    assert await listed(node, elsewhere, any_caller=True) == []


@pytest.mark.asyncio
async def test_a_prev_id_naming_a_hidden_or_unknown_episode_shows_null(node, make_caller, foreign):
    alice = await make_caller()
    root = await make_caller("root", "team", ("admin:workspace",))
    gone, kept = await record_ids(node, alice, 2)
    await node.work_forget(alice, id=gone)
    bobs, elsewhere, orphan, to_bob, to_other = eid(1), eid(2), eid(3), eid(4), eid(5)
    await receive(
        node,
        [
            foreign.next("episode.record", record(bobs, caller="bob")),
            foreign.next("episode.record", record(elsewhere, vault="other")),
            foreign.next("episode.record", record(orphan, prev=UNKNOWN)),
            foreign.next("episode.record", record(to_bob, prev=bobs)),
            foreign.next("episode.record", record(to_other, prev=elsewhere)),
        ],
    )
    prevs = {}
    for start in (kept, orphan, to_bob, to_other):
        answer = await node.work_episode_chain(alice, id=start)
        assert [e["id"] for e in answer["chain"]] == [start]
        prevs[start] = answer["chain"][0]["prev_id"]
    assert prevs == dict.fromkeys((kept, orphan, to_bob, to_other))
    page = (await node.work_episodes(alice))["episodes"]
    assert {e["id"]: e["prev_id"] for e in page} == prevs
    # An admin asking for any caller reads bob's episode: to_bob's prev_id shows.
    answer = await node.work_episode_chain(root, id=to_bob, any_caller=True)
    assert [(e["id"], e["prev_id"]) for e in answer["chain"]] == [(to_bob, bobs), (bobs, None)]
    page = (await node.work_episodes(root, any_caller=True))["episodes"]
    assert {e["id"]: e["prev_id"] for e in page}[to_bob] == bobs


@pytest.mark.asyncio
async def test_a_cycle_ends_the_walk_at_its_first_revisit(node, make_caller, foreign):
    alice = await make_caller()
    a, b, c, d, s = eid(1), eid(2), eid(3), eid(4), eid(5)
    await receive(
        node,
        [
            foreign.next("episode.record", record(a, prev=b)),
            foreign.next("episode.record", record(b, prev=a)),
            foreign.next("episode.record", record(c, prev=a)),  # into the cycle
            foreign.next("episode.record", record(s, prev=s)),  # its own predecessor
            foreign.next("episode.record", record(d, prev=c)),
        ],
    )
    for k in (2, 3, 50, 200):
        assert await walk(node, alice, a, k=k) == ([a, b], False)
        assert await walk(node, alice, b, k=k) == ([b, a], False)
    assert await walk(node, alice, a, k=1) == ([a], True)
    assert await walk(node, alice, d) == ([d, c, a, b], False)
    assert await walk(node, alice, d, k=3) == ([d, c, a], True)
    assert await walk(node, alice, d, k=4) == ([d, c, a, b], False)
    assert await walk(node, alice, s) == ([s], False)
    assert await walk(node, alice, s, k=1) == ([s], False)
    answer = await node.work_episode_chain(alice, id=a)
    assert answer["chain"][-1]["prev_id"] == a  # it names an episode that is shown


@pytest.mark.asyncio
async def test_each_hop_follows_prev_id_whatever_the_times(node, make_caller, foreign):
    """A walk reads the caller's episodes in time order first; a chain that does not run
    through them in that order (two of one caller's chains interleaved, as when it records on
    two nodes, or a prev_id naming a later episode) is walked by its links all the same."""
    alice = await make_caller()
    a, b = [eid(i) for i in range(1, 151)], [eid(i) for i in range(201, 351)]
    x, y, z = eid(401), eid(402), eid(403)
    at = iter(range(NOW - 10_000, NOW))
    entries = []
    for i in range(150):
        for chain in (a, b):
            payload = record(chain[i], prev=chain[i - 1] if i else None)
            entries.append(foreign.next("episode.record", payload, hlc=Hlc(next(at), 0)))
    for episode_id, prev in ((z, None), (x, y), (y, z)):  # y is recorded after x
        payload = record(episode_id, prev=prev)
        entries.append(foreign.next("episode.record", payload, hlc=Hlc(next(at), 0)))
    await receive(node, entries)
    for k in (1, 10, 149, 150, 200):
        assert await walk(node, alice, a[-1], k=k) == (a[::-1][:k], k < 150)
        assert await walk(node, alice, b[-1], k=k) == (b[::-1][:k], k < 150)
    assert await walk(node, alice, b[5], k=5) == (b[5:0:-1], True)
    assert await walk(node, alice, x) == ([x, y, z], False)
    assert await walk(node, alice, x, k=1) == ([x], True)


# -- k and truncated ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_k_bounds_the_walk_and_truncated_says_a_passing_hop_remains(node, make_caller):
    alice = await make_caller()
    ids = await record_ids(node, alice, 205)
    newest_first = ids[::-1]
    assert await walk(node, alice, ids[-1]) == (newest_first[:50], True)  # k defaults to 50
    for k in (1, 50, 200):
        assert await walk(node, alice, ids[-1], k=k) == (newest_first[:k], True)
    assert await walk(node, alice, ids[199], k=200) == (newest_first[5:], False)
    assert await walk(node, alice, ids[200], k=200) == (newest_first[4:204], True)
    assert await walk(node, alice, ids[49], k=None) == (newest_first[155:], False)
    assert await walk(node, alice, ids[4], k=5) == (newest_first[200:], False)
    assert await walk(node, alice, ids[0], k=1) == ([ids[0]], False)
    answer = await node.work_episode_chain(alice, id=ids[-1], k=200)
    assert [e["prev_id"] for e in answer["chain"]] == newest_first[1:201]


# -- response formats --------------------------------------------------------------------------

FULL = {
    "summary": "ran the deploy",
    "tool": "shell",
    "error_code": "E42",
    "duration_ms": 1200,
    "result_size": 7,
    "trust": 0.75,
    "task_result": 1,
    "verdict_at": "2026-10-09",
    "session_id": "s-1",
    "tags": ["ops"],
    "channel": "cli",
    "episode_type": "deploy",
    "status": "failed",
    "eligibility": "held",
}


@pytest.mark.asyncio
async def test_detailed_shows_the_seeds_fields_in_the_seeds_order(node, make_caller):
    alice = await make_caller()
    first = (await node.work_record(alice))["id"]
    second = (await node.work_record(alice, **FULL))["id"]
    answer = await node.work_episode_chain(alice, id=second, response_format="detailed")
    assert list(answer) == ["available", "chain", "truncated"]
    for episode in answer["chain"]:
        assert list(episode) == CHAIN_FIELDS
    assert answer["chain"][0] == {
        "id": second,
        "ts": NOW,
        "vault": "team",
        "session_id": "s-1",
        "caller": "alice",
        "channel": "cli",
        "episode_type": "deploy",
        "task_result": 1,
        "verdict_at": 1_791_504_000_000,
        "tool": "shell",
        "status": "failed",
        "error_code": "E42",
        "duration_ms": 1200,
        "result_size": 7,
        "summary": "ran the deploy",
        "tags": ["ops"],
        "trust": 0.75,
        "eligibility": "held",
        "blocked": False,
        "prev_id": first,
    }
    assert answer["chain"][1] == {
        "id": first,
        "ts": NOW,
        "vault": "team",
        "session_id": None,
        "caller": "alice",
        "channel": "api",
        "episode_type": "task",
        "task_result": None,
        "verdict_at": None,
        "tool": None,
        "status": "recorded",
        "error_code": None,
        "duration_ms": None,
        "result_size": None,
        "summary": None,
        "tags": [],
        "trust": None,
        "eligibility": "eligible",
        "blocked": False,
        "prev_id": None,
    }
    page = await node.work_episodes(alice, response_format="detailed")
    assert page["episodes"] == answer["chain"]


@pytest.mark.asyncio
async def test_concise_keeps_the_high_signal_fields_and_truncated(node, make_caller):
    alice = await make_caller()
    first = (await node.work_record(alice))["id"]
    second = (await node.work_record(alice, **FULL))["id"]
    detailed = await node.work_episode_chain(alice, id=second)
    concise = await node.work_episode_chain(alice, id=second, response_format="concise")
    assert list(concise) == ["available", "chain", "truncated"]
    assert list(concise["chain"][0]) == CONCISE_FIELDS
    assert list(concise["chain"][1]) == ["id", "ts", "status", "eligibility", "episode_type"]
    for short, full in zip(concise["chain"], detailed["chain"], strict=True):
        assert short == {k: full[k] for k in short}
    assert concise["truncated"] is False
    assert (await node.work_episode_chain(alice, id=second, k=1, response_format="concise"))[
        "truncated"
    ] is True
    miss = await node.work_episode_chain(alice, id=UNKNOWN, response_format="concise")
    assert miss == unavailable(UNKNOWN)  # the message is never trimmed
    # concise returns each episode as work_episodes does
    page = await node.work_episodes(alice, response_format="concise")
    assert page["episodes"] == concise["chain"]
    assert [e["id"] for e in page["episodes"]] == [second, first]


@pytest.mark.asyncio
async def test_verbosity_is_an_alias_and_must_agree(node, make_caller):
    alice = await make_caller()
    start = (await node.work_record(alice, **FULL))["id"]
    for tool, args in (("work_episode_chain", {"id": start}), ("work_episodes", {})):
        call = getattr(node, tool)
        concise = await call(alice, **args, response_format="concise")
        detailed = await call(alice, **args, response_format="detailed")
        assert concise != detailed
        assert await call(alice, **args) == detailed  # the shipped default
        assert await call(alice, **args, verbosity="terse") == concise
        assert await call(alice, **args, verbosity="full") == detailed
        assert await call(alice, **args, verbosity="terse", response_format="concise") == concise
        assert await call(alice, **args, verbosity="full", response_format="detailed") == detailed
        for fmt, legacy in (("concise", "full"), ("detailed", "terse")):
            text = await refused(node, tool, alice, **args, response_format=fmt, verbosity=legacy)
            assert text == "response_format and verbosity disagree; send response_format alone"


@pytest.mark.asyncio
async def test_the_configured_default_format_applies_when_omitted(node_dir: Path, wall: Wall):
    (node_dir / "config.toml").write_text('[tools.defaults]\nresponseFormat = "concise"\n')
    async with Node.open(node_dir, wall=wall) as node:
        alice = await node.authenticate((await node.create_token("alice", "team", RW)).token)
        await node.work_record(alice)
        start = (await node.work_record(alice, **FULL))["id"]
        chain = await node.work_episode_chain(alice, id=start)
        assert list(chain["chain"][0]) == CONCISE_FIELDS
        assert chain == await node.work_episode_chain(alice, id=start, verbosity="terse")
        detailed = await node.work_episode_chain(alice, id=start, response_format="detailed")
        assert list(detailed["chain"][0]) == CHAIN_FIELDS
        assert detailed == await node.work_episode_chain(alice, id=start, verbosity="full")
        page = await node.work_episodes(alice)
        assert page["episodes"] == chain["chain"]
        assert list((await node.work_episodes(alice, verbosity="full"))["episodes"][0]) == (
            CHAIN_FIELDS
        )


# -- amendments --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_amended_episode_shows_its_amended_fields_in_both_tools(node, make_caller):
    alice = await make_caller()
    root = await make_caller("root", "team", ("admin:workspace",))
    first = (await node.work_record(alice, summary="one", trust=0.1))["id"]
    second = (await node.work_record(alice, summary="two", tool="shell"))["id"]
    await node.work_result(
        alice,
        id=first,
        status="done",
        task_result=0.5,
        trust=0.25,
        verdict_at="2026-10-09T08:00:00Z",
        eligibility="ineligible",
    )
    await node.work_result(root, id=first, status="reviewed")  # the same field again
    await node.work_result(alice, id=second, task_result=-1)
    amended = {
        "status": "reviewed",
        "task_result": 0.5,
        "trust": 0.25,
        "verdict_at": 1_791_532_800_000,
        "eligibility": "ineligible",
    }
    chain = (await node.work_episode_chain(alice, id=second))["chain"]
    assert [e["id"] for e in chain] == [second, first]
    assert {k: chain[1][k] for k in amended} == amended
    assert (chain[1]["summary"], chain[0]["task_result"], chain[0]["status"]) == (
        "one",
        -1,
        "recorded",
    )
    page = (await node.work_episodes(alice))["episodes"]
    assert page == chain
    assert await listed(node, alice, status="reviewed") == [first]
    assert await listed(node, alice, status="done") == []
    assert await listed(node, alice, status="recorded", tool="shell") == [second]
    concise = (await node.work_episode_chain(alice, id=first, verbosity="terse"))["chain"][0]
    assert {k: concise[k] for k in ("status", "task_result", "verdict_at")} == {
        k: amended[k] for k in ("status", "task_result", "verdict_at")
    }


# -- hidden starts answer as unknown ones ------------------------------------------------------


@pytest.mark.asyncio
async def test_hidden_starts_answer_exactly_as_unknown_ones(node, make_caller, foreign, wall):
    alice = await make_caller()
    root = await make_caller("root", "team", ("admin:workspace",))
    bob = await make_caller("bob")
    alice_elsewhere = await make_caller("alice", "other")
    mine = (await node.work_record(alice, summary="mine"))["id"]
    bobs = (await node.work_record(bob, summary="bob's"))["id"]
    forgotten = (await node.work_record(alice, summary="gone"))["id"]
    await node.work_forget(alice, id=forgotten)
    expired = (await node.work_record(alice, summary="old", expires_at="2026-09-01"))["id"]
    other_vault = (await node.work_record(alice_elsewhere, summary="elsewhere"))["id"]
    future = eid(77)  # written an hour ahead, beyond the allowed skew: not yet come
    await receive(
        node, [foreign.next("episode.record", record(future, prev=mine), hlc=Hlc(NOW + HOUR, 0))]
    )
    reader = node.reader()
    assert await reader.count("episodes") == 6

    hidden = {
        alice: [bobs, forgotten, expired, other_vault, future],
        root: [forgotten, expired, other_vault, future],
    }
    variants: list[dict[str, Any]] = [
        {},
        {"k": 1},
        {"k": 200},
        {"response_format": "concise"},
        {"verbosity": "full"},
    ]
    for who, ids in hidden.items():
        extra = {"any_caller": True} if who is root else {}
        for args in variants:
            base = json.dumps(await node.work_episode_chain(who, id=UNKNOWN, **args, **extra))
            assert json.loads(base) == unavailable(UNKNOWN)
            for start in [*ids, "nope", "x" * 256]:
                answer = await node.work_episode_chain(who, id=start, **args, **extra)
                assert json.dumps(answer) == base.replace(UNKNOWN, start), (start, args)
    assert await walk(node, root, bobs, any_caller=True) == ([bobs], False)  # a visible start
    wall.now = NOW + HOUR  # the future record's time comes: it surfaces, linked to mine
    assert await walk(node, alice, future) == ([future, mine], False)


# -- prev_id across a restart ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_prev_id_and_the_chain_survive_a_restart(node_dir: Path, wall: Wall):
    async with Node.open(node_dir, wall=wall) as first:
        token = (await first.create_token("alice", "team", RW)).token
        alice = await first.authenticate(token)
        one, two = await record_ids(first, alice, 2)
    wall.now += SECOND
    async with Node.open(node_dir, wall=wall) as again:
        alice = await again.authenticate(token)
        three = await again.work_record(alice, summary="3")
        assert three["prev_id"] == two
        assert await walk(again, alice, three["id"]) == ([three["id"], two, one], False)
        chain = (await again.work_episode_chain(alice, id=three["id"]))["chain"]
        assert [e["prev_id"] for e in chain] == [two, one, None]
        assert await listed(again, alice) == [three["id"], two, one]


# -- forget wins -------------------------------------------------------------------------------


async def assert_never_surfaces(node: Node, who: Caller, episode_id: str) -> None:
    assert await node.work_episode_chain(who, id=episode_id) == unavailable(episode_id)
    assert episode_id not in await listed(node, who)
    reader = node.reader()
    assert await reader.fetchall("SELECT blocked FROM episodes WHERE id = ?", (episode_id,)) == [
        (1,)
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("forget_written", ["before", "after"])
async def test_a_forget_arriving_before_its_record_wins(node, make_caller, foreign, forget_written):
    alice = await make_caller()
    peer = ForeignWriter(node.info.mesh, seed=b"\x08" * 32)
    await admit(node, peer)
    kept, gone = eid(1), eid(2)
    wall_of = {"before": NOW + 1, "after": NOW + 50}[forget_written]
    forget = peer.next("episode.forget", about(gone), hlc=Hlc(wall_of, 0))
    await receive(node, [forget])
    await receive(
        node,
        [
            foreign.next("episode.record", record(kept), hlc=Hlc(NOW + 10, 0)),
            foreign.next("episode.record", record(gone, prev=kept), hlc=Hlc(NOW + 20, 0)),
        ],
    )
    await assert_never_surfaces(node, alice, gone)
    assert await walk(node, alice, kept) == ([kept], False)
    assert (await node.work_record(alice, summary="next"))["prev_id"] == kept


@pytest.mark.asyncio
@pytest.mark.parametrize("batch", ["one writer, one batch", "two writers, one batch"])
async def test_a_forget_before_its_record_in_one_batch_wins(node, make_caller, foreign, batch):
    alice = await make_caller()
    gone = eid(3)
    if batch == "one writer, one batch":
        entries = [
            foreign.next("episode.forget", about(gone)),
            foreign.next("episode.record", record(gone)),
        ]
    else:
        peer = ForeignWriter(node.info.mesh, seed=b"\x08" * 32)
        await admit(node, peer)
        entries = [
            peer.next("episode.forget", about(gone), hlc=Hlc(NOW + 30, 0)),
            foreign.next("episode.record", record(gone)),
        ]
    await receive(node, entries)
    await assert_never_surfaces(node, alice, gone)


@pytest.mark.asyncio
async def test_a_record_delivered_again_after_its_forget_stays_forgotten(
    node, make_caller, foreign
):
    alice = await make_caller()
    peer = ForeignWriter(node.info.mesh, seed=b"\x08" * 32)
    await admit(node, peer)
    gone = eid(4)
    entry = foreign.next("episode.record", record(gone, summary="once"))
    await receive(node, [entry])
    assert await walk(node, alice, gone) == ([gone], False)
    await node.work_forget(alice, id=gone)
    before = await stored(node)
    report = await node.receive([entry], source="peer-2")  # the same entry once more
    assert report.stored == 0
    assert {k: v for k, v in (await stored(node)).items() if k != "audit"} == {
        k: v for k, v in before.items() if k != "audit"
    }
    await assert_never_surfaces(node, alice, gone)
    # Another record of the same id, arriving later from another writer, does not revive it.
    await receive(node, [peer.next("episode.record", record(gone, summary="again"))])
    await assert_never_surfaces(node, alice, gone)


@pytest.mark.asyncio
async def test_a_forget_from_another_vault_blocks_nothing(node, make_caller, foreign):
    alice = await make_caller()
    peer = ForeignWriter(node.info.mesh, seed=b"\x08" * 32)
    await admit(node, peer)
    early, late = eid(5), eid(6)
    await receive(node, [peer.next("episode.forget", about(early, vault="other"))])
    await receive(
        node,
        [
            foreign.next("episode.record", record(early)),
            foreign.next("episode.record", record(late, prev=early)),
        ],
    )
    await receive(node, [peer.next("episode.forget", about(late, vault="other"))])
    assert await walk(node, alice, late) == ([late, early], False)
    assert await listed(node, alice) == [late, early]
    # ... while the same forget from the episode's own vault does.
    await receive(node, [peer.next("episode.forget", about(early))])
    answer = await node.work_episode_chain(alice, id=late)
    assert [(e["id"], e["prev_id"]) for e in answer["chain"]] == [(late, None)]


@pytest.mark.asyncio
async def test_a_record_in_another_vault_cannot_take_over_an_episode(node, make_caller, foreign):
    """An episode is its vault's: a record reusing its id in another workspace, stamped
    earlier (so it comes first in the fold's order), leaves it as it was."""
    alice, olga = await make_caller(), await make_caller("olga", "other")
    peer = ForeignWriter(node.info.mesh, seed=b"\x08" * 32, wall=foreign.wall - 60_000)
    await admit(node, peer)
    taken = eid(7)
    await receive(node, [foreign.next("episode.record", record(taken, summary="alice's"))])
    olgas = record(taken, vault="other", caller="olga", summary="olga's")
    await receive(node, [peer.next("episode.record", olgas)])
    await receive(node, [peer.next("episode.amend", about(taken, vault="other", status="x"))])
    mine = (await node.work_episode_chain(alice, id=taken))["chain"]
    theirs = (await node.work_episode_chain(olga, id=taken))["chain"]
    assert [(e["summary"], e["status"], e["vault"]) for e in mine] == [
        ("alice's", "recorded", "team")
    ]
    assert [(e["summary"], e["status"], e["vault"]) for e in theirs] == [("olga's", "x", "other")]
    assert (await node.work_forget(olga, id=taken))["forgotten"] is True
    assert await walk(node, alice, taken) == ([taken], False)


# -- amendments from the future ----------------------------------------------------------------


async def status_of(node: Node, who: Caller, episode_id: str) -> str:
    chain = (await node.work_episode_chain(who, id=episode_id))["chain"]
    listed_status = {e["id"]: e["status"] for e in (await node.work_episodes(who))["episodes"]}
    assert chain[0]["status"] == listed_status[episode_id]
    return str(chain[0]["status"])


@pytest.mark.asyncio
async def test_an_amendment_from_beyond_the_skew_waits_for_its_time(
    node, make_caller, foreign, wall
):
    alice = await make_caller()
    episode = (await node.work_record(alice, summary="s"))["id"]
    ahead = NOW + 10 * MINUTE  # the allowed skew is five minutes
    await receive(
        node,
        [
            foreign.next("episode.amend", about(episode, status="later"), hlc=Hlc(ahead, 0)),
            foreign.next("episode.amend", about(episode, status="now", trust=0.5)),
        ],
    )
    reader = node.reader()
    assert await status_of(node, alice, episode) == "now"
    assert await reader.count("episode_due") == 1
    wall.now = ahead - 1
    assert await status_of(node, alice, episode) == "now"
    assert await listed(node, alice, status="later") == []
    wall.now = ahead
    assert await status_of(node, alice, episode) == "later"
    assert await listed(node, alice, status="later") == [episode]
    assert (await node.work_episode_chain(alice, id=episode))["chain"][0]["trust"] == 0.5
    assert await reader.count("episode_due") == 0


@pytest.mark.asyncio
async def test_an_amendment_within_the_skew_applies_when_the_clock_follows_it(
    node, make_caller, foreign, wall
):
    """Within the allowed skew a received entry moves this node's clock to its time
    (docs/entries.md §Clocks and the three times), so the clock has reached the amendment as
    soon as it is stored."""
    alice = await make_caller()
    episode = (await node.work_record(alice, summary="s"))["id"]
    ahead = NOW + 2 * MINUTE
    await receive(
        node, [foreign.next("episode.amend", about(episode, status="soon"), hlc=Hlc(ahead, 0))]
    )
    assert wall.now == NOW
    assert node.store.now_ms() == ahead
    assert await status_of(node, alice, episode) == "soon"
    later = await node.work_record(alice, summary="after")
    assert later["ts"] >= ahead


# -- refusals ----------------------------------------------------------------------------------
