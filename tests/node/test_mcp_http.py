"""The MCP surface over streamable HTTP (docs/mcp.md §Streamable HTTP): ``memlane serve`` in a real
subprocess on loopback, driven by the SDK's client with a bearer token — in the per-request era and
in the initialize-handshake era — and by raw HTTP for what must never get in: every bad token gets
the same 401, its challenge saying only whether a bearer token was sent.  Workspaces stay apart;
plain HTTP off loopback is refused; TLS off loopback serves; SIGTERM stops it with the store
closed."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.node.clikit import MEMLANE, TOKEN_HINT, UNAUTHENTICATED, run
from tests.node.mcpkit import (
    ACCEPT,
    INITIALIZE,
    TIMEOUT,
    TOOLS,
    Served,
    Site,
    ask,
    ids,
    make_site,
    refused,
    self_signed,
    serve,
    session,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return make_site(tmp_path_factory.mktemp("http") / "node")


@pytest.fixture(scope="module")
def served(site: Site) -> Iterator[Served]:
    running = serve(site, "--mcp-http", "127.0.0.1:0")
    yield running
    code, err = running.stop()
    assert code == 0, err


# -- a session ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_bearer_lists_writes_and_reads(served, site):
    assert served.url.startswith("http://127.0.0.1:")
    assert served.url.endswith("/mcp")
    assert int(served.url.rsplit(":", 1)[1].split("/")[0]) > 0  # the port it really took
    async with session(served.url, site.tokens["alice"]) as c:
        assert tuple(t.name for t in (await c.list_tools()).tools) == TOOLS
        written = await ask(c, "e_write", title="over http", tags=["http"])
        found = await ask(c, "e_timeline", action="intersect", match=["http"])
        assert ids(found["results"]) == [written["sr_id"]]
        step = await ask(c, "work_record", summary="served", tool="http")
        chain = await ask(c, "work_episode_chain", id=step["id"])
        assert ids(chain["chain"], "id") == [step["id"]]
        assert await refused(c, "work_episode_chain", id=step["id"], k=0) == (
            "invalid k: must be an integer from 1 to 200"
        )


@pytest.mark.asyncio
async def test_an_initialize_handshake_session_works_too(served, site):
    async with session(served.url, site.tokens["bob"], mode="legacy") as c:
        assert c.protocol_version.startswith("2025-")
        assert len((await c.list_tools()).tools) == len(TOOLS)
        listed = await ask(c, "e_timeline", action="list", page_size=5)
        assert listed["page_size"] == 5
        assert await refused(c, "e_timeline", action="list", since="2026-01-01") == (
            "'since' and 'as_of' belong to the changes action"
        )
        assert await refused(c, "e_write", title="x") == (
            "this call needs the write:workspace scope on workspace team"
        )


# -- what never gets in ------------------------------------------------------------------------


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer, whether JSON or a stream of server-sent events."""
    if response.headers["content-type"].startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


@pytest.mark.asyncio
async def test_every_bad_token_gets_the_same_401(served, site):
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "e_timeline", "arguments": {"action": "list"}},
    }
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        # A session opened, in the initialize era, by the token about to be revoked.
        bearer = {"Authorization": f"Bearer {site.tokens['revoked']}"} | ACCEPT
        opened = await http.post(served.url, json=INITIALIZE, headers=bearer)
        assert opened.status_code == 200
        in_session = bearer | {
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "Mcp-Protocol-Version": "2025-11-25",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(served.url, json=initialized, headers=in_session)).is_success
        before = await http.post(served.url, json=call, headers=in_session)
        assert before.status_code == 200
        assert not _messages(before)[-1]["result"]["isError"]

        await asyncio.to_thread(site.revoke, "revoked")
        site.expire("expired")
        token = site.tokens["alice"]
        bad = {
            "none": {},
            "unknown": {"Authorization": "Bearer mlt_not-a-token"},
            "scheme alone": {"Authorization": "Bearer"},
            "other scheme": {"Authorization": f"Basic {token}"},
            "bare token": {"Authorization": token},
            "expired": {"Authorization": f"Bearer {site.tokens['expired']}"},
            "revoked": {"Authorization": f"Bearer {site.tokens['revoked']}"},
        }
        answers = {
            name: await http.post(served.url, json=INITIALIZE, headers=h | ACCEPT)
            for name, h in bad.items()
        }
        answers["revoked, mid-session"] = await http.post(served.url, json=call, headers=in_session)
        answers["GET"] = await http.get(served.url, headers=ACCEPT)
        answers["elsewhere"] = await http.get(served.url.replace("/mcp", "/health"))
        good = await http.post(
            served.url, json=INITIALIZE, headers={"Authorization": f"bearer {token}"} | ACCEPT
        )
    assert good.status_code == 200  # the scheme's case does not matter

    seen = {(r.status_code, r.content, r.headers["content-type"]) for r in answers.values()}
    body = {"error": UNAUTHENTICATED, "hint": TOKEN_HINT}  # the tools' text, and a hint beside
    assert seen == {(401, json.dumps(body).encode(), "application/json")}
    # RFC 6750 §3.1: a request without bearer credentials gets the bare challenge; a bearer
    # token that is not valid gets invalid_token, so a client reports a bad token rather
    # than starting an authorization flow.
    sent_none = {"none", "other scheme", "bare token", "GET", "elsewhere"}
    challenges = {name: r.headers["www-authenticate"] for name, r in answers.items()}
    assert challenges == {
        name: 'Bearer realm="memlane"'
        if name in sent_none
        else 'Bearer realm="memlane", error="invalid_token"'
        for name in answers
    }


