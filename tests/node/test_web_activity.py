"""The activity page (docs/web.md §Pages), served by uvicorn on loopback and asked over real
HTTP: the counts per hour of writes at known times, as an inline SVG chart (a bar and a
``<title>`` per slot, no inline style) and a table; byte for byte the same page for a token
whether or not the node holds versions it cannot read; refusals shown escaped."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest

from node.node import Node
from tests.node.activitykit import T0, WINDOW, writes
from tests.node.helpers import Wall
from tests.node.webkit import ask, served

pytestmark = pytest.mark.asyncio

_RECTS = re.compile(r'<rect class="bar"[^>]*><title>([^<]*)</title></rect>')


@asynccontextmanager
async def opened(path: Path, wall: Wall) -> AsyncIterator[Node]:
    await Node.init(path, wall=wall)
    async with Node.open(path, wall=wall) as node:
        yield node


async def token(node: Node, principal: str, *scopes: str, workspace: str = "team") -> str:
    return (
        await node.create_token(
            principal, workspace, scopes or ("read:workspace", "write:workspace")
        )
    ).token


async def page(node: Node, token: str, query: dict[str, str] | None = None) -> tuple[int, str]:
    path = "/activity" + (f"?{urlencode(query)}" if query else "")
    async with served(node) as port:
        answer = await ask(port, "GET", path, cookie=f"memlane_token={token}")
    return answer.status, answer.body


async def test_the_counts_per_hour_of_writes_at_known_times(node: Node, wall: Wall) -> None:
    alice = await node.authenticate(await token(node, "alice"))
    await writes(node, wall, alice)
    status, body = await page(node, await token(node, "alice"), WINDOW)
    assert status == 200
    assert _RECTS.findall(body) == [
        "2026-09-21T14:00:00.000Z: 2 versions",
        "2026-09-21T15:00:00.000Z: 0 versions",
        "2026-09-21T16:00:00.000Z: 2 versions",
        "2026-09-21T17:00:00.000Z: 0 versions",
    ]
    window = "from 2026-09-21T14:00:00.000Z to 2026-09-21T18:00:00.000Z (UTC), counted per hour"
    assert f"4 versions written {window}" in body
    assert '<td class="instant">2026-09-21T16:00:00.000Z</td><td class="num">2</td>' in body
    assert "2026-09-21T15:00:00.000Z</td>" not in body  # the table lists the slots with writes
    assert ">14:00</text>" in body  # the slot axis
    assert ">17:00</text>" in body
    assert ">2</text>" in body  # the count axis tops at the highest count
    assert "style=" not in body
    assert "<script" not in body


async def test_the_default_page_and_by_day(node: Node, wall: Wall) -> None:
    alice = await node.authenticate(await token(node, "alice"))
    await writes(node, wall, alice)
    reader = await token(node, "alice")
    _, hours = await page(node, reader)
    assert len(_RECTS.findall(hours)) == 48
    assert _RECTS.findall(hours)[-2] == "2026-09-21T16:00:00.000Z: 2 versions"
    _, days = await page(node, reader, {"by": "day"})
    assert len(_RECTS.findall(days)) == 30
    assert _RECTS.findall(days)[-1] == "2026-09-21T00:00:00.000Z: 4 versions"
    assert '<option value="day" selected>' in days


async def test_the_page_is_the_same_with_and_without_versions_it_cannot_read(
    tmp_path: Path,
) -> None:
    """Two nodes, alike but for bob's private SRs and another workspace's on one: alice's
    page is byte for byte the same on both; the admin's is not."""
    bodies: dict[str, dict[str, str]] = {}
    for name, hidden in (("plain", False), ("crowded", True)):
        wall = Wall(T0)
        async with opened(tmp_path / name, wall) as node:
            alice = await node.authenticate(await token(node, "alice"))
            others = [
                await node.authenticate(await token(node, "bob")),
                await node.authenticate(await token(node, "carol", workspace="elsewhere")),
            ]
            await writes(node, wall, alice, *(others if hidden else ()))
            shown = {
                who: (await page(node, await token(node, who, *scopes), WINDOW))[1]
                for who, scopes in (("alice", ()), ("root", ("admin:workspace",)))
            }
            bodies[name] = shown
    assert bodies["plain"]["alice"] == bodies["crowded"]["alice"]
    assert "2026-09-21T14:00:00.000Z: 2 versions" in bodies["crowded"]["alice"]
    assert bodies["plain"]["root"] != bodies["crowded"]["root"]
    assert "2026-09-21T14:00:00.000Z: 3 versions" in bodies["crowded"]["root"]


async def test_refusals_are_shown_escaped(node: Node) -> None:
    reader = await token(node, "alice")
    status, body = await page(node, reader, {"start_date": "<script>alert(1)</script>"})
    assert status == 400
    assert "invalid start_date" in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<script>" not in body
    assert '<rect class="bar"' not in body
    status, body = await page(node, reader, {"by": "week"})
    assert (status, "invalid by: must be one of hour, day" in body) == (400, True)
    status, body = await page(node, await token(node, "alice", "write:workspace"))
    assert status == 403
    assert "this call needs the read:workspace scope on workspace team" in body
