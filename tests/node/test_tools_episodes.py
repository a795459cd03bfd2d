"""Episode write tools (docs/tools/episodes.md): work_record, work_result, work_forget.

``prev_id`` links each episode to the same caller's newest non-forgotten one, read from the
store (so it survives restarts and concurrent records chain linearly); an episode the caller
may not touch answers exactly as an unknown one.
"""

from __future__ import annotations

import asyncio
import math
import re
import uuid
from typing import Any

import pytest

from node.errors import Forbidden
from node.node import Node
from protocol.kinds import decode_payload
from tests.node.helpers import refused, stored

UNKNOWN = "00000000-0000-7000-8000-0000000000ee"
NAN = math.nan


async def index_row(node: Node, episode_id: str) -> tuple[Any, ...]:
    reader = node.reader()
    rows = await reader.fetchall(
        "SELECT vault, caller, blocked FROM episodes WHERE id = ?", (episode_id,)
    )
    assert len(rows) == 1
    return tuple(rows[0])


async def last_payload(node: Node, kind: str) -> dict[str, Any]:
    entry = (await node.entries())[-1]
    assert entry.header.kind == kind
    assert entry.payload is not None
    return decode_payload(kind, entry.payload)


def chain_order(results: list[dict[str, Any]]) -> list[str]:
    """The ids of a set of records, walked from the newest along ``prev_id``."""
    by_id = {r["id"]: r for r in results}
    heads = set(by_id) - {r["prev_id"] for r in results}
    assert len(heads) == 1, heads
    walk, at = [], heads.pop()
    while at is not None:
        walk.append(at)
        at = by_id[at]["prev_id"]
    return walk


# -- bad input ---------------------------------------------------------------------------------

