"""The look ``changed_values`` (node/tools/look_changes.py): the values at both moments of the
fields the caller sees changed, read as ``changes`` reads — nothing of an SR, a link or a
private field the caller cannot read, and its refusals."""

from __future__ import annotations

import pytest

from node.errors import Refusal
from node.node import Node
from protocol.timefmt import format_instant
from tests.node.helpers import CallerFactory, Wall

pytestmark = pytest.mark.asyncio

MINUTE = 60_000


async def test_the_values_before_and_after_as_the_caller_reads_them(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice, bob = await make_caller("alice"), await make_caller("bob")
    hidden = (await node.e_write(bob, title="bob's", text="x", visibility="private"))["sr_id"]
    shared = (await node.e_write(alice, title="shared", text="y"))["sr_id"]
    sr = (
        await node.e_write(alice, title="draft", text="v1", tags=["a"], private_fields={"k": "1"})
    )["sr_id"]
    private = (await node.e_write(bob, title="mine", text="z", visibility="private"))["sr_id"]
    since = format_instant(wall.now)
    wall.now += MINUTE
    await node.e_write(
        alice,
        sr_id=sr,
        title="final",
        text="v1",
        tags=["a", "b"],
        links=[hidden, shared],
        private_fields={"k": "2"},
    )
    await node.e_write(bob, sr_id=private, title="mine, changed", text="z")
    as_of = format_instant(wall.now)
    args = {"sr_ids": [sr, private, "no-such-sr"], "since": since, "as_of": as_of}
    seen = (await node.look("changed_values", alice, **args))["srs"]
    assert seen == {
        sr: {
            "title": ["draft", "final"],
            "links": [[], [shared]],
            "private_fields": [{"k": "1"}, {"k": "2"}],
            "tags": [["a"], ["a", "b"]],
        }
    }
    titles = (await node.look("changed_values", alice, **args))["titles"]
    assert titles == {sr: "final"}  # not bob's private one, nor an id never written
    admin = await make_caller("carol", scopes=("read:workspace", "admin:workspace"))
    told = (await node.look("changed_values", bob, **args))["srs"]
    assert told == {
        sr: {
            "title": ["draft", "final"],
            "links": [[], [hidden, shared]],
            "tags": [["a"], ["a", "b"]],
        },  # no private fields: not the owner
        private: {"title": ["mine", "mine, changed"]},
    }
    everything = (await node.look("changed_values", admin, **args))["srs"]
    assert everything[sr]["private_fields"] == [{"k": "1"}, {"k": "2"}]
    assert private in everything


async def test_its_refusals(node: Node, make_caller: CallerFactory) -> None:
    alice = await make_caller()
    for args, text in (
        ({"sr_ids": "x", "since": "2026-01-01", "as_of": "2026-01-02"}, "invalid sr_ids"),
        ({"sr_ids": ["x"] * 101, "since": "2026-01-01", "as_of": "2026-01-02"}, "at most 100"),
        ({"sr_ids": ["x"], "since": "2026-01-02", "as_of": "2026-01-01"}, "since before as_of"),
        ({"sr_ids": ["x"], "since": "2026-01-01"}, "both needed"),
        (
            {"sr_ids": ["x"], "since": "2026-01-01", "as_of": "2026-01-02", "page": 2},
            "changed_values does not take page",
        ),
    ):
        with pytest.raises(Refusal, match=text):
            await node.look("changed_values", alice, **args)
