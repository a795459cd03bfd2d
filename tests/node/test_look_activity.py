"""The look ``activity`` (docs/web.md §Pages): versions counted per UTC hour or day of a
window, for writes at known times of the node's clock; a version the caller cannot read —
another principal's private SR, another workspace's, a version made private to another — is
not counted, so the answer is the same whether or not such versions exist; the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from node.errors import Forbidden, Refusal
from node.node import Node
from tests.node.activitykit import HOUR, T0, WINDOW, writes
from tests.node.helpers import CallerFactory, Wall

pytestmark = pytest.mark.asyncio


def counts(answer: dict[str, Any]) -> list[tuple[str, int]]:
    return [(s["at"], s["count"]) for s in answer["slots"]]


async def test_versions_are_counted_per_hour_and_per_day(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice = await make_caller("alice")
    await writes(node, wall, alice)
    answer = await node.look("activity", alice, **WINDOW)
    assert counts(answer) == [
        ("2026-09-21T14:00:00Z", 2),
        ("2026-09-21T15:00:00Z", 0),
        ("2026-09-21T16:00:00Z", 2),
        ("2026-09-21T17:00:00Z", 0),
    ]
    assert (answer["by"], answer["total"]) == ("hour", 4)
    assert (answer["start"], answer["end"]) == ("2026-09-21T14:00:00Z", "2026-09-21T18:00:00Z")
    days = await node.look(
        "activity", alice, by="day", start_date="2026-09-20", end_date="2026-09-21"
    )
    assert counts(days) == [("2026-09-20T00:00:00Z", 0), ("2026-09-21T00:00:00Z", 4)]


async def test_the_default_window_ends_with_the_current_hour_or_day(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice = await make_caller("alice")
    await writes(node, wall, alice)  # the clock is at 17:30
    hours = await node.look("activity", alice)
    assert len(hours["slots"]) == 48
    assert hours["end"] == "2026-09-21T18:00:00Z"
    assert [n for _, n in counts(hours)[-4:]] == [2, 0, 2, 0]
    assert counts(hours)[-4][0] == "2026-09-21T14:00:00Z"
    days = await node.look("activity", alice, by="day")
    assert (len(days["slots"]), days["end"], days["total"]) == (30, "2026-09-22T00:00:00Z", 4)


async def test_what_the_caller_cannot_read_counts_nothing(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    """bob's private SRs and another workspace's change nothing alice is answered: her counts
    are those of the node without them (the first test's); the admin's include bob's."""
    alice, bob = await make_caller("alice"), await make_caller("bob")
    stranger = await make_caller("carol", workspace="elsewhere")
    admin = await make_caller("root", scopes=("admin:workspace",))
    await writes(node, wall, alice, bob, stranger)
    alone = [
        ("2026-09-21T14:00:00Z", 2),
        ("2026-09-21T15:00:00Z", 0),
        ("2026-09-21T16:00:00Z", 2),
        ("2026-09-21T17:00:00Z", 0),
    ]
    assert counts(await node.look("activity", alice, **WINDOW)) == alone
    assert [n for _, n in counts(await node.look("activity", admin, **WINDOW))] == [3, 1, 2, 0]
    assert [n for _, n in counts(await node.look("activity", stranger, **WINDOW))] == [1, 1, 0, 0]


async def test_a_version_made_private_to_another_is_not_counted(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice, bob = await make_caller("alice"), await make_caller("bob")
    wall.now = T0 + 60_000
    written = await node.e_write(bob, title="shared at first", text="x")
    wall.now = T0 + HOUR + 60_000
    await node.e_adjust(bob, sr_id=written["sr_id"], visibility="private")
    wall.now = T0 + 3 * HOUR
    assert [s["count"] for s in (await node.look("activity", alice, **WINDOW))["slots"]] == [
        1,
        0,
        0,
        0,
    ]
    assert [s["count"] for s in (await node.look("activity", bob, **WINDOW))["slots"]] == [
        1,
        1,
        0,
        0,
    ]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ({"by": "week"}, "invalid by: must be one of hour, day"),
        ({"start_date": "yesterday"}, "invalid start_date"),
        (
            {"start_date": "2026-09-21", "end_date": "2026-09-20"},
            "invalid start_date: must be before end_date",
        ),
        (
            {"start_date": "2026-01-01", "end_date": "2026-12-31"},
            "the window holds more than 1000 hours: narrow it, or count by day",
        ),
        ({"page": 2}, "activity does not take page"),
    ],
)
async def test_refusals(
    node: Node, make_caller: CallerFactory, args: dict[str, Any], text: str
) -> None:
    alice = await make_caller("alice")
    with pytest.raises(Refusal) as refused:
        await node.look("activity", alice, **args)
    assert str(refused.value).startswith(text)


async def test_a_token_without_read_scope_is_refused(
    node: Node, make_caller: CallerFactory
) -> None:
    writer = await make_caller("alice", scopes=("write:workspace",))
    with pytest.raises(Forbidden, match="needs the read:workspace scope on workspace team"):
        await node.look("activity", writer)