BAD_RECORD: list[tuple[dict[str, Any], str]] = [
    ({"bogus": 1}, r"^work_record does not take bogus$"),
    ({"id": UNKNOWN}, r"^work_record does not take id$"),
    ({"prev_id": UNKNOWN}, r"^work_record does not take prev_id$"),
    ({"vault": "other", "caller": "mallory"}, r"^work_record does not take caller, vault$"),
    ({"summary": 5}, r"^invalid summary: must be text$"),
    ({"summary": "x" * 4001}, r"^invalid summary: .*4000"),
    ({"session_id": 12}, r"^invalid session_id: must be text$"),
    ({"session_id": "s" * 129}, r"^invalid session_id: .*128"),
    ({"tool": ["e_write"]}, r"^invalid tool: must be text$"),
    ({"error_code": "e" * 129}, r"^invalid error_code: .*128"),
    ({"channel": ""}, r"^invalid channel: "),
    ({"channel": "c" * 65}, r"^invalid channel: .*64"),
    ({"episode_type": 3}, r"^invalid episode_type: must be text$"),
    ({"status": "s" * 65}, r"^invalid status: .*64"),
    ({"eligibility": True}, r"^invalid eligibility: must be text$"),
    ({"tags": "ops"}, r"^invalid tags: must be a list"),
    ({"tags": False}, r"^invalid tags: must be a list"),
    ({"tags": [f"t{i}" for i in range(65)]}, r"^invalid tags: .*64"),
    ({"tags": ["x" * 65]}, r"^invalid tags\[0\]: .*64"),
    ({"tags": ["ok", None]}, r"^invalid tags\[1\]: must be text$"),
    ({"duration_ms": -1}, r"^invalid duration_ms: must be an integer"),
    ({"duration_ms": 1.5}, r"^invalid duration_ms: must be an integer"),
    ({"duration_ms": True}, r"^invalid duration_ms: must be an integer"),
    ({"duration_ms": "10"}, r"^invalid duration_ms: must be an integer"),
    ({"result_size": 1 << 53}, r"^invalid result_size: must be an integer"),
    ({"trust": 1.5}, r"^invalid trust: must be in \[0, 1\]$"),
    ({"trust": -0.01}, r"^invalid trust: must be in \[0, 1\]$"),
    ({"trust": NAN}, r"^invalid trust: must be a finite number$"),
    ({"trust": math.inf}, r"^invalid trust: must be a finite number$"),
    ({"trust": "0.5"}, r"^invalid trust: must be a finite number$"),
    ({"trust": True}, r"^invalid trust: must be a finite number$"),
    ({"task_result": NAN}, r"^invalid task_result: must be a finite number$"),
    ({"task_result": -math.inf}, r"^invalid task_result: must be a finite number$"),
    ({"task_result": "ok"}, r"^invalid task_result: must be a finite number$"),
    ({"verdict_at": "2026-13-01"}, r"^invalid verdict_at: .*out of range"),
    ({"verdict_at": "yesterday"}, r"^invalid verdict_at: 'yesterday' is not"),
    ({"verdict_at": "2026-10-09T08:00:00"}, r"^invalid verdict_at: .*with an offset"),
    ({"verdict_at": 1_790_000_000_000}, r"^invalid verdict_at: must be an ISO-8601"),
    ({"expires_at": "2026-13-01"}, r"^invalid expires_at: .*out of range"),
    ({"expires_at": "tomorrow"}, r"^invalid expires_at: 'tomorrow' is not"),
    ({"expires_at": "2026-10-09T08:00:00"}, r"^invalid expires_at: .*with an offset"),
    ({"expires_at": "2026-10-09T08:00Z "}, r"^invalid expires_at: "),
    ({"expires_at": NAN}, r"^invalid expires_at: must be an ISO-8601"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("args", "pattern"), BAD_RECORD)
async def test_work_record_refuses_bad_input(node, make_caller, args, pattern):
    alice = await make_caller()
    text = await refused(node, "work_record", alice, **({"summary": "did a thing"} | args))
    assert re.search(pattern, text), text


BAD_RESULT: list[tuple[dict[str, Any], str]] = [
    ({"summary": "late"}, r"^work_result does not take summary$"),
    ({"prev_id": UNKNOWN}, r"^work_result does not take prev_id$"),
    ({"trust": 2}, r"^invalid trust: must be in \[0, 1\]$"),
    ({"trust": NAN}, r"^invalid trust: must be a finite number$"),
    ({"trust": [0.5]}, r"^invalid trust: must be a finite number$"),
    ({"task_result": NAN}, r"^invalid task_result: must be a finite number$"),
    ({"status": ""}, r"^invalid status: "),
    ({"eligibility": 1}, r"^invalid eligibility: must be text$"),
    ({"verdict_at": "2026-13-01"}, r"^invalid verdict_at: .*out of range"),
    ({"verdict_at": "yesterday"}, r"^invalid verdict_at: "),
    ({"verdict_at": "2026-10-09T08:00:00"}, r"^invalid verdict_at: .*with an offset"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("args", "pattern"), BAD_RESULT)
async def test_work_result_refuses_bad_input(node, make_caller, args, pattern):
    alice = await make_caller()
    episode_id = (await node.work_record(alice, summary="s"))["id"]
    text = await refused(node, "work_result", alice, **({"id": episode_id, "trust": 0.5} | args))
    assert re.search(pattern, text), text


@pytest.mark.asyncio
async def test_work_result_needs_a_field(node, make_caller):
    alice = await make_caller()
    episode_id = (await node.work_record(alice, summary="s"))["id"]
    text = await refused(node, "work_result", alice, id=episode_id)
    assert text == (
        "work_result needs at least one of eligibility, status, task_result, trust, verdict_at"
    )


@pytest.mark.asyncio
async def test_work_forget_refuses_other_arguments(node, make_caller):
    alice = await make_caller()
    episode_id = (await node.work_record(alice, summary="s"))["id"]
    text = await refused(node, "work_forget", alice, id=episode_id, reason="oops")
    assert text == "work_forget does not take reason"
    assert await refused(node, "work_forget", alice) == "unknown episode id: None"
    assert await refused(node, "work_forget", alice, id=7) == "unknown episode id: 7"
    assert await refused(node, "work_result", alice, id=7, trust=0.5) == "unknown episode id: 7"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("tool", "args"),
    [("work_record", {"summary": "s"}), ("work_result", {"trust": 0.5}), ("work_forget", {})],
)
async def test_read_only_caller_cannot_write_episodes(node, make_caller, tool, args):
    alice = await make_caller()
    reader = await make_caller("alice", "team", ("read:workspace",))
    episode_id = (await node.work_record(alice, summary="s"))["id"]
    if tool != "work_record":
        args = args | {"id": episode_id}
    before = await stored(node)
    with pytest.raises(Forbidden) as info:
        await getattr(node, tool)(reader, **args)
    assert "write:workspace" in info.value.text
    assert await stored(node) == before


@pytest.mark.asyncio
@pytest.mark.parametrize(("tool", "args"), [("work_result", {"trust": 0.5}), ("work_forget", {})])
async def test_episodes_the_caller_may_not_touch_answer_as_unknown(node, make_caller, tool, args):
    alice = await make_caller()
    bob = await make_caller("bob")
    elsewhere_admin = await make_caller("root", "other", ("admin:workspace",))
    mine = (await node.work_record(alice, summary="alice's"))["id"]
    gone = (await node.work_record(alice, summary="forgotten"))["id"]
    await node.work_forget(alice, id=gone)

    assert await refused(node, tool, alice, id=UNKNOWN, **args) == f"unknown episode id: {UNKNOWN}"
    assert await refused(node, tool, alice, id="nope", **args) == "unknown episode id: nope"
    assert await refused(node, tool, alice, id=gone, **args) == f"unknown episode id: {gone}"
    for other in (bob, elsewhere_admin):
        assert await refused(node, tool, other, id=mine, **args) == f"unknown episode id: {mine}"
    assert (await index_row(node, mine))[2] == 0


# -- recording and chaining --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_work_record_returns_its_id_and_time(node, make_caller, wall):
    alice = await make_caller()
    before = await stored(node)
    result = await node.work_record(
        alice,
        summary="ran the deploy",
        tool="shell",
        duration_ms=1200,
        trust=0.75,
        task_result=1,
        verdict_at="2026-10-09T08:00:00+02:00",
        expires_at="2027-01-01",
        tags=["ops"],
        session_id="s-1",
    )
    assert set(result) == {"id", "prev_id", "ts", "ingest_time"}
    assert result["prev_id"] is None
    parsed = uuid.UUID(result["id"])
    assert (parsed.version, str(parsed)) == (7, result["id"])
    assert result["ts"] == wall.now
    assert result["ingest_time"] == "2026-09-21T14:13:20Z"
    after = await stored(node)
    assert {k: after[k] - before[k] for k in after if after[k] != before[k]} == {
        "headers": 1,
        "payloads": 1,
        "logs": 1,
        "episodes": 1,
        "episode_entries": 1,
    }
    assert await index_row(node, result["id"]) == ("team", "alice", 0)
    payload = await last_payload(node, "episode.record")
    assert payload["id"] == result["id"]
    assert (payload["vault"], payload["caller"], payload["prev_id"]) == ("team", "alice", None)
    assert (payload["channel"], payload["episode_type"], payload["status"]) == (
        "api",
        "task",
        "recorded",
    )
    assert payload["verdict_at"] == 1_791_525_600_000
    assert payload["expires_at"] == 1_798_761_600_000
    assert payload["trust"] == 0.75


@pytest.mark.asyncio
async def test_records_of_one_caller_chain(node, make_caller, wall):
    alice = await make_caller()
    bob = await make_caller("bob")
    alice_elsewhere = await make_caller("alice", "other")
    first = await node.work_record(alice, summary="1")
    bobs = await node.work_record(bob, summary="bob 1")
    wall.now += 5
    second = await node.work_record(alice, summary="2")
    third = await node.work_record(alice, summary="3")
    other = await node.work_record(alice_elsewhere, summary="other 1")
    assert first["prev_id"] is None
    assert second["prev_id"] == first["id"]
    assert third["prev_id"] == second["id"]
    assert bobs["prev_id"] is None  # another principal's chain is separate
    assert other["prev_id"] is None  # ... and so is the same principal's in another workspace
    assert (await node.work_record(bob, summary="bob 2"))["prev_id"] == bobs["id"]
    assert (await last_payload(node, "episode.record"))["prev_id"] == bobs["id"]


@pytest.mark.asyncio
async def test_prev_id_survives_a_restart(node_dir, wall):
    async with Node.open(node_dir, wall=wall) as first:
        token = (await first.create_token("alice", "team", ["write:workspace"])).token
        alice = await first.authenticate(token)
        one = await first.work_record(alice, summary="1")
        two = await first.work_record(alice, summary="2")
    wall.now += 1
    async with Node.open(node_dir, wall=wall) as again:
        alice = await again.authenticate(token)
        three = await again.work_record(alice, summary="3")
        assert three["prev_id"] == two["id"]
        assert two["prev_id"] == one["id"]
        assert (await last_payload(again, "episode.record"))["prev_id"] == two["id"]
    wall.now -= 10_000  # a wall clock that went backwards: the chain still follows the HLC
    async with Node.open(node_dir, wall=wall) as later:
        alice = await later.authenticate(token)
        assert (await later.work_record(alice, summary="4"))["prev_id"] == three["id"]


@pytest.mark.asyncio
async def test_concurrent_records_form_one_linear_chain(node, make_caller):
    alice = await make_caller()
    results = await asyncio.gather(*(node.work_record(alice, summary=f"c{i}") for i in range(20)))
    prevs = [r["prev_id"] for r in results]
    assert prevs.count(None) == 1  # exactly one record found no earlier one
    assert len(set(prevs)) == 20  # every prev_id distinct: no two records claim one parent
    walk = chain_order(results)
    assert len(walk) == 20  # one linear chain through all of them
    # the chain runs in the order the node stamped the records
    hlc_of = {}
    for entry in await node.entries():
        if entry.header.kind == "episode.record":
            assert entry.payload is not None
            hlc_of[decode_payload("episode.record", entry.payload)["id"]] = entry.header.hlc
    assert [hlc_of[i] for i in walk] == sorted(hlc_of.values(), reverse=True)
    # and the next record, written alone, continues from the newest
    assert (await node.work_record(alice, summary="after"))["prev_id"] == walk[0]


@pytest.mark.asyncio
async def test_concurrent_records_of_two_callers_chain_apart(node, make_caller):
    alice = await make_caller()
    bob = await make_caller("bob")
    calls = [
        node.work_record(c, summary=f"{c.principal} {i}") for i in range(10) for c in (alice, bob)
    ]
    results = await asyncio.gather(*calls)
    alices, bobs = results[0::2], results[1::2]
    for mine in (alices, bobs):
        assert [r["prev_id"] for r in mine].count(None) == 1
        assert len(chain_order(mine)) == 10  # every link stays within its caller


# -- amending and forgetting -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_work_result_amends(node, make_caller):
    alice = await make_caller()
    episode_id = (await node.work_record(alice, summary="s"))["id"]
    before = await stored(node)
    result = await node.work_result(
        alice, id=episode_id, trust=0.0, task_result=-2.5, status="done", verdict_at="2026-10-09"
    )
    assert result["id"] == episode_id
    assert result["amended"] == ["status", "task_result", "trust", "verdict_at"]
    entry = (await node.entries())[-1]
    assert entry.id.hex() == result["entry_id"]
    payload = await last_payload(node, "episode.amend")
    assert payload == {
        "id": episode_id,
        "vault": "team",
        "caller": "alice",
        "trust": 0.0,
        "task_result": -2.5,
        "status": "done",
        "verdict_at": 1_791_504_000_000,
    }
    after = await stored(node)
    assert {k: after[k] - before[k] for k in after if after[k] != before[k]} == {
        "headers": 1,
        "payloads": 1,
        "episode_entries": 1,
    }
    row = await node.reader().fetchall(
        "SELECT status, task_result, trust, verdict_at FROM episodes WHERE id = ?", (episode_id,)
    )
    assert [tuple(r) for r in row] == [("done", -2.5, 0.0, 1_791_504_000_000)]


@pytest.mark.asyncio
async def test_work_forget_tombstones_and_the_chain_skips_it(node, make_caller):
    alice = await make_caller()
    one = await node.work_record(alice, summary="1")
    two = await node.work_record(alice, summary="2")
    three = await node.work_record(alice, summary="3")
    assert await node.work_forget(alice, id=three["id"]) == {"id": three["id"], "forgotten": True}
    assert await index_row(node, three["id"]) == ("team", "alice", 1)
    assert await index_row(node, two["id"]) == ("team", "alice", 0)
    reader = node.reader()
    events = [
        (r.subject, r.principal, r.workspace, r.entry)
        for r in await reader.select_audit(limit=1_000_000)
        if r.event == "episode_forgotten"
    ]
    forget_entry = (await node.entries())[-1]
    assert forget_entry.header.kind == "episode.forget"
    assert [(*e[:3], bytes(e[3])) for e in events] == [
        (three["id"], "alice", "team", forget_entry.id)
    ]
    four = await node.work_record(alice, summary="4")
    assert four["prev_id"] == two["id"]  # past the forgotten one to the newest remembered
    await node.work_forget(alice, id=two["id"])
    await node.work_forget(alice, id=four["id"])
    assert (await node.work_record(alice, summary="5"))["prev_id"] == one["id"]


@pytest.mark.asyncio
async def test_forgetting_twice_answers_unknown(node, make_caller):
    alice = await make_caller()
    episode_id = (await node.work_record(alice, summary="s"))["id"]
    await node.work_forget(alice, id=episode_id)
    text = await refused(node, "work_forget", alice, id=episode_id)
    assert text == f"unknown episode id: {episode_id}"


@pytest.mark.asyncio
async def test_admin_may_amend_and_forget_others_episodes(node, make_caller):
    alice = await make_caller()
    admin = await make_caller("root", "team", ("admin:workspace",))
    episode_id = (await node.work_record(alice, summary="alice's"))["id"]
    amended = await node.work_result(admin, id=episode_id, status="reviewed")
    assert amended["amended"] == ["status"]
    assert (await last_payload(node, "episode.amend"))["caller"] == "root"
    assert (await node.work_forget(admin, id=episode_id))["forgotten"] is True
    assert await index_row(node, episode_id) == ("team", "alice", 1)
    # the admin's own chain is untouched by alice's episodes
    assert (await node.work_record(admin, summary="mine"))["prev_id"] is None