@pytest.mark.asyncio
async def test_a_token_reads_nothing_of_another_workspace(served, site):
    async with session(served.url, site.tokens["carol"]) as lab:  # workspace lab
        secret = await ask(lab, "e_write", title="lab secret", text="zebra notes", tags=["zebra"])
        step = await ask(lab, "work_record", summary="lab work", tags=["zebra"])
        assert ids((await ask(lab, "e_timeline", action="list"))["results"]) == [secret["sr_id"]]
        lab_feed = await ask(lab, "e_audit")
        assert secret["sr_id"] in {e["subject"] for e in lab_feed["events"]}
    sr_id, episode_id = secret["sr_id"], step["id"]
    async with session(served.url, site.tokens["alice"]) as team:  # workspace team
        await ask(team, "e_write", title="team note", text="zebra crossing", tags=["zebra"])
        listed = await ask(team, "e_timeline", action="list", page_size=100)
        assert listed["results"]
        assert sr_id not in ids(listed["results"])
        found = await ask(team, "e_timeline", action="find", query="zebra")
        assert [x["title"] for x in found["results"]] == ["team note"]
        tagged = await ask(team, "e_timeline", action="intersect", match=["zebra"])
        assert [x["title"] for x in tagged["results"]] == ["team note"]
        assert await refused(team, "e_timeline", action="traverse", sr_id=sr_id) == (
            f"Invalid timeline spec: unknown sr_id: {sr_id}"
        )
        changes = await ask(team, "e_timeline", action="changes", since="2020-01-01")
        assert sr_id not in ids(changes["changes"])
        feed = await ask(team, "e_audit")
        assert {sr_id, episode_id}.isdisjoint({e["subject"] for e in feed["events"]})
        assert await ask(team, "work_episode_chain", id=episode_id) == {
            "available": False,
            "chain": [],
            "truncated": False,
            "message": f"no episode {episode_id} is available to this caller",
        }
        assert episode_id not in ids((await ask(team, "work_episodes"))["episodes"], "id")
        for tool, arguments, text in [
            ("e_write", {"sr_id": sr_id, "title": "mine now"}, f"unknown sr_id: {sr_id}"),
            ("e_delete", {"sr_id": sr_id}, f"unknown sr_id: {sr_id}"),
            ("work_forget", {"id": episode_id}, f"unknown episode id: {episode_id}"),
        ]:
            assert await refused(team, tool, **arguments) == text


# -- what one client may make it hold (docs/operations.md §Limits) -----------------------------


def _refusal(response: httpx2.Response, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert words in body["error"]["message"]


@pytest.mark.asyncio
async def test_a_json_body_past_its_bounds_is_refused_before_it_is_parsed(served, site):
    arrays = (4 * 2**20 - 2) // 3  # 4 MiB of [] (under the SDK's own 4 MiB limit)
    nested: Any = {}
    for _ in range(30):  # 30 lists in a map in a map in the message: 33 levels
        nested = [nested]
    listing = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": {"a": nested}},
    }
    cases = [
        (b"[" + b",".join([b"[]"] * arrays) + b"]", 413, "too large"),
        (b"[" + b",".join([b"[]"] * 300_000) + b"]", 400, "more than 100000 JSON values"),
        (b"[" * 33 + b"]" * 33, 400, "deeper than 32 levels"),
        (json.dumps(listing).encode(), 400, "deeper than 32 levels"),
    ]
    bearer = {
        "Authorization": f"Bearer {site.tokens['alice']}",
        "Content-Type": "application/json",
    } | ACCEPT
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        for body, status, words in cases:
            started = time.perf_counter()
            answer = await http.post(served.url, content=body, headers=bearer)
            assert time.perf_counter() - started < 0.5, (len(body), status)
            _refusal(answer, status, words)
        # Brackets and commas inside strings are text, not structure.
        name = "[{" * 40 + "," * 150_000
        opening = INITIALIZE | {
            "params": INITIALIZE["params"] | {"clientInfo": {"name": name, "version": "1"}}
        }
        opened = await http.post(served.url, json=opening, headers=bearer)
        assert opened.status_code == 200, opened.text
        await http.delete(
            served.url,
            headers=bearer
            | {
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "Mcp-Protocol-Version": "2025-11-25",
            },
        )
    async with session(served.url, site.tokens["alice"], mode="legacy") as c:
        assert len((await c.list_tools()).tools) == len(TOOLS)


