"""The look ``sr_history`` (node/tools/look_history.py, node/views/sr_history.py): a record's
versions oldest first, each with its kind, who, when and which node and the fields it changed
with their values before and after (not the flags a correction or an adjustment sets: its kind
says so);
read as ``changes`` reads — versions the caller could not read are not shown, a change only in
what it cannot see has no content, private fields for their owner or an admin — and one
refusal for every id it cannot read."""

from __future__ import annotations

import pytest

from node.errors import Refusal
from node.node import Node
from node.views import sr_history
from protocol.timefmt import format_instant
from tests.node.helpers import CallerFactory, Wall

pytestmark = pytest.mark.asyncio

MINUTE = 60_000


async def test_the_versions_with_who_when_and_what_changed(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice = await make_caller("alice")
    bob = await make_caller("bob")
    first = wall.now
    sr = (await node.e_write(alice, title="plan", text="ship friday", tags=["a"]))["sr_id"]
    wall.now += MINUTE
    await node.e_write(bob, sr_id=sr, text="ship monday")
    wall.now += MINUTE
    await node.e_correct(alice, sr_id=sr, title="the plan", reason="typo")
    wall.now += MINUTE
    await node.e_adjust(alice, sr_id=sr, tags=["a", "b"])
    history = await node.look("sr_history", bob, sr_id=sr)
    assert history["current"]["title"] == "the plan"
    assert history["current"]["has_correction"] is True
    assert history["earlier"] is False
    got = [(v["kind"], v["by"], v["at"], v["fields"], v["first"]) for v in history["versions"]]
    assert got == [
        ("written", "alice", format_instant(first), [], True),
        ("written", "bob", format_instant(first + MINUTE), ["text"], False),
        ("corrected", "alice", format_instant(first + 2 * MINUTE), ["title"], False),
        ("adjusted", "alice", format_instant(first + 3 * MINUTE), ["tags"], False),
    ]
    changes = [(v["was"], {f: v["state"][f] for f in v["fields"]}) for v in history["versions"]]
    assert changes == [
        ({}, {}),
        ({"text": "ship friday"}, {"text": "ship monday"}),
        ({"title": "plan"}, {"title": "the plan"}),
        ({"tags": ["a"]}, {"tags": ["a", "b"]}),
    ]
    assert {v["node_id"] for v in history["versions"]} == {node.info.node_id}
    assert history["versions"][1]["state"]["text"] == "ship monday"


async def test_what_the_caller_cannot_read_is_not_shown(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice, bob = await make_caller("alice"), await make_caller("bob")
    sr = (
        await node.e_write(
            alice, title="draft", text="x", visibility="private", private_fields={"k": "1"}
        )
    )["sr_id"]
    wall.now += MINUTE
    await node.e_adjust(alice, sr_id=sr, visibility="workspace")
    wall.now += MINUTE
    await node.e_write(alice, sr_id=sr, private_fields={"k": "2"})
    seen = (await node.look("sr_history", bob, sr_id=sr))["versions"]
    assert [(v["first"], v["hidden_change"]) for v in seen] == [(True, False), (False, True)]
    assert all("private_fields" not in v["state"] for v in seen)
    own = (await node.look("sr_history", alice, sr_id=sr))["versions"]
    assert [v["fields"] for v in own] == [[], ["visibility"], ["private_fields"]]


async def test_one_refusal_for_every_id_the_caller_cannot_read(
    node: Node, make_caller: CallerFactory
) -> None:
    alice, bob = await make_caller("alice"), await make_caller("bob")
    other = await make_caller("carol", workspace="lab")
    private = (await node.e_write(alice, title="mine", text="x", visibility="private"))["sr_id"]
    elsewhere = (await node.e_write(other, title="lab's", text="y"))["sr_id"]
    deleted = (await node.e_write(bob, title="gone", text="z"))["sr_id"]
    await node.e_delete(bob, sr_id=deleted)
    for sr_id in (private, elsewhere, deleted, "01a0c450-6c00-7000-8000-000000000000"):
        with pytest.raises(Refusal) as refused:
            await node.look("sr_history", bob, sr_id=sr_id)
        assert refused.value.text == f"unknown sr_id: {sr_id}"
    for args in ({}, {"sr_id": 7}, {"sr_id": "x" * 65}, {"sr_id": private, "page": 1}):
        with pytest.raises(Refusal):
            await node.look("sr_history", alice, **args)


async def test_versions_hidden_from_the_caller_leave_no_mark(
    node: Node, wall: Wall, make_caller: CallerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of versions private to another is neither shown nor counted: the next version
    the caller reads is compared with the one it read before, and the newest MAX_VERSIONS are
    taken among those it reads (``changes`` compares two moments, never what lies between)."""
    monkeypatch.setattr(sr_history, "MAX_VERSIONS", 2)
    alice, bob = await make_caller("alice"), await make_caller("bob")
    sr = (await node.e_write(alice, title="plan", text="one"))["sr_id"]
    for change in ({"visibility": "private"}, {"text": "two"}, {"text": "three"}):
        wall.now += MINUTE
        await (node.e_adjust if "visibility" in change else node.e_write)(alice, sr_id=sr, **change)
    wall.now += MINUTE
    await node.e_adjust(alice, sr_id=sr, visibility="workspace")
    history = await node.look("sr_history", bob, sr_id=sr)
    assert history["earlier"] is False
    got = [(v["first"], v["fields"], v["hidden_change"]) for v in history["versions"]]
    assert got == [(True, [], False), (False, ["text"], False)]
    assert history["versions"][1]["at"] == format_instant(wall.now)
    assert [v["state"]["text"] for v in history["versions"]] == ["one", "three"]
    assert (await node.look("sr_history", alice, sr_id=sr))["earlier"] is True


async def test_a_version_that_changes_nothing_is_no_hidden_change(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice, bob = await make_caller("alice"), await make_caller("bob")
    sr = (await node.e_write(alice, title="plan", text="one", private_fields={"k": "1"}))["sr_id"]
    wall.now += MINUTE
    await node.e_write(alice, sr_id=sr, text="one")
    wall.now += MINUTE
    await node.e_write(alice, sr_id=sr, private_fields={"k": "2"})
    own = [
        (v["fields"], v["hidden_change"])
        for v in (await node.look("sr_history", alice, sr_id=sr))["versions"]
    ]
    assert own == [([], False), ([], False), (["private_fields"], False)]
    seen = [
        (v["fields"], v["hidden_change"])
        for v in (await node.look("sr_history", bob, sr_id=sr))["versions"]
    ]
    assert seen == [([], False), ([], False), ([], True)]
