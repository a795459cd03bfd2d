"""The episodes page (node/web/episodes.py), served by uvicorn and asked over real HTTP: the
caller's episodes as a time line newest first, paged, an episode's chain opened by its id
with its amendments shown, summaries rendered as text, the tools' refusals escaped, and a
page that is byte for byte the same whatever the token cannot read."""

from __future__ import annotations

import re

import pytest

from node.node import Node
from node.web import episodes
from protocol.timefmt import format_instant
from tests.node.helpers import Wall
from tests.node.webkit import Answer, ask, served

pytestmark = pytest.mark.asyncio

MINUTE = 60_000
_SCOPES = ("read:workspace", "write:workspace")


async def _token(node: Node, principal: str = "alice", workspace: str = "team") -> str:
    return (await node.create_token(principal, workspace, _SCOPES)).token


async def _get(port: int, path: str, token: str) -> Answer:
    return await ask(port, "GET", path, cookie=f"memlane_token={token}")


def _shown(body: str) -> list[str]:
    """The times of the episodes shown, in order."""
    return re.findall(r'<time datetime="([^"]+)">', body)


async def _three(node: Node, wall: Wall, token: str) -> list[str]:
    """Three episodes a minute apart (the last one's summary hostile); the first amended."""
    who = await node.authenticate(token)
    ids = []
    for summary in ("indexed the repo", "ran the tests", "<script>alert(1)</script>"):
        wall.now += MINUTE
        ids.append((await node.work_record(who, summary=summary, tool="shell", tags=["ops"]))["id"])
    await node.work_result(who, id=ids[0], status="done", task_result=0.9)
    return ids


async def test_episodes_in_time_order_and_a_chain(
    node: Node, wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = wall.now
    token = await _token(node)
    ids = await _three(node, wall, token)
    times = [format_instant(start + n * MINUTE, fixed=True) for n in (3, 2, 1)]
    async with served(node) as port:
        listed = await _get(port, "/episodes", token)
        chain = await _get(port, f"/episodes?id={ids[2]}", token)
        monkeypatch.setattr(episodes, "PAGE_SIZE", 2)
        first = await _get(port, "/episodes", token)
        second = await _get(port, "/episodes?page=2", token)
    assert listed.status == chain.status == 200
    assert _shown(listed.body) == times
    assert (
        listed.body.index("&lt;script&gt;alert(1)&lt;/script&gt;")
        < listed.body.index("ran the tests")
        < listed.body.index("indexed the repo")
    )
    assert "<script>" not in listed.body + chain.body
    assert f'<a href="/episodes?id={ids[1]}">its chain</a>' in listed.body
    section = chain.body.split('<section class="chain">')[1].split("</section>")[0]
    assert f"The chain from <code>{ids[2]}</code>" in section
    assert _shown(section) == times
    assert '<span class="status">done</span>' in section  # the amendment of the first
    assert "result 0.9" in section
    assert f'<li class="episode opened">\n  <p class="when"><time datetime="{times[0]}">' in (
        section
    )
    assert _shown(first.body) == times[:2]
    assert '<a href="?page=2">next page</a>' in first.body
    assert _shown(second.body) == times[2:]
    assert '<a href="?page=1">previous page</a>' in second.body


async def test_a_hidden_episode_opens_as_one_never_written(node: Node, wall: Wall) -> None:
    alice, bob = await _token(node), await _token(node, "bob")
    hidden = (await _three(node, wall, bob))[0]
    never = "0192ffff-ffff-7fff-8fff-ffffffffffff"
    async with served(node) as port:
        shown = await _get(port, f"/episodes?id={hidden}", alice)
        unknown = await _get(port, f"/episodes?id={never}", alice)
    assert shown.status == unknown.status == 200
    assert f"no episode {hidden} is available to this caller" in shown.body
    assert shown.body.replace(hidden, never) == unknown.body


async def test_a_bad_argument_is_the_tools_refusal_shown_escaped(node: Node) -> None:
    token = await _token(node)
    async with served(node) as port:
        status = await _get(port, "/episodes?status=" + "x" * 65, token)
        page = await _get(port, "/episodes?page=%3Cb%3E", token)
        opened = await _get(port, "/episodes?id=" + "y" * 257, token)
    assert status.status == page.status == opened.status == 400
    assert "invalid status: must be a string of 1 to 64 characters" in status.body
    assert "invalid page: must be an integer from 1 to 10000" in page.body
    assert "invalid id: must be a string of 1 to 256 characters" in opened.body
    assert "<b>" not in page.body


async def test_the_page_is_alike_with_and_without_episodes_the_token_cannot_read(
    node: Node, wall: Wall
) -> None:
    alice, bob = await _token(node), await _token(node, "bob")
    carol = await _token(node, "carol", "elsewhere")
    ids = await _three(node, wall, alice)
    paths = ["/episodes", f"/episodes?id={ids[2]}", "/episodes?tool=shell&status=done"]
    async with served(node) as port:
        before = [(await _get(port, p, t)).body for t in (alice, bob) for p in paths]
        await _three(node, wall, bob)
        await _three(node, wall, carol)
        after = [(await _get(port, p, t)).body for t in (alice, bob) for p in paths]
    assert _shown(before[0]) == _shown(after[0]) != []
    assert after[:3] == before[:3]
    assert after[3:] != before[3:]  # the check can tell