@pytest.mark.asyncio
async def test_a_token_holds_at_most_its_cap_of_sessions(tmp_path):
    capped = make_site(tmp_path / "node")
    (capped.data / "config.toml").write_text("[serve]\nmax_sessions_per_token = 3\n")
    running = serve(capped, "--mcp-http", "127.0.0.1:0")
    alice = {"Authorization": f"Bearer {capped.tokens['alice']}"} | ACCEPT
    try:
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            opened = [
                await http.post(running.url, json=INITIALIZE, headers=alice) for _ in range(3)
            ]
            assert [r.status_code for r in opened] == [200, 200, 200]
            fourth = await http.post(running.url, json=INITIALIZE, headers=alice)
            _refusal(fourth, 429, "this token already holds 3 open sessions")
            async with session(running.url, capped.tokens["bob"], mode="legacy") as c:
                assert len((await c.list_tools()).tools) == len(TOOLS)
            ended = await http.delete(
                running.url,
                headers=alice
                | {
                    "Mcp-Session-Id": opened[0].headers["mcp-session-id"],
                    "Mcp-Protocol-Version": "2025-11-25",
                },
            )
            assert ended.is_success
            again = await http.post(running.url, json=INITIALIZE, headers=alice)
            assert again.status_code == 200  # a place freed is a place to take
    finally:
        code, err = running.stop()
    assert code == 0, err


# -- where it listens --------------------------------------------------------------------------


def test_plain_http_off_loopback_is_refused(site):
    for listen in ("0.0.0.0:0", "[::]:0", "192.0.2.1:8765", "memlane.example:8765"):
        done = subprocess.run(
            [str(MEMLANE), "serve", "--data", str(site.data), "--mcp-http", listen],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert done.returncode == 2, (listen, done.stderr)
        assert done.stdout == ""
        assert done.stderr.startswith("memlane serve: refusing plain HTTP on "), done.stderr
        assert "--tls-cert and --tls-key, or --insecure-no-tls" in done.stderr


def test_a_port_in_use_exits_1(tmp_path):
    data = tmp_path / "node"  # a node of its own: the module's is being served
    assert run("init", "--data", data).returncode == 0
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(MEMLANE), "serve", "--data", str(data), "--mcp-http", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"memlane serve: cannot listen for MCP on 127.0.0.1:{port}: the address is in use "
        "(set --mcp-http, MEMLANE_MCP_HTTP or [serve] mcp_http)\n"
    )


@pytest.mark.asyncio
async def test_tls_off_loopback_serves_and_sigterm_closes_the_store(tmp_path):
    tls_site = make_site(tmp_path / "node")
    cert, key = self_signed(tmp_path)
    running = serve(
        tls_site, "--mcp-http", "0.0.0.0:0", "--tls-cert", str(cert), "--tls-key", str(key)
    )
    try:
        assert running.url.startswith("https://0.0.0.0:")
        url = running.url.replace("0.0.0.0", "127.0.0.1")
        trust = ssl.create_default_context(cafile=str(cert))
        async with session(url, tls_site.tokens["alice"], verify=trust) as c:
            written = await ask(c, "e_write", title="over tls")
            listed = await ask(c, "e_timeline", action="list")
            assert ids(listed["results"]) == [written["sr_id"]]
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            with pytest.raises(httpx2.HTTPError):  # plain HTTP gets nothing from that port
                await http.post(url.replace("https:", "http:"), json=INITIALIZE, headers=ACCEPT)
        assert (tls_site.data / "memlane.db-wal").exists()  # the store is open
    finally:
        code, err = running.stop()
    assert code == 0, err
    assert "Traceback" not in err
    assert not (tls_site.data / "memlane.db-wal").exists()  # closed: the last connection removes it
