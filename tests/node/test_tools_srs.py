"""SR write tools (docs/authority.md §Scopes): e_write, e_correct, e_adjust, e_delete,
e_undelete.

Bad input is refused with a text naming the argument and stores nothing (no header, payload
or view row, and no audit event); an SR the caller may not address answers exactly as
an unknown one; successful writes return the documented fields and audit themselves.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import uuid
from typing import Any

import pytest

from node.errors import Forbidden, Refusal
from node.node import Node
from protocol.entry import decode_header
from protocol.kinds import decode_payload
from tests.node.helpers import events, refused, stored

UNKNOWN = "00000000-0000-7000-8000-0000000000aa"
LINK = "01890000-0000-7000-8000-000000000001"
INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z\Z")


async def audit_rows(node: Node, event: str) -> list[tuple[Any, ...]]:
    return [(r.subject, r.principal, r.workspace, r.entry) for r in await events(node, event)]


async def header_id(node: Node, entry_id: str) -> tuple[bytes, bytes, str]:
    """(id column, raw header, kind) of the stored header with this id."""
    reader = node.reader()
    rows = [
        s
        for log in await reader.select_logs()
        for s in await reader.select_span(
            log.log_id, gt=0, lte=log.head_seq, limit=1_000_000, max_bytes=1 << 40
        )
        if s.id == bytes.fromhex(entry_id)
    ]
    assert len(rows) == 1
    return rows[0].id, rows[0].raw, decode_header(rows[0].raw).kind


# -- bad input ---------------------------------------------------------------------------------

NAN = math.nan

# (arguments besides a valid title, the pattern the refusal text must match)
BAD_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"bogus": 1}, r"^e_write does not take bogus$"),
    ({"zeta": 1, "alpha": 2}, r"^e_write does not take alpha, zeta$"),
    ({"title": 5}, r"^invalid title: must be text$"),
    ({"title": True}, r"^invalid title: must be text$"),
    ({"title": NAN}, r"^invalid title: must be text$"),
    ({"title": "x" * 1001}, r"^invalid title: .*1000"),
    ({"text": "x" * 100_001}, r"^invalid text: .*100000"),
    ({"text": ["a"]}, r"^invalid text: must be text$"),
    ({"tags": "abc"}, r"^invalid tags: must be a list"),
    ({"tags": True}, r"^invalid tags: must be a list"),
    ({"tags": {"a": 1}}, r"^invalid tags: must be a list"),
    ({"tags": [f"t{i}" for i in range(65)]}, r"^invalid tags: .*64"),
    ({"tags": ["x" * 65]}, r"^invalid tags\[0\]: .*64"),
    ({"tags": ["ok", 7]}, r"^invalid tags\[1\]: must be text$"),
    ({"tags": ["a", "a"]}, r"^invalid tags: must not repeat"),
    ({"links": True}, r"^invalid links: must be a list"),
    ({"links": LINK}, r"^invalid links: must be a list"),
    ({"links": ["not-a-uuid"]}, r"^invalid links\[0\]: "),
    ({"links": [LINK, "01890000-0000-7000-8000-00000000000z"]}, r"^invalid links\[1\]: "),
    ({"conversational": "yes"}, r"^invalid conversational: must be true or false$"),
    ({"conversational": 1}, r"^invalid conversational: must be true or false$"),
    ({"content_time": "2026-13-01"}, r"^invalid content_time: .*out of range"),
    ({"content_time": "2026-02-30"}, r"^invalid content_time: .*out of range"),
    ({"content_time": "yesterday"}, r"^invalid content_time: 'yesterday' is not"),
    ({"content_time": "2026-10-09T08:00:00"}, r"^invalid content_time: .*with an offset"),
    ({"content_time": "2026-10-09 08:00:00Z"}, r"^invalid content_time: "),
    ({"content_time": "2026-10-09T24:00:00Z"}, r"^invalid content_time: .*out of range"),
    ({"content_time": 1_790_000_000_000}, r"^invalid content_time: must be an ISO-8601"),
    ({"content_time": NAN}, r"^invalid content_time: must be an ISO-8601"),
    ({"content_time": "1969-12-31"}, r"^invalid content_time: must not be before 1970"),
    ({"private_fields": {"bad key": "v"}}, r"^invalid private_fields key: "),
    ({"private_fields": {"": "v"}}, r"^invalid private_fields key: "),
    ({"private_fields": {"k/1": "v"}}, r"^invalid private_fields key: "),
    ({"private_fields": {"k": 5}}, r"^invalid private_fields\.k: must be text$"),
    ({"private_fields": ["k"]}, r"^invalid private_fields: must be a map"),
    ({"private_fields": {f"k{i}": "v" for i in range(33)}}, r"^invalid private_fields: .*32"),
    ({"visibility": "public"}, r"^invalid visibility: must be one of workspace, private$"),
    ({"visibility": "PRIVATE"}, r"^invalid visibility: "),
    ({"visibility": True}, r"^invalid visibility: "),
    ({"lane": "x" * 65}, r"^invalid lane: .*64"),
    ({"lane": 3}, r"^invalid lane: must be text$"),
    ({"lane_uuid": "nope"}, r"^invalid lane_uuid: "),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("extra", "pattern"), BAD_FIELDS)
async def test_e_write_create_refuses_bad_fields(node, make_caller, extra, pattern):
    alice = await make_caller()
    text = await refused(node, "e_write", alice, **({"title": "t"} | extra))
    assert re.search(pattern, text), text


ADJUST_ONLY = {"content_time", "lane", "lane_uuid", "visibility"}  # only sr.adjust sets them later


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("extra", "pattern"),
    [(e, p) for e, p in BAD_FIELDS if not ADJUST_ONLY & e.keys() or "content_time" in e],
)
async def test_e_write_update_refuses_bad_fields(node, make_caller, extra, pattern):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    text = await refused(node, "e_write", alice, sr_id=sr_id, **({"title": "t"} | extra))
    assert re.search(pattern, text), text


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "args",
    [
        {},
        {"title": ""},
        {"text": ""},
        {"title": "", "text": ""},
        {"tags": ["a"]},
        {"title": None, "text": None},
    ],
)
async def test_e_write_create_needs_a_title_or_a_text(node, make_caller, args):
    alice = await make_caller()
    text = await refused(node, "e_write", alice, **args)
    assert text == "e_write needs a title or a text to create an SR"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("extra", "names"),
    [
        ({"visibility": "private"}, "visibility"),
        ({"lane": "ops"}, "lane"),
        ({"lane_uuid": LINK}, "lane_uuid"),
        ({"content_time": "2026-01-02"}, "content_time"),
        ({"title": "t", "visibility": "workspace", "lane": "x"}, "lane, visibility"),
    ],
)
async def test_e_write_update_leaves_adjust_only_fields_to_e_adjust(
    node, make_caller, extra, names
):
    """Set at creation, changed later only by sr.adjust, by the owner or an admin: an update
    through e_write (open to every writer of the workspace) may not change them."""
    alice = await make_caller()
    bob = await make_caller("bob")
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    for caller in (alice, bob):
        text = await refused(node, "e_write", caller, sr_id=sr_id, **extra)
        assert text == f"e_write cannot change {names} of an existing SR (use e_adjust)"
    meta = {k: v for k, v in extra.items() if k in ADJUST_ONLY}
    assert (await node.e_adjust(alice, sr_id=sr_id, **meta))["sr_id"] == sr_id  # the way to do it


@pytest.mark.asyncio
async def test_e_write_update_needs_a_field(node, make_caller):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    text = await refused(node, "e_write", alice, sr_id=sr_id)
    assert text == "e_write with an sr_id needs at least one field to change"


# e_correct: content fields and a reason
BAD_CORRECT: list[tuple[dict[str, Any], str]] = [
    ({"tags": ["a"]}, r"^e_correct does not take tags$"),
    ({"visibility": "private"}, r"^e_correct does not take visibility$"),
    ({"bogus": 1}, r"^e_correct does not take bogus$"),
    ({"title": 5}, r"^invalid title: must be text$"),
    ({"title": "x" * 1001}, r"^invalid title: .*1000"),
    ({"text": "x" * 100_001}, r"^invalid text: .*100000"),
    ({"links": "x"}, r"^invalid links: must be a list"),
    ({"links": ["not-a-uuid"]}, r"^invalid links\[0\]: "),
    ({"private_fields": {"bad key": "v"}}, r"^invalid private_fields key: "),
    ({"conversational": "no"}, r"^invalid conversational: "),
    ({"reason": None}, r"^invalid reason: "),
    ({"reason": ""}, r"^invalid reason: "),
    ({"reason": 5}, r"^invalid reason: must be text$"),
    ({"reason": "r" * 2001}, r"^invalid reason: .*2000"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("extra", "pattern"), BAD_CORRECT)
async def test_e_correct_refuses_bad_fields(node, make_caller, extra, pattern):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    args = {"sr_id": sr_id, "title": "fixed", "reason": "typo"} | extra
    text = await refused(node, "e_correct", alice, **args)
    assert re.search(pattern, text), text


@pytest.mark.asyncio
async def test_e_correct_needs_a_content_field(node, make_caller):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    text = await refused(node, "e_correct", alice, sr_id=sr_id, reason="typo")
    assert text == "e_correct needs at least one content field to correct"


# e_adjust: metadata fields only
BAD_ADJUST: list[tuple[dict[str, Any], str]] = [
    ({"title": "t"}, r"^e_adjust does not take title$"),
    ({"text": "t"}, r"^e_adjust does not take text$"),
    ({"reason": "r"}, r"^e_adjust does not take reason$"),
    ({"tags": "abc"}, r"^invalid tags: must be a list"),
    ({"tags": [f"t{i}" for i in range(65)]}, r"^invalid tags: .*64"),
    ({"tags": ["x" * 65]}, r"^invalid tags\[0\]: "),
    ({"visibility": "public"}, r"^invalid visibility: "),
    ({"content_time": "2026-10-09T08:00:00"}, r"^invalid content_time: "),
    ({"content_time": "yesterday"}, r"^invalid content_time: "),
    ({"lane": ""}, r"^invalid lane: "),
    ({"lane_uuid": LINK[:-1]}, r"^invalid lane_uuid: "),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("extra", "pattern"), BAD_ADJUST)
async def test_e_adjust_refuses_bad_fields(node, make_caller, extra, pattern):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    text = await refused(node, "e_adjust", alice, **({"sr_id": sr_id, "tags": ["ok"]} | extra))
    assert re.search(pattern, text), text


@pytest.mark.asyncio
async def test_e_adjust_needs_a_metadata_field(node, make_caller):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    text = await refused(node, "e_adjust", alice, sr_id=sr_id)
    assert text == "e_adjust needs at least one metadata field to change"


@pytest.mark.asyncio
@pytest.mark.parametrize("tool", ["e_delete", "e_undelete"])
async def test_delete_tools_refuse_bad_arguments(node, make_caller, tool):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    assert await refused(node, tool, alice, sr_id=sr_id, title="x") == f"{tool} does not take title"
    assert await refused(node, tool, alice, sr_id=5) == "unknown sr_id: 5"
    assert await refused(node, tool, alice, sr_id=[sr_id]) == f"unknown sr_id: {[sr_id]}"
    assert await refused(node, tool, alice) == "unknown sr_id: None"


# -- ids the caller may not address answer as unknown ------------------------------------------

ALL_SR_TOOLS = {
    "e_write": {"title": "changed"},
    "e_correct": {"title": "changed", "reason": "typo"},
    "e_adjust": {"tags": ["changed"]},
    "e_delete": {},
    "e_undelete": {},
}


@pytest.mark.asyncio
@pytest.mark.parametrize("tool", list(ALL_SR_TOOLS))
async def test_unknown_and_foreign_workspace_sr_ids_answer_alike(node, make_caller, tool):
    alice = await make_caller()
    elsewhere = await make_caller("alice", "other")
    elsewhere_admin = await make_caller("root", "other", ("admin:workspace",))
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    args = ALL_SR_TOOLS[tool]
    assert await refused(node, tool, alice, sr_id=UNKNOWN, **args) == f"unknown sr_id: {UNKNOWN}"
    malformed = await refused(node, tool, alice, sr_id="not-a-uuid", **args)
    assert re.match(r"(unknown|invalid) sr_id: ", malformed), malformed
    for caller in (elsewhere, elsewhere_admin):
        assert await refused(node, tool, caller, sr_id=sr_id, **args) == f"unknown sr_id: {sr_id}"


@pytest.mark.asyncio
@pytest.mark.parametrize("tool", ["e_adjust", "e_delete", "e_undelete"])
async def test_owner_only_tools_answer_others_as_unknown(node, make_caller, tool):
    alice = await make_caller()
    bob = await make_caller("bob")
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    if tool == "e_undelete":
        await node.e_delete(alice, sr_id=sr_id)
    text = await refused(node, tool, bob, sr_id=sr_id, **ALL_SR_TOOLS[tool])
    assert text == f"unknown sr_id: {sr_id}"
    # ... and bob sees exactly what he sees for an id that never existed
    unknown_text = await refused(node, tool, bob, sr_id=UNKNOWN, **ALL_SR_TOOLS[tool])
    assert unknown_text.replace(UNKNOWN, sr_id) == text


@pytest.mark.asyncio
async def test_workspace_writers_may_update_and_correct_each_others_srs(node, make_caller):
    alice = await make_caller()
    bob = await make_caller("bob")
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    updated = await node.e_write(bob, sr_id=sr_id, text="bob's addition")
    corrected = await node.e_correct(bob, sr_id=sr_id, title="First", reason="capital")
    assert (updated["sr_id"], updated["created"]) == (sr_id, False)
    assert (corrected["sr_id"], corrected["created"]) == (sr_id, False)


@pytest.mark.asyncio
@pytest.mark.parametrize("tool", list(ALL_SR_TOOLS))
async def test_read_only_caller_cannot_write(node, make_caller, tool):
    alice = await make_caller()
    reader = await make_caller("alice", "team", ("read:workspace",))
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    args = ({} if tool == "e_write" else {"sr_id": sr_id}) | ALL_SR_TOOLS[tool]
    before = await stored(node)
    with pytest.raises(Forbidden) as info:
        await getattr(node, tool)(reader, **args)
    assert "write:workspace" in info.value.text
    assert await stored(node) == before


@pytest.mark.asyncio
async def test_forbidden_comes_before_the_id_lookup(node, make_caller):
    """A caller without write:workspace learns nothing about which ids exist."""
    reader = await make_caller("carol", "team", ("read:workspace",))
    with pytest.raises(Forbidden) as unknown:
        await node.e_adjust(reader, sr_id=UNKNOWN, tags=["x"])
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    with pytest.raises(Forbidden) as known:
        await node.e_adjust(reader, sr_id=sr_id, tags=["x"])
    assert unknown.value.text == known.value.text


@pytest.mark.asyncio
async def test_refusals_in_a_group_commit_leave_the_other_writes_standing(node, make_caller):
    """A write refused after its lookup read fails alone: the writes committed with it in the
    same batch stand, and it answers with its refusal text (not a voided batch)."""
    alice = await make_caller()
    bob = await make_caller("bob")
    sr_id = (await node.e_write(alice, title="first"))["sr_id"]
    calls = []
    for i in range(10):
        calls.append(node.e_write(alice, title=f"good {i}"))
        calls.append(node.e_adjust(alice, sr_id=UNKNOWN, tags=["x"]))
        calls.append(node.e_delete(bob, sr_id=sr_id))
    results = await asyncio.gather(*calls, return_exceptions=True)
    for i in range(10):
        good, unknown, foreign = results[3 * i : 3 * i + 3]
        assert isinstance(good, dict)
        assert good["created"] is True
        assert isinstance(unknown, Refusal)
        assert unknown.text == f"unknown sr_id: {UNKNOWN}"
        assert isinstance(foreign, Refusal)
        assert foreign.text == f"unknown sr_id: {sr_id}"
    assert (await stored(node))["srs"] == 11
    assert (await stored(node))["deletions"] == 0
    assert len(await audit_rows(node, "sr_written")) == 11


# -- success -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_e_write_creates_an_sr(node, make_caller, wall):
    alice = await make_caller()
    before = await stored(node)
    result = await node.e_write(
        alice,
        title="Deploy notes",
        text="the body",
        tags=["ops", "deploy"],
        links=[LINK],
        content_time="2026-10-09T08:00:00+02:00",
        private_fields={"ticket": "T-1"},
        visibility="private",
        lane="ops",
        conversational=True,
    )
    assert set(result) == {"sr_id", "entry_id", "ingest_time", "created"}
    assert result["created"] is True
    parsed = uuid.UUID(result["sr_id"])
    assert str(parsed) == result["sr_id"]
    assert parsed.version == 7
    assert result["sr_id"][14] == "7"
    assert parsed.variant == uuid.RFC_4122
    assert int(parsed.hex[:12], 16) == wall.now  # the 48-bit ms prefix is the node's clock
    assert INSTANT.match(result["ingest_time"]), result["ingest_time"]
    assert result["ingest_time"] == "2026-09-21T14:13:20Z"  # wall.now, spelled strictly
    after = await stored(node)
    assert {k: after[k] - before[k] for k in after} == {
        "headers": 1,
        "payloads": 1,
        "logs": 1,
        "srs": 1,
        "sr_versions": 1,
        "sr_tags": 2,
        "sr_links": 1,
        "sr_due": 0,
        "episode_entries": 0,
        "episodes": 0,
        "episode_due": 0,
        "call_windows": 0,
        "forks": 0,
        "audit": 1,
        "deletions": 0,
    }
    hid, raw, kind = await header_id(node, result["entry_id"])
    assert kind == "sr.put"
    assert hid == hashlib.sha256(raw).digest()
    entry = next(e for e in await node.entries() if e.id == hid)
    assert entry.payload is not None
    payload = decode_payload("sr.put", entry.payload)
    assert payload["sr_id"] == result["sr_id"]
    assert (payload["workspace"], payload["principal"], payload["create"]) == (
        "team",
        "alice",
        True,
    )
    assert payload["content_time"] == 1_791_525_600_000  # 06:00Z
    assert payload["tags"] == ["ops", "deploy"]
    assert payload["private_fields"] == {"ticket": "T-1"}


@pytest.mark.asyncio
async def test_create_defaults(node, make_caller):
    alice = await make_caller()
    result = await node.e_write(alice, text="only a text")
    entry = (await node.entries())[-1]
    assert entry.id.hex() == result["entry_id"]
    assert entry.payload is not None
    payload = decode_payload("sr.put", entry.payload)
    assert payload["visibility"] == "workspace"
    assert payload["lane"] == "default"
    assert payload["tags"] == []
    assert "title" not in payload


@pytest.mark.asyncio
async def test_update_keeps_the_sr_id(node, make_caller):
    alice = await make_caller()
    created = await node.e_write(alice, title="v1")
    before = await stored(node)
    updated = await node.e_write(alice, sr_id=created["sr_id"], title="v2", tags=["t"])
    assert updated["sr_id"] == created["sr_id"]
    assert updated["created"] is False
    assert updated["entry_id"] != created["entry_id"]
    after = await stored(node)
    assert after["headers"] == before["headers"] + 1
    assert after["srs"] == before["srs"]  # still one SR
    entry = (await node.entries())[-1]
    assert entry.payload is not None
    payload = decode_payload("sr.put", entry.payload)
    assert (payload["sr_id"], payload["create"], payload["title"]) == (
        created["sr_id"],
        False,
        "v2",
    )
    assert "visibility" not in payload  # omitted fields keep their values: not re-sent


@pytest.mark.asyncio
async def test_correct_and_adjust(node, make_caller):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="teh title"))["sr_id"]
    corrected = await node.e_correct(alice, sr_id=sr_id, title="the title", reason="typo")
    adjusted = await node.e_adjust(
        alice, sr_id=sr_id, visibility="private", content_time="2026-01-02"
    )
    assert corrected["sr_id"] == adjusted["sr_id"] == sr_id
    kinds = {(await header_id(node, r["entry_id"]))[2] for r in (corrected, adjusted)}
    assert kinds == {"sr.correct", "sr.adjust"}
    entry = (await node.entries())[-1]
    assert entry.payload is not None
    payload = decode_payload("sr.adjust", entry.payload)
    assert payload["content_time"] == 1_767_312_000_000  # a bare date is midnight UTC


@pytest.mark.asyncio
async def test_every_write_audits_sr_written_with_its_entry(node, make_caller):
    alice = await make_caller()
    bob = await make_caller("bob")
    first = await node.e_write(alice, title="one")
    sr_id = first["sr_id"]
    results = [
        first,
        await node.e_write(bob, sr_id=sr_id, text="more"),
        await node.e_correct(alice, sr_id=sr_id, text="fixed", reason="r"),
        await node.e_adjust(alice, sr_id=sr_id, tags=["x"]),
        *await asyncio.gather(*(node.e_write(alice, title=f"c{i}") for i in range(8))),
    ]
    rows = await audit_rows(node, "sr_written")
    assert len(rows) == len(results)
    principals = ["alice", "bob", "alice", "alice"] + ["alice"] * 8
    by_entry = {bytes(r[3]): r for r in rows}
    for result, principal in zip(results, principals, strict=True):
        hid, raw, _ = await header_id(node, result["entry_id"])
        assert hid == hashlib.sha256(raw).digest()
        subject, who, workspace, entry = by_entry[hid]
        assert (subject, who, workspace, bytes(entry)) == (result["sr_id"], principal, "team", hid)


@pytest.mark.asyncio
async def test_delete_and_undelete_are_local_and_idempotent(node, make_caller, wall):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="doomed"))["sr_id"]
    reader = node.reader()
    start = await stored(node)

    wall.now += 1000
    assert await node.e_delete(alice, sr_id=sr_id) == {
        "sr_id": sr_id,
        "deleted": True,
        "changed": True,
    }
    again = await stored(node)
    assert {k: again[k] - start[k] for k in again if again[k] != start[k]} == {
        "deletions": 1,
        "audit": 1,
    }  # local rows only: no entry is authored
    rows = await reader.fetchall("SELECT sr_id, deleted, hlc_wall, principal FROM deletions")
    assert rows == [(sr_id, 1, wall.now, "alice")]

    assert await node.e_delete(alice, sr_id=sr_id) == {
        "sr_id": sr_id,
        "deleted": True,
        "changed": False,
    }
    assert await stored(node) == again

    wall.now += 1000
    undone = await node.e_undelete(alice, sr_id=sr_id)
    assert undone == {"sr_id": sr_id, "deleted": False, "changed": True}
    assert (await node.e_undelete(alice, sr_id=sr_id))["changed"] is False
    rows = await reader.fetchall("SELECT deleted, hlc_wall FROM deletions ORDER BY pos")
    assert rows == [(1, wall.now - 1000), (0, wall.now)]
    assert [r[:3] for r in await audit_rows(node, "sr_deleted")] == [(sr_id, "alice", "team")]
    assert [r[:3] for r in await audit_rows(node, "sr_undeleted")] == [(sr_id, "alice", "team")]
    after = await stored(node)
    assert {k: after[k] - start[k] for k in after if after[k] != start[k]} == {
        "deletions": 2,
        "audit": 2,
    }


@pytest.mark.asyncio
async def test_undelete_of_a_live_sr_changes_nothing(node, make_caller):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title="alive"))["sr_id"]
    before = await stored(node)
    assert (await node.e_undelete(alice, sr_id=sr_id))["changed"] is False
    assert await stored(node) == before


@pytest.mark.asyncio
async def test_admin_may_adjust_and_delete_others_srs(node, make_caller):
    alice = await make_caller()
    admin = await make_caller("root", "team", ("admin:workspace",))
    sr_id = (await node.e_write(alice, title="alice's"))["sr_id"]
    assert (await node.e_adjust(admin, sr_id=sr_id, tags=["tidied"]))["sr_id"] == sr_id
    assert (await node.e_delete(admin, sr_id=sr_id))["changed"] is True
    assert (await node.e_undelete(admin, sr_id=sr_id))["changed"] is True
    assert [r[:2] for r in await audit_rows(node, "sr_deleted")] == [(sr_id, "root")]
    # the owner sees the admin's deletion as the current state
    assert (await node.e_undelete(alice, sr_id=sr_id))["changed"] is False
