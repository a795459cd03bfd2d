"""The web view (docs/web.md), served by uvicorn on a loopback socket and asked over real
HTTP: signing in (no token, a wrong, expired or revoked one: the sign-in page and no data),
the cookie's attributes, the security headers on every answer, and hostile SRs rendered as
inert text.  (The pages in a real browser are tests of their own.)"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from node.errors import Refusal
from node.node import Node
from node.web.app import HEADERS
from tests.node.bundlekit import caller
from tests.node.helpers import Wall
from tests.node.webkit import Answer, ask, served

pytestmark = pytest.mark.asyncio


def _headed(answer: Answer) -> None:
    for name, value in HEADERS.items():
        assert answer.headers[name] == value


async def test_signing_in_and_what_no_token_shows(node: Node) -> None:
    who = await caller(node)
    await node.e_write(who, title="the plan", text="ship on friday")
    token = (await node.create_token("alice", "team", ("read:workspace",))).token
    async with served(node) as port:
        away = await ask(port, "GET", "/timeline")
        assert (away.status, away.headers["location"]) == (303, "/signin")
        page = await ask(port, "GET", "/signin")
        _headed(page)
        assert 'name="token" type="password"' in page.body
        assert "the plan" not in page.body
        for wrong in ("mlt_not-a-token", "", "x" * 5000):
            refused = await ask(port, "POST", "/signin", body=urlencode({"token": wrong}))
            assert refused.status == 401
            assert "set-cookie" not in refused.headers
            assert "That token does not sign in." in refused.body
        signed = await ask(port, "POST", "/signin", body=urlencode({"token": token}))
        assert (signed.status, signed.headers["location"]) == (303, "/timeline")
        cookie = signed.headers["set-cookie"]
        assert cookie.startswith(f"memlane_token={token};")
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        shown = await ask(port, "GET", "/timeline", cookie=f"memlane_token={token}")
        _headed(shown)
        assert shown.status == 200
        assert "the plan" in shown.body
        assert "ship on friday" in shown.body
        assert token not in shown.body
        out = await ask(port, "POST", "/signout", cookie=f"memlane_token={token}")
        assert 'memlane_token="";' in out.headers["set-cookie"]


async def test_an_expired_or_revoked_token_shows_no_data(node: Node, wall: Wall) -> None:
    who = await caller(node)
    await node.e_write(who, title="secret plan", text="only for readers")
    short = await node.create_token("alice", "team", ("read:workspace",), expires=wall.now + 1000)
    revoked = await node.create_token("alice", "team", ("read:workspace",))
    await node.revoke_token(revoked.token_id)
    wall.now += 2000
    async with served(node) as port:
        for token in (short.token, revoked.token):
            away = await ask(port, "GET", "/timeline", cookie=f"memlane_token={token}")
            assert (away.status, away.headers["location"]) == (303, "/signin")
            refused = await ask(port, "POST", "/signin", body=urlencode({"token": token}))
            assert refused.status == 401
            assert "secret plan" not in away.body + refused.body


async def test_hostile_srs_render_as_inert_text(node: Node) -> None:
    who = await caller(node)
    hostile = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']
    for title in hostile:
        await node.e_write(who, title=title, text=title)
    # About the largest text an SR holds: 100,000 characters, in a payload of 256 KiB at most
    # (a 1 MB text is refused before it is written).
    await node.e_write(who, title="big", text="\u00e9" * 99_999 + "<")
    for bigger in ("y" * 100_001, "\U0001f600" * 99_999):
        with pytest.raises(Refusal):
            await node.e_write(who, title="bigger", text=bigger)
    token = (await node.create_token("alice", "team", ("read:workspace",))).token
    async with served(node) as port:
        page = await ask(port, "GET", "/timeline", cookie=f"memlane_token={token}")
    assert page.status == 200
    assert "<script>" not in page.body
    assert "<img" not in page.body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.body
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page.body
    assert "\u00e9" * 99_999 + "&lt;" in page.body
    assert "script-src" not in HEADERS["content-security-policy"]  # default-src 'none' holds


async def test_a_bad_argument_is_the_tools_refusal_shown_escaped(node: Node) -> None:
    token = (await node.create_token("alice", "team", ("read:workspace",))).token
    async with served(node) as port:
        page = await ask(
            port, "GET", "/timeline?start_date=%3Cb%3Enope", cookie=f"memlane_token={token}"
        )
    assert page.status == 400
    assert "is not a date or ISO-8601 datetime" in page.body
    assert "<b>nope" not in page.body


async def test_search_ranks_and_marks_the_matched_words_inertly(node: Node) -> None:
    who = await caller(node)
    await node.e_write(who, title="Deploy notes", text="We deployed <b>twice</b> on Monday")
    await node.e_write(who, title="lunch", text="nothing about it")
    token = (await node.create_token("alice", "team", ("read:workspace",))).token
    async with served(node) as port:
        away = await ask(port, "GET", "/search?query=deploy")
        page = await ask(port, "GET", "/search?query=deploying", cookie=f"memlane_token={token}")
        hostile = await ask(
            port, "GET", "/search?query=%3Cscript%3E+deploy", cookie=f"memlane_token={token}"
        )
    assert (away.status, away.headers["location"]) == (303, "/signin")
    _headed(page)
    assert "<mark>Deploy</mark> notes" in page.body
    assert "We <mark>deployed</mark> &lt;b&gt;twice&lt;/b&gt; on Monday" in page.body
    assert "rank 1 · score" in page.body
    assert "lunch" not in page.body
    assert hostile.status == 200
    assert "<script>" not in hostile.body
    assert 'value="&lt;script&gt; deploy"' in hostile.body


async def test_the_timeline_filters_lanes_by_the_nodes_profiles(tmp_path, wall: Wall) -> None:
    data = tmp_path / "profiled"
    await Node.init(data, wall=wall)
    (data / "config.toml").write_text('[profiles.research]\nlanes = ["research"]\n')
    async with Node.open(data, wall=wall) as node:
        who = await caller(node)
        for title, lane in (("in the default lane", "default"), ("a finding", "research")):
            await node.e_write(who, title=title, text="x", lane=lane)
        token = (await node.create_token("alice", "team", ("read:workspace",))).token
        async with served(node) as port:
            every = await ask(port, "GET", "/timeline", cookie=f"memlane_token={token}")
            one = await ask(
                port, "GET", "/timeline?agent_profile=research", cookie=f"memlane_token={token}"
            )
            unknown = await ask(
                port, "GET", "/timeline?agent_profile=nope", cookie=f"memlane_token={token}"
            )
    assert '<option value="research">research: research</option>' in every.body
    assert "a finding" in every.body
    assert "in the default lane" in every.body
    assert "a finding" in one.body
    assert "in the default lane" not in one.body
    assert '<option value="research" selected>' in one.body
    assert unknown.status == 400
