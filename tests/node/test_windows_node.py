"""Time windows on a real node (docs/time-windows.md): e_timeline's own forms, filing before
dispatch, refusals that stop the call, fills that run, trimming, the latest row of a call,
call_windows and who may read it, and every bad input storing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from node.access.callers import Caller
from node.errors import ConfigError, Refusal
from node.node import Node
from node.tools.windows import RefusedBeforeDispatch
from node.windows.errors import DeclarationError
from tests.node.helpers import Wall, refused, stored
from tests.node.windowkit import LA_NAME, MIN, NOW, NOW_TEXT, M, T, rng

HOUR = 60 * MIN
pytestmark = pytest.mark.asyncio


@pytest.fixture
def wall() -> Wall:
    """Two days before the turn's now: SRs are written at chosen times after it (the node's
    clock never runs back)."""
    return Wall(NOW - 48 * HOUR)


def context(call_id: str = "c1", turn: int = 1, **more: Any) -> dict[str, Any]:
    return {"turn": turn, "toolCallId": call_id, "now": NOW_TEXT, "zone": LA_NAME} | more


def answered(r: dict[str, str]) -> dict[str, Any]:
    return {"source": "answered", "mention": 0, "range": r, "zone": LA_NAME}


async def write_at(node: Node, wall: Wall, caller: Caller, ms: int, title: str) -> str:
    wall.now = ms
    written = await node.e_write(caller, title=title)
    return str(written["sr_id"])


@pytest_asyncio.fixture
async def three(node: Node, wall: Wall, make_caller: Any) -> dict[str, str]:
    """SRs written yesterday, at 15:10Z and at 15:30Z today (the window M holds the last two)."""
    alice = await make_caller()
    written = {
        "yesterday": await write_at(node, wall, alice, NOW - 30 * HOUR, "yesterday"),
        "ten": await write_at(node, wall, alice, NOW - 30 * MIN, "ten past"),
        "thirty": await write_at(node, wall, alice, NOW - 10 * MIN, "half past"),
    }
    wall.now = NOW
    return written


async def rows(node: Node, caller: Caller, **args: Any) -> list[dict[str, Any]]:
    return list((await node.call_windows(caller, **args))["rows"])


def titles(answer: dict[str, Any]) -> list[str]:
    return sorted(r["title"] for r in answer["results"])


@pytest.mark.usefixtures("three")
async def test_a_filled_call_runs_with_the_filled_values(node, make_caller):
    alice = await make_caller()
    answer = await node.e_timeline(alice, action="list", turn=context(windows=[answered(M)]))
    assert titles(answer) == ["half past", "ten past"]
    (row,) = await rows(node, alice)
    assert row == {
        "kind": "call-window",
        "turn": 1,
        "iteration": 0,
        "toolCallId": "c1",
        "toolName": "e_timeline",
        "how": "filled",
        "form": 1,
        "asked": M,
        "person": M | {"source": "answered", "mention": 0},
    }


@pytest.mark.usefixtures("three")
async def test_a_refused_call_does_not_run_and_answers_its_row(node, make_caller):
    alice = await make_caller()
    with pytest.raises(RefusedBeforeDispatch) as info:
        await node.e_timeline(alice, action="list", turn=context(windows=[answered(T)]))
    (row,) = await rows(node, alice)
    assert row["how"] == "refused"
    assert row["refused"] == "time-future"
    assert info.value.answer() == {
        "error": "refused before dispatch: time-future",
        "call_window": row,
    }


async def test_a_refused_call_never_reaches_the_tool(node, make_caller):
    alice = await make_caller()
    ran: list[Any] = []

    async def run(args: Any, now: int | None) -> dict[str, Any]:
        ran.append((args, now))
        return {}

    async def check(args: Any, now: int) -> None:
        pass

    guard, listing = node.windows, {"action": "list"}
    refusing = context(windows=[answered(T)])
    with pytest.raises(RefusedBeforeDispatch):
        await guard.call(alice, "e_timeline", listing, refusing, run=run, check=check)
    assert ran == []
    filling = context(windows=[answered(M)])
    await guard.call(alice, "e_timeline", listing, filling, run=run, check=check)
    assert ran == [({"action": "list", "start_date": M["from"], "end_date": M["to"]}, NOW)]


@pytest.mark.usefixtures("three")
async def test_list_with_only_start_date_reads_to_now(node, make_caller):
    alice = await make_caller()
    answer = await node.e_timeline(alice, action="list", start_date="2026-10-09", turn=context())
    assert titles(answer) == ["half past", "ten past"]
    (row,) = await rows(node, alice)
    assert row["how"] == "model"
    assert row["form"] == 0
    assert row["asked"] == rng("2026-10-09T00:00:00Z", "2026-10-09T15:40:00.001Z")


@pytest.mark.usefixtures("three")
async def test_changes_with_only_since_is_read(node, make_caller):
    alice = await make_caller()
    await node.e_timeline(alice, action="changes", since="2026-10-09T15:00:00Z", turn=context())
    (row,) = await rows(node, alice)
    assert (row["how"], row["form"]) == ("model", 0)
    assert row["asked"] == rng("2026-10-09T15:00:00.001Z", "2026-10-09T15:40:00.001Z")


async def test_changes_is_filled_half_open(node, make_caller, three):
    alice = await make_caller()
    answer = await node.e_timeline(alice, action="changes", turn=context(windows=[answered(M)]))
    assert sorted(c["sr_id"] for c in answer["changes"]) == sorted([three["ten"], three["thirty"]])
    (row,) = await rows(node, alice)
    assert (row["how"], row["form"]) == ("filled", 0)


@pytest.mark.usefixtures("three")
async def test_a_bound_end_date_includes_the_day(node, make_caller):
    alice = await make_caller()
    whole = {"start_date": "2026-10-08", "end_date": "2026-10-08"}
    answer = await node.e_timeline(alice, action="list", **whole, turn=context())
    assert titles(answer) == ["yesterday"]
    (row,) = await rows(node, alice)
    assert row["asked"] == rng("2026-10-08T00:00:00Z", "2026-10-09T00:00:00Z")


@pytest.mark.parametrize(
    ("args", "turn"),
    [
        ({"action": "find", "query": "past"}, context(windows=[answered(M)])),
        ({"action": "list"}, None),
    ],
)
@pytest.mark.usefixtures("three")
async def test_no_row_without_forms_or_context(node, make_caller, args, turn):
    alice = await make_caller()
    await node.e_timeline(alice, **args, turn=turn)
    assert await rows(node, alice) == []


BAD_TURNS = [
    ([], "the turn's context must be an object"),
    ({"turn": 1}, "toolCallId must be a string of 1 to 256 characters"),
    (context(zone="PST"), "zone 'PST' is not an IANA zone name"),
    (context(zone="+05:30"), "zone '+05:30' is not an IANA zone name"),
    (context(now="2026-10-09 15:40"), "now: "),
    (context(turn=-1), "turn must be a non-negative integer"),
    (context(windows=[{"source": "said", "mention": 0, "range": M}]), "windows[0].source"),
    (context(windows=[{"source": "answered", "range": M}]), "windows[0].mention is required"),
    (context(windows=[answered(M) | {"mention": 1001}]), "windows[0].mention must be an integer"),
    (context(windows=[answered(M) | {"mention": True}]), "windows[0].mention must be an integer"),
    (context(windows=[answered(rng(M["to"], M["from"]))]), "from must be before to"),
    (context(windows=[answered(M) | {"zone": "PST"}]), "windows[0].zone 'PST'"),
    (context(windows=[answered(M) | {"lookback": "90x"}]), "windows[0].lookback"),
    (context(open=[[{"from": "x", "to": "y"}]]), "open[0][0].from"),
    (context(mentions=0, windows=[answered(M)]), "mentions must be at least 1"),
    (context(quotes=["x"]), "quotes must be an object"),
    (context(bogus=1), "unknown key bogus"),
]


@pytest.mark.parametrize(("turn", "why"), BAD_TURNS)
async def test_a_bad_turn_context_is_refused_and_stores_nothing(node, make_caller, turn, why):
    alice = await make_caller()
    text = await refused(node, "e_timeline", alice, action="list", turn=turn)
    assert text.startswith("invalid memlane/turn: ")
    assert why in text


async def test_the_tools_own_refusal_wins_and_stores_nothing(node, make_caller):
    alice = await make_caller()
    text = await refused(
        node, "e_timeline", alice, action="list", start_date="nope", turn=context()
    )
    assert text.startswith("Invalid timeline spec: start_date")
    reader = await make_caller("reader", scopes=("write:workspace",))
    before = await stored(node)
    with pytest.raises(Refusal, match="read:workspace"):
        await node.e_timeline(reader, action="list", turn=context(windows=[answered(T)]))
    assert await stored(node) == before


@pytest.mark.usefixtures("three")
async def test_the_latest_row_of_a_call_wins(node, make_caller):
    alice = await make_caller()
    await node.e_timeline(alice, action="list", turn=context(open=[[M]]))
    await node.e_timeline(alice, action="list", turn=context(windows=[answered(M)]))
    await node.e_timeline(alice, action="list", turn=context("c2", turn=2))
    every = await rows(node, alice)
    assert [(r["toolCallId"], r["how"]) for r in every] == [
        ("c1", "not-filled"),
        ("c1", "filled"),
        ("c2", "not-filled"),
    ]
    latest = await rows(node, alice, latest=True)
    assert [(r["toolCallId"], r["how"]) for r in latest] == [("c1", "filled"), ("c2", "not-filled")]
    assert [r["turn"] for r in await rows(node, alice, turn=2)] == [2]
    assert await rows(node, alice, tool="e_audit") == []
    assert len(await rows(node, alice, tool_call_id="c1")) == 2


async def test_rows_are_read_by_their_principal_and_admins_only(node, make_caller):
    alice, bob = await make_caller(), await make_caller("bob")
    admin = await make_caller("root", scopes=("admin:workspace",))
    other = await make_caller("root", "elsewhere", scopes=("admin:workspace",))
    await node.e_timeline(alice, action="list", turn=context())
    await node.e_timeline(bob, action="list", turn=context("b1"))
    assert [r["toolCallId"] for r in await rows(node, alice)] == ["c1"]
    assert [r["toolCallId"] for r in await rows(node, bob)] == ["b1"]
    assert [r["toolCallId"] for r in await rows(node, admin)] == ["c1", "b1"]
    assert await rows(node, other) == []
    hidden = await node.call_windows(alice, tool_call_id="b1")
    assert hidden == {"rows": [], "page": 1, "page_size": 50, "has_more": False}


async def test_call_windows_pages(node, make_caller):
    alice = await make_caller()
    for i in range(3):
        await node.e_timeline(alice, action="list", turn=context(f"c{i}"))
    first = await node.call_windows(alice, page_size=2)
    second = await node.call_windows(alice, page_size=2, page=2)
    assert [r["toolCallId"] for r in first["rows"] + second["rows"]] == ["c0", "c1", "c2"]
    assert (first["has_more"], second["has_more"]) == (True, False)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ({"bogus": 1}, "call_windows does not take bogus"),
        ({"turn": -1}, "invalid turn: must be an integer"),
        ({"turn": "1"}, "invalid turn: must be an integer"),
        ({"tool": ""}, "invalid tool: must be a string of 1 to 128 characters"),
        ({"latest": "yes"}, "invalid latest: must be true or false"),
        ({"page_size": 0}, "invalid page_size: must be an integer from 1 to 200"),
    ],
)
async def test_call_windows_refuses_bad_arguments(node, make_caller, args, text):
    alice = await make_caller()
    assert (await refused(node, "call_windows", alice, **args)).startswith(text)


@pytest.mark.usefixtures("three")
async def test_a_widened_fill_to_a_filtering_tool_keeps_only_the_asked(node, make_caller):
    node.declare_periods(
        {
            "e_timeline": {
                "forms": [{"kind": "day", "argument": "start_date", "actions": ["list"]}],
                "facts": {"filtersToAsked": True},
            }
        }
    )
    alice = await make_caller()
    early = rng("2026-10-09T15:20:00Z", "2026-10-09T15:35:00Z")
    answer = await node.e_timeline(alice, action="list", turn=context(windows=[answered(early)]))
    assert titles(answer) == ["half past"]
    (row,) = await rows(node, alice)
    assert row["trimmedByTool"] is True
    assert row["sent"] == rng("2026-10-09T00:00:00Z", "2026-10-10T00:00:00Z")


@pytest.mark.parametrize(
    ("decl", "why"),
    [
        ({"forms": [{"kind": "week", "argument": "start_date"}]}, "kind must be one of"),
        ({"forms": [{"kind": "day", "argument": "nope"}]}, "'nope' is not in the tool's input"),
        ({"forms": [{"kind": "day", "argument": "page"}]}, "'page' must be a string"),
    ],
)
async def test_a_bad_declaration_fails_at_start_up(node, decl, why):
    with pytest.raises(DeclarationError, match=why):
        node.declare_periods({"e_timeline": decl})


async def test_a_zone_that_is_not_iana_fails_at_start_up(node_dir: Path, wall: Wall):
    (node_dir / "config.toml").write_text('zone = "PST"\n')
    with pytest.raises(ConfigError, match="PST"):
        async with Node.open(node_dir, wall=wall):
            pass


async def test_retention_from_the_config_refuses_older_windows(node_dir: Path, wall: Wall):
    (node_dir / "config.toml").write_text('retention = "1d"\nzone = "America/Los_Angeles"\n')
    async with Node.open(node_dir, wall=wall) as node:
        issued = await node.create_token("alice", "team", ["read:workspace"])
        alice = await node.authenticate(issued.token)
        old = rng("2026-10-01T00:00:00Z", "2026-10-02T00:00:00Z")
        with pytest.raises(RefusedBeforeDispatch, match="beyond-retention"):
            await node.e_timeline(alice, action="list", turn=context(windows=[answered(old)]))
        week = {"source": "answered", "mention": 0, "lookback": "2d"}
        await node.e_timeline(alice, action="list", turn=context("c2", windows=[week]))
        latest = (await node.call_windows(alice, tool_call_id="c2"))["rows"][0]
        assert latest["partlyBeyondRetention"] is True


async def test_a_bare_date_is_read_in_the_nodes_zone(node_dir: Path, wall: Wall):
    (node_dir / "config.toml").write_text('zone = "America/Los_Angeles"\n')
    async with Node.open(node_dir, wall=wall) as node:
        issued = await node.create_token("alice", "team", ["read:workspace", "write:workspace"])
        alice = await node.authenticate(issued.token)
        late = await write_at(node, wall, alice, NOW - 10 * HOUR - 40 * MIN, "Oct 8, 22:00 LA")
        wall.now = NOW
        day = {"start_date": "2026-10-09", "end_date": "2026-10-09"}
        answer = await node.e_timeline(alice, action="list", **day, turn=context())
        assert answer["results"] == []
        (row,) = await rows(node, alice)
        assert row["asked"] == rng("2026-10-09T07:00:00Z", "2026-10-10T07:00:00Z")
        eve = await node.e_timeline(
            alice, action="list", start_date="2026-10-08", end_date="2026-10-08"
        )
        assert [r["sr_id"] for r in eve["results"]] == [late]


@pytest.mark.usefixtures("three")
async def test_rows_are_derived_from_the_log(node, make_caller):
    alice = await make_caller()
    await node.e_timeline(alice, action="list", turn=context(open=[[M]]))
    await node.e_timeline(alice, action="list", turn=context(windows=[answered(M)]))
    before = await rows(node, alice)
    assert await node.rebuild_views() > 0
    assert await rows(node, alice) == before
    entries = [e for e in await node.entries() if e.header.kind == "call.window"]
    assert len(entries) == 2


async def test_an_action_that_is_not_a_name_files_nothing(node, make_caller):
    alice = await make_caller()
    text = await refused(node, "e_timeline", alice, action=["list"], turn=context())
    assert text.startswith("Invalid timeline spec: action must be one of")


DIFFERENTIAL_ASKS = [
    {},
    {"page_size": 2},
    {"page_size": 2, "page": 2},
    {"latest": True},
    {"turn": 1},
    {"tool_call_id": "c2"},
    {"tool": "e_timeline", "page_size": 3},
]


async def _alices_answers(path: Path, wall: Wall, *, others: bool) -> list[dict[str, Any]]:
    await Node.init(path, wall=wall)
    async with Node.open(path, wall=wall) as node:
        callers = {}
        for who, space in (("alice", "team"), ("bob", "team"), ("alice", "elsewhere")):
            issued = await node.create_token(who, space, ["read:workspace"])
            callers[who, space] = await node.authenticate(issued.token)
        alice = callers["alice", "team"]
        for i in range(4):
            for key in (("bob", "team"), ("alice", "elsewhere")) if others else ():
                await node.e_timeline(callers[key], action="list", turn=context(f"c{i}", turn=i))
            mine = context(f"c{i}", turn=i, windows=[answered(M)])
            await node.e_timeline(alice, action="list", turn=mine)
        return [await node.call_windows(alice, **a) for a in DIFFERENTIAL_ASKS]


async def test_rows_a_caller_cannot_read_change_nothing_it_sees(tmp_path: Path, wall: Wall):
    """Differential (docs/authority.md §The differential test): the same calls of alice's on a node
    where bob and another workspace also filed rows, and on one where they never did, answer
    alike."""
    crowded = await _alices_answers(tmp_path / "crowded", wall, others=True)
    alone = await _alices_answers(tmp_path / "alone", wall, others=False)
    assert crowded == alone
    assert len(crowded[0]["rows"]) == 4


@pytest.mark.parametrize(
    ("turn", "why"),
    [
        (
            context(windows=[answered(rng("1969-12-31T00:00:00Z", "1970-01-02T00:00:00Z"))]),
            "windows[0].range must not start before 1970-01-01",
        ),
        (
            context(windows=[{"source": "control", "lookback": "99999999w"}]),
            "windows[0].lookback must not start before 1970-01-01",
        ),
        (
            context(open=[[rng("0001-01-01T00:00:00Z", "0001-01-02T00:00:00Z")]]),
            "open[0][0] must not start before 1970-01-01",
        ),
        (context(now="1969-07-20T20:17:00Z"), "now must be a millisecond instant after 1970"),
    ],
)
async def test_windows_before_the_epoch_are_refused(node, make_caller, turn, why):
    alice = await make_caller()
    assert why in await refused(node, "e_timeline", alice, action="list", turn=turn)


async def test_windows_at_the_end_of_time_are_refused(node, make_caller):
    alice = await make_caller()
    late = rng("9999-12-30T00:00:00Z", "9999-12-31T00:00:00Z")
    text = await refused(
        node, "e_timeline", alice, action="list", turn=context(windows=[answered(late)])
    )
    assert text == "invalid memlane/turn: windows[0].range must end by 9999-12-30"
