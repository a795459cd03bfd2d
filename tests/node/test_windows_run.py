"""The window a call records is the window it runs with (``asked`` is what the tool is handed:
docs/time-windows.md, decisions 3 and 13), and a call the tool refuses files no row
(decision 5) — on a real node, through ``Node.e_timeline`` with the turn's context.

The turn's now (``NOW``, 15:40Z) and the node's clock differ on purpose: an open end is closed
at the turn's now in the row and in the call alike, whichever clock is ahead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.node import Node
from node.tools.timeline_spec import closed_at, parse_spec
from protocol.timefmt import format_instant, parse_instant
from tests.node.helpers import Wall, refused
from tests.node.windowkit import LA_NAME, MIN, NOW, NOW_TEXT

HOUR = 60 * MIN
UNKNOWN = "00000000-0000-7000-8000-000000000001"
pytestmark = pytest.mark.asyncio


@pytest.fixture
def wall() -> Wall:
    return Wall(NOW - 48 * HOUR)


def context(call_id: str = "c1") -> dict[str, Any]:
    return {"turn": 1, "toolCallId": call_id, "now": NOW_TEXT, "zone": LA_NAME}


async def write_at(node: Node, wall: Wall, caller: Caller, ms: int, title: str) -> str:
    wall.now = ms
    return str((await node.e_write(caller, title=title))["sr_id"])


async def the_row(node: Node, caller: Caller, call_id: str = "c1") -> dict[str, Any]:
    (row,) = (await node.call_windows(caller, tool_call_id=call_id))["rows"]
    return dict(row)


def inside(moment: str, asked: dict[str, str]) -> bool:
    ms = parse_instant(moment).ms
    return parse_instant(asked["from"]).ms <= ms < parse_instant(asked["to"]).ms


async def test_changes_with_an_open_as_of_runs_to_the_turns_now(node, wall, make_caller):
    """The node's clock is ahead of the turn's: what it wrote after the turn's now lies
    outside the recorded window, and the call does not return it."""
    alice = await make_caller()
    before = await write_at(node, wall, alice, NOW - 30 * MIN, "before the turn")
    await write_at(node, wall, alice, NOW + 10 * MIN, "after the turn")
    wall.now = NOW + 20 * MIN
    answer = await node.e_timeline(alice, action="changes", since="2026-10-01", turn=context())
    row = await the_row(node, alice)
    assert row["asked"] == {"from": "2026-10-01T00:00:00.001Z", "to": "2026-10-09T15:40:00.001Z"}
    assert answer["as_of"] == NOW_TEXT
    assert [c["sr_id"] for c in answer["changes"]] == [before]
    assert all(inside(c["changed_at"], row["asked"]) for c in answer["changes"])


async def test_list_with_only_start_date_runs_to_the_turns_now(node, wall, make_caller):
    alice = await make_caller()
    await write_at(node, wall, alice, NOW - 30 * MIN, "before the turn")
    await write_at(node, wall, alice, NOW + 10 * MIN, "after the turn")
    wall.now = NOW + 20 * MIN
    for call_id, start in (("c1", "2026-10-09"), ("c2", "2026-10-09T00:00:00Z")):
        answer = await node.e_timeline(
            alice, action="list", start_date=start, turn=context(call_id)
        )
        row = await the_row(node, alice, call_id)
        assert row["asked"]["to"] == "2026-10-09T15:40:00.001Z"
        assert [r["title"] for r in answer["results"]] == ["before the turn"]
        assert all(inside(r["ingest_time"], row["asked"]) for r in answer["results"])


async def test_an_omitted_start_date_is_closed_too(node, wall, make_caller):
    alice = await make_caller()
    await write_at(node, wall, alice, NOW - 30 * MIN, "before")
    await write_at(node, wall, alice, NOW + 10 * MIN, "after")
    wall.now = NOW + 20 * MIN
    answer = await node.e_timeline(
        alice, action="list", end_date="2026-10-09T15:40:00Z", turn=context()
    )
    row = await the_row(node, alice)
    assert row["asked"] == {"from": "1970-01-01T00:00:00Z", "to": "2026-10-09T15:40:00Z"}
    assert [r["title"] for r in answer["results"]] == ["before"]


async def test_a_turns_now_ahead_of_the_node_reads_to_it(node, wall, make_caller):
    """The turn's now is ahead of the node's clock: the call still runs to the turn's now
    (its answer's as_of is the recorded end), and holds only what the node has."""
    alice = await make_caller()
    written = await write_at(node, wall, alice, NOW - 30 * MIN, "before")
    wall.now = NOW - 20 * MIN
    answer = await node.e_timeline(alice, action="changes", since="2026-10-09", turn=context())
    row = await the_row(node, alice)
    assert format_instant(parse_instant(row["asked"]["to"]).ms - 1) == answer["as_of"] == NOW_TEXT
    assert [c["sr_id"] for c in answer["changes"]] == [written]


async def test_a_call_without_the_turns_context_runs_to_the_nodes_clock(node, wall, make_caller):
    alice = await make_caller()
    await write_at(node, wall, alice, NOW + 10 * MIN, "after the turn")
    wall.now = NOW + 20 * MIN
    answer = await node.e_timeline(alice, action="changes", since="2026-10-01")
    assert answer["as_of"] == format_instant(NOW + 20 * MIN)
    assert len(answer["changes"]) == 1


READ_BACK = [
    {"action": "list", "start_date": "2026-10-09"},
    {"action": "list", "start_date": "2026-10-09T10:00:00+02:00"},
    {"action": "list", "end_date": "2026-10-08"},
    {"action": "list", "end_date": "2026-10-09T10:00:00.5Z"},
    {"action": "list", "start_date": "2026-10-01", "end_date": "2026-10-08"},
    {"action": "intersect", "match": ["x"], "start_date": "2026-10-01T00:00:00Z"},
    {"action": "traverse", "sr_id": UNKNOWN, "end_date": "2026-10-09T12:00:00Z"},
    {"action": "changes", "since": "2026-10-01"},
    {"action": "changes", "since": "2026-10-01T00:00:00+02:00", "as_of": "2026-10-09T12:00:00Z"},
]


@pytest.mark.parametrize("zone", ["UTC", LA_NAME])
async def test_the_row_reads_the_window_the_tool_runs_with(node_dir: Path, wall: Wall, zone):
    """For every call whose row reads a window, the tool's window at the turn's now is the
    row's ``asked`` (changes reads ``(since, as_of]``: ``[since + 1 ms, as_of + 1 ms)``)."""
    (node_dir / "config.toml").write_text(f'zone = "{zone}"\n')
    async with Node.open(node_dir, wall=wall) as node:
        guard = node.windows
        turn = guard.turn_of(context())
        for args in READ_BACK:
            found = guard.decision("e_timeline", args, turn)
            assert found is not None
            asked = found.row.asked
            assert asked is not None, args
            spec = closed_at(parse_spec(args, {}, guard.zone), turn.now)
            if spec.action == "changes":
                assert spec.since_ms is not None
                assert spec.as_of_ms is not None
                ran = (spec.since_ms + 1, spec.as_of_ms + 1)
            else:
                ran = (spec.start_ms, spec.end_ms)
            assert ran == (asked.start, asked.end), args


# -- refused by the tool: no row -------------------------------------------------------------


async def test_an_unknown_anchor_files_no_row(node, make_caller):
    alice = await make_caller()
    text = await refused(
        node, "e_timeline", alice, action="traverse", sr_id=UNKNOWN, turn=context()
    )
    assert text == f"Invalid timeline spec: unknown sr_id: {UNKNOWN}"
    assert (await node.call_windows(alice))["rows"] == []


async def test_a_hidden_anchor_files_no_row_and_answers_like_an_unknown_one(node, make_caller):
    alice, bob = await make_caller(), await make_caller("bob")
    olga = await make_caller("olga", "elsewhere")
    private = str((await node.e_write(bob, title="bob's", visibility="private"))["sr_id"])
    theirs = str((await node.e_write(olga, title="olga's"))["sr_id"])
    for i, anchor in enumerate((private, theirs)):
        text = await refused(
            node, "e_timeline", alice, action="traverse", sr_id=anchor, turn=context(f"c{i}")
        )
        assert text == f"Invalid timeline spec: unknown sr_id: {anchor}"
    assert (await node.call_windows(alice))["rows"] == []
    own = await node.e_timeline(bob, action="traverse", sr_id=private, turn=context("b1"))
    assert own["results"] == []
    assert (await the_row(node, bob, "b1"))["how"] == "not-filled"


async def test_a_since_after_both_clocks_files_no_row(node, wall, make_caller):
    """A since the turn's window cannot read (the row would be ``unread``, the call run as
    sent to the node's clock) and that the tool refuses: nothing is filed."""
    alice = await make_caller()
    wall.now = NOW
    text = await refused(
        node, "e_timeline", alice, action="changes", since="2026-10-10T00:00:00Z", turn=context()
    )
    assert text == "'since' must be before 'as_of'"
    assert (await node.call_windows(alice))["rows"] == []
