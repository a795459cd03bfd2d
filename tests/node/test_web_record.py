"""The record page (node/web/record.py), served by uvicorn and asked over real HTTP: an SR's
current state, its versions with who, when and which node and what each changed, its links in
and out; hostile text inert; an id the token cannot read answered as one never written; and a
page byte for byte the same whatever the token cannot read."""

from __future__ import annotations

import pytest

from node.node import Node
from tests.node.helpers import CallerFactory, Wall
from tests.node.webkit import ask, served

pytestmark = pytest.mark.asyncio

MINUTE = 60_000


async def _token(node: Node, principal: str) -> str:
    return (await node.create_token(principal, "team", ("read:workspace",))).token


async def _record(node: Node, sr_id: str, token: str) -> tuple[int, str]:
    async with served(node) as port:
        page = await ask(port, "GET", f"/record?sr_id={sr_id}", cookie=f"memlane_token={token}")
    return page.status, page.body


async def test_a_record_its_versions_and_links(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice, bob = await make_caller("alice"), await make_caller("bob")
    target = (await node.e_write(alice, title="the target", text="t"))["sr_id"]
    sr = (await node.e_write(alice, title="<script>alert(1)</script>", text="v1", links=[target]))[
        "sr_id"
    ]
    source = (await node.e_write(bob, title="points here", text="s", links=[sr]))["sr_id"]
    wall.now += MINUTE
    await node.e_correct(bob, sr_id=sr, text="v2", reason="wrong")
    status, body = await _record(node, sr, await _token(node, "carol"))
    assert status == 200
    assert "<script>alert" not in body
    assert "<h2>&lt;script&gt;alert(1)&lt;/script&gt;</h2>" in body
    assert '<div class="text">v2</div>' in body
    assert "· corrected" in body
    assert "corrected</span> at " in body
    assert f"by bob on {node.info.node_id}" in body
    assert f"by alice on {node.info.node_id}" in body
    assert '<tr><td>text</td><td class="before">v1</td><td class="after">v2</td></tr>' in body
    assert "has_correction" not in body  # "corrected" says it
    out, into = body.split("<h3>Links out</h3>")[1].split("<h3>Links in</h3>")
    assert f'href="/record?sr_id={target}">the target</a>' in out
    assert f'href="/record?sr_id={source}">points here</a>' in into.split("<h3>")[0]
    assert body.index("corrected</span>") < body.index("written</span>")  # newest first


async def test_an_id_it_cannot_read_is_one_never_written(
    node: Node, make_caller: CallerFactory
) -> None:
    alice = await make_caller("alice")
    hidden = await node.e_write(alice, title="alice only", text="x", visibility="private")
    token = await _token(node, "bob")
    never = "01a0c450-6c00-7000-8000-000000000000"
    shown = [await _record(node, i, token) for i in (hidden["sr_id"], never)]
    assert [s for s, _ in shown] == [404, 404]
    assert shown[0][1].replace(hidden["sr_id"], never) == shown[1][1]
    assert "alice only" not in shown[0][1]
    assert f"unknown sr_id: {never}" in shown[1][1]
    status, body = await _record(node, "", token)
    assert (status, "invalid sr_id: must be an SR id" in body) == (400, True)


async def test_the_page_is_the_same_whatever_the_token_cannot_read(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice, bob = await make_caller("alice"), await make_caller("bob")
    sr = (await node.e_write(alice, title="shared", text="x"))["sr_id"]
    token = await _token(node, "carol")
    before = await _record(node, sr, token)
    wall.now += MINUTE
    hidden = (await node.e_write(bob, title="bob's", text="y", visibility="private", links=[sr]))[
        "sr_id"
    ]
    await node.e_write(await make_caller("dave", workspace="lab"), title="lab's", text="z")
    assert await _record(node, sr, token) == before  # rows carol cannot read change nothing
    await node.e_write(alice, sr_id=sr, links=[hidden])  # a link to what carol cannot read
    await node.e_write(alice, sr_id=sr, private_fields={"k": "v"})
    after = await _record(node, sr, token)  # its own versions, changed in what it cannot see
    assert before[0] == after[0] == 200
    versions = after[1].count('<li class="version')
    assert versions == 3
    assert after[1].count("changed in what this token cannot see") == 2
    assert "bob&#39;s" not in after[1]
    owner = await _record(
        node, sr, (await node.create_token("bob", "team", ("read:workspace",))).token
    )
    assert "bob&#39;s" in owner[1]


async def test_versions_it_cannot_read_leave_no_mark_on_the_page(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    """Two SRs written alike, at the same moments, but for a run of versions of the second
    private to its owner (a title written and written back): carol's pages of them differ in
    nothing but the id; the owner sees the run."""
    alice = await make_caller("alice")
    plain, ran = [(await node.e_write(alice, title="plan", text="one"))["sr_id"] for _ in "ab"]
    wall.now += MINUTE
    await node.e_adjust(alice, sr_id=ran, visibility="private")
    for title in ("secret plan", "plan"):
        await node.e_write(alice, sr_id=ran, title=title)
    wall.now += MINUTE
    for sr in (plain, ran):
        await node.e_adjust(alice, sr_id=sr, visibility="workspace", tags=["x"])
    for sr in (plain, ran):
        await node.e_write(alice, sr_id=sr, title="plan")  # no change at all
    token = await _token(node, "carol")
    seen = await _record(node, plain, token)
    assert await _record(node, ran, token) == (seen[0], seen[1].replace(plain, ran))
    assert seen[1].count('<li class="version') == 3
    assert '<p class="fields">no change</p>' in seen[1]
    assert '<tr><td>tags</td><td class="before">—</td><td class="after">x</td></tr>' in seen[1]
    owner = await _record(node, ran, await _token(node, "alice"))
    assert "secret plan" in owner[1]
    assert owner[1].count('<li class="version') == 6
