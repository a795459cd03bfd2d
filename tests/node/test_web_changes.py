"""The changes page (node/web/changes.py), served by uvicorn and asked over real HTTP: what
changed between two moments picked as a browser sends them (UTC), each change's kind and
fields, paging that keeps page 1's window, the tool's refusals shown escaped, and a page
that is byte for byte the same whatever the token cannot read."""

from __future__ import annotations

import html
import re

import pytest

from node.node import Node
from node.web import changes
from protocol.timefmt import format_instant
from tests.node.bundlekit import caller
from tests.node.helpers import Wall
from tests.node.webkit import Answer, ask, served

pytestmark = pytest.mark.asyncio

MINUTE = 60_000


def _local(ms: int) -> str:
    """``ms`` as a datetime-local picker sends it: to the minute, no offset."""
    return format_instant(ms)[:16]


async def _reader(node: Node, principal: str = "alice") -> str:
    return (await node.create_token(principal, "team", ("read:workspace",))).token


async def _get(port: int, path: str, token: str) -> Answer:
    return await ask(port, "GET", path, cookie=f"memlane_token={token}")


def _kinds(body: str) -> list[tuple[str, str]]:
    """Each change shown, in order: its kind and its SR."""
    return re.findall(r'<span class="kind">(\w+)</span> <a href="/record\?sr_id=([^"]+)">', body)


async def test_the_changes_between_two_moments(node: Node, wall: Wall) -> None:
    start = wall.now
    alice = await caller(node)
    a = (await node.e_write(alice, title="plan", text="ship friday"))["sr_id"]
    wall.now += MINUTE
    b = (await node.e_write(alice, title="lunch", text="noon"))["sr_id"]
    wall.now = start + 60 * MINUTE
    await node.e_write(alice, sr_id=a, title="plan, moved", text="ship monday")
    await node.e_delete(alice, sr_id=b)
    wall.now = start + 120 * MINUTE
    c = (await node.e_write(alice, title="retro", text="went fine"))["sr_id"]
    token = await _reader(node)
    async with served(node) as port:
        first = await _get(
            port,
            f"/changes?since={_local(start - MINUTE)}&as_of={_local(start + 30 * MINUTE)}",
            token,
        )
        second = await _get(
            port,
            f"/changes?since={_local(start + 30 * MINUTE)}&as_of={_local(start + 90 * MINUTE)}",
            token,
        )
        latest = await _get(port, "/changes", token)
    assert first.status == second.status == latest.status == 200
    assert _kinds(first.body) == [("new", b), ("new", a)]
    assert _kinds(second.body) == [("updated", a), ("deleted", b)]
    assert _kinds(latest.body) == [("new", c), ("new", a)]  # b: written and deleted inside
    since, as_of = _local(start + 30 * MINUTE), _local(start + 90 * MINUTE)  # read as UTC
    assert f"Changed after {since}:00.000Z, up to {as_of}:00.000Z." in second.body
    assert f'name="since" step="1" value="{since}:00"' in second.body
    assert 'changed: <span class="field">title</span><span class="field">text</span>' in second.body
    assert (
        '<tr><td>title</td><td class="before">plan</td><td class="after">plan, moved</td></tr>'
        in second.body
    )
    assert '<td class="before">ship friday</td><td class="after">ship monday</td>' in second.body
    assert f'href="/record?sr_id={a}">plan, moved</a>' in second.body  # its title at as_of
    assert f'href="/record?sr_id={b}">lunch</a>' in second.body  # deleted: its last title
    assert (
        f"at {format_instant(start + 60 * MINUTE, fixed=True)} · by alice on {node.info.node_id}"
        in (second.body)
    )
    day_ago = format_instant(start + 120 * MINUTE - changes.DEFAULT_WINDOW_MS, fixed=True)
    assert (
        f"Changed after {day_ago}, up to {format_instant(start + 120 * MINUTE, fixed=True)}."
        in (latest.body)
    )
    assert "(UTC)" in latest.body


def _next(body: str) -> str | None:
    found = re.search(r'<a href="([^"]+)">next page</a>', body)
    return None if found is None else "/changes" + html.unescape(found.group(1))


async def test_paging_keeps_the_window_of_page_one(
    node: Node, wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes, "PAGE_SIZE", 2)
    alice = await caller(node)
    written = []
    for n in range(5):
        wall.now += 1000
        written.append((await node.e_write(alice, title=f"sr {n}", text="x"))["sr_id"])
    token = await _reader(node)
    seen: list[tuple[str, str]] = []
    async with served(node) as port:
        path: str | None = "/changes"
        while path is not None:
            page = await _get(port, path, token)
            assert page.status == 200, page.body
            seen += _kinds(page.body)
            wall.now += 1000  # written after page 1: outside the window its links pass on
            await node.e_write(alice, title="later", text="y")
            path = _next(page.body)
    assert seen == [("new", sr) for sr in reversed(written)]


async def test_a_bad_moment_is_the_tools_refusal_shown_escaped(node: Node) -> None:
    token = await _reader(node)
    async with served(node) as port:
        bad = await _get(port, "/changes?since=%3Cb%3Enope", token)
        backwards = await _get(port, "/changes?since=2026-10-02T10:00&as_of=2026-10-01", token)
        later = await _get(port, "/changes?since=2026-10-01&page=2", token)
    assert bad.status == backwards.status == later.status == 400
    assert "is not a date or ISO-8601 datetime" in bad.body
    assert "&lt;b&gt;nope" in bad.body
    assert "<b>nope" not in bad.body
    assert "&#39;since&#39; must be before &#39;as_of&#39;" in backwards.body
    assert "a page after the first needs as_of" in later.body


async def test_the_page_is_alike_with_and_without_rows_the_token_cannot_read(
    node: Node, wall: Wall
) -> None:
    start = wall.now
    alice = await caller(node)
    shared = (await node.e_write(alice, title="shared", text="for the team"))["sr_id"]
    wall.now += MINUTE
    await node.e_write(alice, sr_id=shared, text="for the whole team")
    bob = await node.authenticate(await _bob(node))
    carol = await caller(node, workspace="elsewhere", principal="carol")
    window = f"/changes?since={_local(start - MINUTE)}&as_of={_local(start + 10 * MINUTE)}"
    paths = ["/changes", window, "/changes?since=2020-01-01"]
    tokens = {"alice": await _reader(node), "bob": await _bob(node)}
    async with served(node) as port:
        before = {who: [(await _get(port, p, t)).body for p in paths] for who, t in tokens.items()}
        secret = await node.e_write(
            bob, title="<script>alert(1)</script>", text="mine", visibility="private"
        )
        await node.e_write(bob, sr_id=secret["sr_id"], text="still mine")
        await node.e_write(carol, title="theirs", text="another workspace")
        after = {who: [(await _get(port, p, t)).body for p in paths] for who, t in tokens.items()}
    assert [_kinds(body) for body in before["alice"]] == [[("new", shared)]] * 3
    assert after["alice"] == before["alice"]
    assert after["bob"] != before["bob"]  # the check can tell
    assert all(("new", secret["sr_id"]) in _kinds(body) for body in after["bob"])
    assert "<script>" not in "".join(after["bob"])


async def _bob(node: Node) -> str:
    return (await node.create_token("bob", "team", ("read:workspace", "write:workspace"))).token
