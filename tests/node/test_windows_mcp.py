"""Time windows end to end over MCP (docs/time-windows.md): a harness passes the turn's
context in ``_meta["memlane/turn"]`` to ``memlane mcp`` over stdio (a real subprocess, a real
data directory); a call with the person's window and no period arguments is filled and runs,
a call whose window lies in the future is refused before dispatch with its row, and the rows
are listed — by call_windows, on another node of the mesh, after sync.
The same over streamable HTTP (``memlane serve``), where another principal sees none of them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from node.node import Node, system_wall
from protocol.timefmt import format_instant
from tests.node.clikit import MEMLANE
from tests.node.mcpkit import TIMEOUT, make_site, serve, session
from tests.node.synckit import converged, make_mesh, syncing

pytestmark = pytest.mark.asyncio
HOUR = 3_600_000


def client(data: Path, token: str) -> Client:
    params = StdioServerParameters(
        command=str(MEMLANE), args=["mcp", "--data", str(data), "--token", token]
    )
    return Client(params, read_timeout_seconds=TIMEOUT)


def decoded(result: CallToolResult) -> dict[str, Any]:
    (block,) = result.content
    assert block.type == "text"
    data: dict[str, Any] = json.loads(block.text)
    assert data == result.structured_content
    return data


async def token(data: Path) -> str:
    async with Node.open(data) as node:
        issued = await node.create_token("alice", "team", ["read:workspace", "write:workspace"])
    return issued.token


def turn(call_id: str, now: int, start: int, end: int) -> dict[str, Any]:
    window = {
        "source": "answered",
        "mention": 0,
        "zone": "America/Los_Angeles",
        "range": {"from": format_instant(start), "to": format_instant(end)},
    }
    return {
        "memlane/turn": {
            "turn": 3,
            "iteration": 0,
            "toolCallId": call_id,
            "now": format_instant(now),
            "zone": "America/Los_Angeles",
            "windows": [window],
        }
    }


async def test_a_filled_call_runs_and_its_row_reaches_another_node(tmp_path: Path) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], system_wall)
    on_a, on_b = await token(dirs["A"]), await token(dirs["B"])
    now = time.time_ns() // 1_000_000 // 1000 * 1000
    async with client(dirs["A"], on_a) as c:
        await c.call_tool("e_write", {"title": "written now"})
        unfilled = decoded(await c.call_tool("e_timeline", {"action": "list"}))
        assert [r["title"] for r in unfilled["results"]] == ["written now"]
        # The person asked about two hours ago to one hour ago: filled, the SR is outside it.
        past = turn("call-past", now, now - 2 * HOUR, now - HOUR)
        filled = await c.call_tool("e_timeline", {"action": "list"}, meta=past)  # type: ignore[arg-type]
        assert not filled.is_error
        assert decoded(filled)["results"] == []
        ahead = turn("call-ahead", now, now + HOUR, now + 2 * HOUR)
        refused = await c.call_tool("e_timeline", {"action": "list"}, meta=ahead)  # type: ignore[arg-type]
        assert refused.is_error
        answer = decoded(refused)
        assert answer["error"] == "refused before dispatch: time-future"
        assert "results" not in answer
        rows_a = decoded(await c.call_tool("call_windows", {}))["rows"]
    assert [(r["toolCallId"], r["how"]) for r in rows_a] == [
        ("call-past", "filled"),
        ("call-ahead", "refused"),
    ]
    assert rows_a[1] == answer["call_window"]
    assert rows_a[0]["form"] == 1
    assert rows_a[0]["asked"] == past["memlane/turn"]["windows"][0]["range"]

    async with (
        Node.open(dirs["A"]) as a,
        Node.open(dirs["B"]) as b,
        syncing(a) as sync_a,
        syncing(b) as sync_b,
    ):
        sync_b.dial(*await sync_a.listen())
        await converged([a, b], [sync_a, sync_b])
    async with client(dirs["B"], on_b) as c:
        rows_b = decoded(await c.call_tool("call_windows", {"tool": "e_timeline"}))["rows"]
        latest = decoded(await c.call_tool("call_windows", {"tool_call_id": "call-past"}))
    assert rows_b == rows_a
    assert latest["rows"] == rows_a[:1]


async def test_turn_is_not_an_argument(tmp_path: Path) -> None:
    dirs = await make_mesh(tmp_path, ["A"], system_wall)
    async with client(dirs["A"], await token(dirs["A"])) as c:
        result = await c.call_tool("e_timeline", {"action": "list", "turn": {"turn": 1}})
    assert result.is_error
    assert decoded(result) == {
        "error": "Invalid timeline spec: unknown argument turn (the turn's context travels in "
        "_meta under memlane/turn)"
    }


async def test_the_turns_context_over_streamable_http(tmp_path: Path) -> None:
    site = make_site(tmp_path / "node")
    served = serve(site, "--mcp-http", "127.0.0.1:0")
    try:
        now = time.time_ns() // 1_000_000 // 1000 * 1000
        async with session(served.url, site.tokens["alice"]) as c:
            past = turn("http-past", now, now - 2 * HOUR, now - HOUR)
            filled = await c.call_tool("e_timeline", {"action": "list"}, meta=past)  # type: ignore[arg-type]
            assert decoded(filled)["results"] == []
            ahead = turn("http-ahead", now, now + HOUR, now + 2 * HOUR)
            refused = await c.call_tool("e_timeline", {"action": "list"}, meta=ahead)  # type: ignore[arg-type]
            assert decoded(refused)["error"] == "refused before dispatch: time-future"
        async with session(served.url, site.tokens["bob"]) as c:
            assert decoded(await c.call_tool("call_windows", {}))["rows"] == []
        async with session(served.url, site.tokens["alice"]) as c:
            rows = decoded(await c.call_tool("call_windows", {"latest": True}))["rows"]
        assert [(r["toolCallId"], r["how"]) for r in rows] == [
            ("http-past", "filled"),
            ("http-ahead", "refused"),
        ]
    finally:
        code, err = served.stop()
    assert code == 0, err
