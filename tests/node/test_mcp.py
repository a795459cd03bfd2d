"""The MCP surface (docs/mcp.md) driven by the SDK's own client: ``memlane mcp`` over stdio in
a real subprocess, a real data directory behind it.  The tool list and its schemas as the
specifications give them (docs/tools/e_timeline.md, docs/tools/work_episode_chain.md), writes
read back through every e_timeline action, e_audit and the episode tools, refusals arriving as
``{"error": <the specified text>}``, defaults sent
explicitly, tokens checked at start-up and on every call, and a clean stop on SIGTERM.
The HTTP transport is in ``test_mcp_http.py``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Tool
from structlog.testing import capture_logs

from node.mcp.server import build_server
from node.node import Node
from node.tools.catalog import CATALOG
from tests.node.clikit import MEMLANE, TOKEN_HINT, UNAUTHENTICATED
from tests.node.mcpkit import (
    INITIALIZE,
    TIMEOUT,
    TOOLS,
    Site,
    ask,
    ids,
    make_site,
    read_line,
    refusal,
    refused,
    type_arrays,
)

SEED_000_GUIDANCE = (
    "Retrieve knowledge ordered by time (scoped to your read authority).\n"
    'Actions: list (everything), find (query="..." semantic), intersect (match=[...] '
    "filter), traverse (from an anchor sr_id), changes (what changed between two moments). "
    "Bound the window of list, intersect and traverse with start_date/end_date; find takes "
    "no window (it ranks by relevance, then orders by time); order_by ∈ {ingest_time_desc, "
    "ingest_time_asc, content_time_desc, content_time_asc}. shed_idf_noise (default true) "
    "trims over-common terms from dense result sets. Results name their lane and lane_uuid "
    "and flag has_correction / has_adjustment like e_gather.\n"
    "changes — what changed between two moments, since and as_of (a date or ISO datetime, a "
    "bare date is midnight UTC; as_of defaults to now): each SR whose state differs between "
    "them, as new, updated (with what changed; hidden_change when it is outside what you "
    "can see), deleted or undeleted, newest first, paged. changed_at is the newest entry in "
    "the window. An SR written and deleted again inside the window, or changed and changed "
    "back, did not change. Pass back the as_of page 1 returns for every later page. The "
    "moments are when each change was originally written, by the writing engine's clock — "
    "the same answer on every engine holding the same entries; deletion is local; a wrong "
    "clock places its changes where it said. Not a catch-up feed: an entry keeps its "
    "author's time and can arrive later than that, so a window already read can gain "
    "entries and its pages can reshuffle. To catch up on what arrived over the mesh, use "
    'e_audit(action="list", since_seq=N): each entry that arrives from a peer writes an '
    "sr_synced event there. A bundle import appears as one bundle_imported event; a restore "
    "from the archive writes none."
)

SEED_002_GUIDANCE = (
    "Walk an episode’s amendment chain in one call. prev_id links each episode to the "
    "caller’s previous one, and following it hop by hop cost one round trip per link. "
    "Returns the chain newest-first starting at id. The work-memory reader contract applies "
    "at every hop, not just the first: tombstoned rows never surface, expired rows are "
    "excluded, and the walk stays inside the calling principal unless any_caller "
    "(admin:workspace, P1.7). The walk STOPS at the first hop that fails those filters "
    "rather than skipping over it — a gap in a returned chain would itself disclose that a "
    "hidden episode exists. response_format=concise returns each episode as work_episodes "
    "does; truncated is always kept."
)


# e_timeline's arguments (docs/tools/e_timeline.md §Arguments): name, JSON type, default
# (None: no default).
SEED_000_ARGUMENTS = (
    ("action", "string", None),
    ("query", "string", None),
    ("match", "array", None),
    ("sr_id", "string", None),
    ("start_date", "string", None),
    ("end_date", "string", None),
    ("order_by", "string", "ingest_time_desc"),
    ("shed_idf_noise", "boolean", True),
    ("page", "integer", 1),
    ("page_size", "integer", None),
    ("is_conversational_only", "boolean", False),
    ("as_of", "string", None),
    ("since", "string", None),
    ("agent_profile", "string", None),
)
SEED_002_FORMAT = (
    "concise returns only the high-signal fields; detailed (the shipped default) returns the "
    "full payload. Errors and safety warnings are never trimmed. When omitted, the server’s "
    "tools.defaults.responseFormat applies."
)
SEED_002_VERBOSITY = "Legacy alias for response_format: terse = concise, full = detailed."
READS = {"e_timeline", "e_audit", "work_episode_chain", "work_episodes", "call_windows"}
PAGE_NEEDS_AS_OF = (
    "a page after the first needs as_of: pass back the as_of page 1 returned, "
    "so every page reads the same window"
)
NO_DEFAULT = object()

# -- a node, its tokens, a client ------------------------------------------------------------


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return make_site(tmp_path / "node")


def stdio(site: Site, *args: str, env: dict[str, str] | None = None) -> Client:
    """An SDK client that starts ``memlane mcp`` on ``site`` and talks to it over stdio."""
    params = StdioServerParameters(
        command=str(MEMLANE), args=["mcp", "--data", str(site.data), *args], env=env
    )
    return Client(params, read_timeout_seconds=TIMEOUT)


# -- the catalog ---------------------------------------------------------------------------------


def test_the_catalog_names_every_tool_and_the_handler_that_answers_it():
    assert tuple(spec.name for spec in CATALOG) == TOOLS
    for spec in CATALOG:
        assert callable(spec.handler)
        assert spec.handler.__name__ == spec.name
        schema = spec.input_schema
        assert schema["type"] == "object"
        assert set(schema.get("required", ())) <= set(schema["properties"])
        # Permissive: unknown names reach the tool layer, which refuses them by name.
        assert "additionalProperties" not in schema
        json.dumps(dict(schema))
        assert spec.hints.read_only == (spec.name in READS)
        assert not spec.hints.open_world


def test_no_schema_gives_a_field_a_list_of_types():
    """One type per field: clients that take one (and MCP Inspector's strict check) read every
    schema; null counts as not sent, so no argument needs to admit it."""
    assert type_arrays({"type": ["string", "null"], "x": [{"type": ["a"]}]}) == ["", "/x/0"]
    for spec in CATALOG:
        assert type_arrays(dict(spec.input_schema)) == [], spec.name


# -- over stdio ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_tools_listed_are_the_seeds(site, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(site.tokens["alice"] + "\n")
    async with stdio(site, "--token-file", str(token_file)) as client:
        listed = (await client.list_tools()).tools
    tools: dict[str, Tool] = {t.name: t for t in listed}
    assert tuple(tools) == TOOLS

    timeline = tools["e_timeline"]
    assert timeline.description == SEED_000_GUIDANCE
    props = timeline.input_schema["properties"]
    assert list(props) == [name for name, _, _ in SEED_000_ARGUMENTS]
    for name, kind, default in SEED_000_ARGUMENTS:
        assert props[name]["type"] == kind, name
        assert props[name].get("default", NO_DEFAULT) == (
            default if default is not None else NO_DEFAULT
        ), name
    assert timeline.input_schema["required"] == ["action"]
    assert props["action"]["enum"] == ["list", "find", "intersect", "traverse", "changes"]
    assert props["match"]["items"] == {"type": "string", "minLength": 1, "maxLength": 64}
    assert props["order_by"]["enum"] == [
        "ingest_time_desc",
        "ingest_time_asc",
        "content_time_desc",
        "content_time_asc",
    ]

    chain = tools["work_episode_chain"]
    assert chain.description == SEED_002_GUIDANCE
    props = chain.input_schema["properties"]
    assert list(props) == ["id", "k", "any_caller", "response_format", "verbosity"]
    assert chain.input_schema["required"] == ["id"]
    assert props["id"]["type"] == "string"
    assert props["id"]["minLength"] == 1
    assert "default" not in props["id"]
    k = props["k"]
    assert (k["type"], k["default"], k["minimum"], k["maximum"]) == ("integer", 50, 1, 200)
    assert (props["any_caller"]["type"], props["any_caller"]["default"]) == ("boolean", False)
    assert props["response_format"]["enum"] == ["concise", "detailed"]
    assert props["response_format"]["description"] == SEED_002_FORMAT
    assert "default" not in props["response_format"]  # the node's configuration decides
    assert props["verbosity"]["enum"] == ["full", "terse"]
    assert props["verbosity"]["description"] == SEED_002_VERBOSITY

    hints = chain.annotations
    assert hints is not None
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
        True,
        False,
        False,
    )
    for tool in tools.values():
        assert type_arrays(tool.model_dump(mode="json", by_alias=True)) == [], tool.name
        assert tool.annotations is not None
        assert tool.description
        assert tool.annotations.read_only_hint == (tool.name in READS), tool.name
        assert tool.annotations.open_world_hint is False
    delete = tools["e_delete"].annotations
    assert delete is not None
    assert delete.destructive_hint
    assert delete.idempotent_hint
    record = tools["work_record"].annotations
    assert record is not None
    assert not record.destructive_hint
    assert not record.idempotent_hint


@pytest.mark.asyncio
async def test_writes_read_back_through_every_action(site):
    async with stdio(site, "--token", site.tokens["alice"]) as c:
        a = await ask(
            c,
            "e_write",
            title="nightly backup",
            tags=["db", "ops"],
            text="postgres dumps to the vault at two",
        )
        b = await ask(
            c,
            "e_write",
            title="restore drill",
            tags=["db"],
            links=[a["sr_id"]],
            text="restoring postgres from the nightly dump",
        )
        r = await ask(c, "e_write", title="rota", text="who answers pages", tags=["ops"])
        a_id, b_id, r_id = a["sr_id"], b["sr_id"], r["sr_id"]
        await ask(c, "e_correct", sr_id=b_id, text="restoring postgres, monthly", reason="cadence")
        await ask(c, "e_adjust", sr_id=r_id, tags=["ops", "people"])

        listed = await ask(c, "e_timeline", action="list")
        assert ids(listed["results"]) == [r_id, b_id, a_id]  # newest entry first
        flags = {x["sr_id"]: (x["has_correction"], x["has_adjustment"]) for x in listed["results"]}
        assert flags == {a_id: (False, False), b_id: (True, False), r_id: (False, True)}
        assert all(x["lane"] == "default" and x["lane_uuid"] for x in listed["results"])

        found = await ask(c, "e_timeline", action="find", query="postgres")
        assert sorted(ids(found["results"])) == sorted([a_id, b_id])
        assert sorted(x["rank"] for x in found["results"]) == [1, 2]
        assert all(x["score"] > 0 for x in found["results"])
        stemmed = await ask(c, "e_timeline", action="find", query="dump")  # a holds "dumps"
        assert ids(stemmed["results"]) == [a_id]
        both = await ask(c, "e_timeline", action="intersect", match=["db", "ops"])
        assert ids(both["results"]) == [a_id]
        linked = await ask(c, "e_timeline", action="traverse", sr_id=a_id)
        assert ids(linked["results"]) == [b_id]

        first = await ask(c, "e_timeline", action="changes", since="2020-01-01", page_size=2)
        assert (len(first["changes"]), first["has_more"]) == (2, True)
        second = await ask(
            c,
            "e_timeline",
            action="changes",
            since="2020-01-01",
            page_size=2,
            page=2,
            as_of=first["as_of"],
        )
        assert (second["as_of"], len(second["changes"]), second["has_more"]) == (
            first["as_of"],
            1,
            False,
        )
        changes = first["changes"] + second["changes"]
        assert sorted(ids(changes)) == sorted([a_id, b_id, r_id])
        assert {x["change"] for x in changes} == {"new"}
        assert (
            await refused(
                c, "e_timeline", action="changes", since="2020-01-01", page_size=2, page=2
            )
            == PAGE_NEEDS_AS_OF
        )

        assert await ask(c, "e_delete", sr_id=r_id) == {
            "sr_id": r_id,
            "deleted": True,
            "changed": True,
        }
        assert (await ask(c, "e_delete", sr_id=r_id))["changed"] is False
        assert ids((await ask(c, "e_timeline", action="list"))["results"]) == [b_id, a_id]
        assert (await ask(c, "e_undelete", sr_id=r_id))["changed"] is True

        feed = await ask(c, "e_audit", action="list", since_seq=0, limit=4)
        rest = await ask(c, "e_audit", since_seq=feed["covered_seq"])
        events = feed["events"] + rest["events"]
        assert [e["event"] for e in events] == ["sr_written"] * 5 + ["sr_deleted", "sr_undeleted"]
        assert [e["subject"] for e in events] == [a_id, b_id, r_id, b_id, r_id, r_id, r_id]
        assert len({e["seq"] for e in events}) == 7
        assert rest["feed_id"] == feed["feed_id"]

        e1 = await ask(c, "work_record", summary="indexed the repo", tool="search", tags=["ops"])
        e2 = await ask(c, "work_record", summary="ran the backup", status="ok")
        e3 = await ask(c, "work_record", summary="checked the dump")
        assert (e1["prev_id"], e2["prev_id"], e3["prev_id"]) == (None, e1["id"], e2["id"])
        chain = await ask(c, "work_episode_chain", id=e3["id"])
        assert (ids(chain["chain"], "id"), chain["truncated"]) == (
            [e3["id"], e2["id"], e1["id"]],
            False,
        )
        short = await ask(c, "work_episode_chain", id=e3["id"], k=2)
        assert (ids(short["chain"], "id"), short["truncated"]) == ([e3["id"], e2["id"]], True)

        await ask(c, "work_result", id=e2["id"], status="done", task_result=0.9)
        listed = await ask(c, "work_episodes", response_format="concise")
        assert ids(listed["episodes"], "id") == [e3["id"], e2["id"], e1["id"]]
        assert (listed["episodes"][1]["status"], listed["episodes"][1]["task_result"]) == (
            "done",
            0.9,
        )
        assert "vault" not in listed["episodes"][0]  # concise

        assert await ask(c, "work_forget", id=e1["id"]) == {"id": e1["id"], "forgotten": True}
        chain = await ask(c, "work_episode_chain", id=e3["id"])
        assert ids(chain["chain"], "id") == [e3["id"], e2["id"]]
        assert chain["chain"][1]["prev_id"] is None

        renewed = await ask(c, "e_write", title="renewed", text="the TLS certificates of db-2")
        stemmed = await ask(c, "e_timeline", action="find", query="certificate")
        assert ids(stemmed["results"]) == [renewed["sr_id"]]


@pytest.mark.asyncio
async def test_refusals_arrive_with_their_exact_text(site):
    env = {"MEMLANE_TOKEN": site.tokens["alice"]}
    seed_000 = [  # every refusal e_timeline's specification lists, word for word
        (
            {"action": "list", "since": "2026-01-01"},
            "'since' and 'as_of' belong to the changes action",
        ),
        (
            {"action": "changes", "since": "2026-01-01", "query": "x"},
            "changes does not take query; it takes since, as_of, page and page_size",
        ),
        ({"action": "changes", "since": "2026-01-01", "page": 2}, PAGE_NEEDS_AS_OF),
        (
            {"action": "changes", "since": "2026-02-01", "as_of": "2026-01-01"},
            "'since' must be before 'as_of'",
        ),
        (
            {"action": "sideways"},
            "Invalid timeline spec: action must be one of list, find, "
            "intersect, traverse, changes, not 'sideways'",
        ),
        ({"action": "find"}, "Invalid timeline spec: find needs query"),
        ({"action": "changes"}, "'since' is required for changes action"),
    ]
    # Values the schemas' ranges and types exclude still reach the tool layer.
    k_text = "invalid k: must be an integer from 1 to 200"
    others = [
        ("work_episode_chain", {"id": "x", "k": 0}, k_text),
        ("work_episode_chain", {"id": "x", "k": 201}, k_text),
        ("work_episode_chain", {"id": "x", "k": "5"}, k_text),
        ("work_episode_chain", {"id": ""}, "invalid id: must be a string of 1 to 256 characters"),
        (
            "work_episode_chain",
            {"id": "x", "any_caller": True},
            "any_caller needs the admin:workspace scope on workspace team",
        ),
        (
            "work_episode_chain",
            {"id": "x", "response_format": "short"},
            "invalid response_format: must be one of concise, detailed",
        ),
        (
            "e_timeline",
            {"action": "list", "page_size": 0},
            "Invalid timeline spec: page_size must be an integer from 1 to 100",
        ),
        ("e_audit", {"limit": 0}, "invalid limit: must be an integer from 1 to 1000"),
        ("e_audit", {"since": 3}, "e_audit does not take since"),
        ("e_write", {}, "e_write needs a title or a text to create an SR"),
        (
            "e_write",
            {"title": "x", "visibility": "public"},
            "invalid visibility: must be one of workspace, private",
        ),
        ("e_delete", {"sr_id": "nope"}, "unknown sr_id: nope"),
        ("work_forget", {"id": "nope"}, "unknown episode id: nope"),
        ("e_gather", {}, "unknown tool: e_gather"),
    ]
    async with stdio(site, env=env) as c:
        for arguments, text in seed_000:
            assert refusal(await c.call_tool("e_timeline", arguments)) == text, arguments
        for tool, arguments, text in others:
            assert refusal(await c.call_tool(tool, arguments)) == text, (tool, arguments)
        # Nothing was stored by any of them.
        assert (await ask(c, "e_timeline", action="list"))["results"] == []
        assert (await ask(c, "e_audit"))["events"] == []
    async with stdio(site, "--token", site.tokens["bob"]) as c:  # read scope only
        assert await refused(c, "e_write", title="x") == (
            "this call needs the write:workspace scope on workspace team"
        )
        assert (await ask(c, "e_timeline", action="list"))["results"] == []


def with_defaults(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` plus every default the tool's schema declares, sent explicitly."""
    props = tool.input_schema["properties"]
    return {n: p["default"] for n, p in props.items() if "default" in p} | arguments


@pytest.mark.asyncio
async def test_a_client_sending_every_default_gets_the_same_answers(site):
    async with stdio(site, "--token", site.tokens["alice"]) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        a = await ask(c, "e_write", title="alpha backup", tags=["db"], text="postgres")
        await ask(c, "e_write", title="beta", tags=["db"], links=[a["sr_id"]])
        first = await ask(c, "work_record", **with_defaults(tools["work_record"], {}))
        second = await ask(c, "work_record", summary="second")
        as_of = (await ask(c, "e_timeline", action="changes", since="2020-01-01"))["as_of"]
        calls = [
            ("e_timeline", {"action": "list"}),
            ("e_timeline", {"action": "find", "query": "postgres backup"}),
            ("e_timeline", {"action": "intersect", "match": ["db"]}),
            ("e_timeline", {"action": "traverse", "sr_id": a["sr_id"]}),
            ("e_timeline", {"action": "changes", "since": "2020-01-01", "as_of": as_of}),
            ("e_audit", {}),
            ("work_episode_chain", {"id": second["id"]}),
            ("work_episodes", {}),
        ]
        for tool, arguments in calls:
            plain = await ask(c, tool, **arguments)
            full = with_defaults(tools[tool], arguments)
            assert full != arguments, tool  # the tool declares defaults: they are sent
            assert await ask(c, tool, **full) == plain, (tool, full)
        chain = await ask(c, "work_episode_chain", id=second["id"])
        recorded = chain["chain"][1]
        assert recorded["id"] == first["id"]
        assert (
            recorded["channel"],
            recorded["episode_type"],
            recorded["status"],
            recorded["eligibility"],
            recorded["tags"],
        ) == (
            "api",
            "task",
            "recorded",
            "eligible",
            [],
        )


@pytest.mark.asyncio
async def test_a_token_revoked_mid_session_stops_working_at_the_next_call(site):
    async with stdio(site, "--token", site.tokens["revoked"]) as c:
        assert (await ask(c, "e_timeline", action="list"))["results"] == []
        await asyncio.to_thread(site.revoke, "revoked")
        assert await refused(c, "e_timeline", action="list") == UNAUTHENTICATED
        assert await refused(c, "e_write", title="too late") == UNAUTHENTICATED
    async with stdio(site, "--token", site.tokens["alice"]) as c:
        assert (await ask(c, "e_timeline", action="list"))["results"] == []


def test_a_bad_token_at_start_up_exits_1(site, tmp_path):
    site.expire("expired")
    site.revoke("revoked")
    wrong = tmp_path / "wrong"
    wrong.write_text("mlt_not-a-token\n")
    env = {k: v for k, v in os.environ.items() if k != "MEMLANE_TOKEN"}
    cases = [
        [],  # none at all
        ["--token", "mlt_not-a-token"],
        ["--token-file", str(wrong)],
        ["--token", site.tokens["expired"]],
        ["--token", site.tokens["revoked"]],
    ]
    for args in cases:
        done = subprocess.run(
            [str(MEMLANE), "mcp", "--data", str(site.data), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=env,
            check=False,
        )
        assert done.returncode == 1, (args, done.stderr)
        assert done.stdout == ""
        given = f"{UNAUTHENTICATED} (pass --token, MEMLANE_TOKEN or --token-file)"
        none = "unauthenticated: no token given: pass --token TOKEN, set MEMLANE_TOKEN or pass "
        said = f"{given}\nhint: {TOKEN_HINT}" if args else none + "--token-file FILE"
        assert done.stderr == f"memlane mcp: {said}\n"


def test_sigterm_stops_serving_and_closes_the_store(site):
    proc = subprocess.Popen(
        [str(MEMLANE), "mcp", "--data", str(site.data), "--token", site.tokens["alice"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.flush()
        reply = json.loads(read_line(proc.stdout, TIMEOUT))
        assert reply["result"]["serverInfo"]["name"] == "memlane"
        assert (site.data / "memlane.db-wal").exists()  # the store is open
        proc.send_signal(signal.SIGTERM)  # with stdin still open
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert "Traceback" not in err
    assert not (site.data / "memlane.db-wal").exists()  # closed: the last connection removes it


def test_a_lone_surrogate_in_an_argument_is_answered_with_its_refusal(site):
    """JSON's escapes can spell a lone surrogate ("\\ud800"), which no UTF-8 can carry: the
    call is answered with the tool's refusal, as over HTTP (the SDK's stdio parser refused
    the line and answered nothing), and the server goes on serving."""
    calls = [
        {"name": "e_write", "arguments": {"title": "a\ud800b", "text": "t"}},
        {"name": "e_write", "arguments": {"title": "t", "tags": ["ok", "\udfff"]}},
        {"name": "e_timeline", "arguments": {"action": "find", "query": "\ud83d"}},
        {"name": "e_write", "arguments": {"title": "after them"}},
    ]
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call}
            for n, call in enumerate(calls, 1)
        ),
    ]
    sent = "not JSON\n" + "".join(json.dumps(line) + "\n" for line in lines)  # ASCII: escapes
    assert "\\ud800" in sent
    proc = subprocess.Popen(
        [str(MEMLANE), "mcp", "--data", str(site.data), "--token", site.tokens["alice"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(TIMEOUT, proc.kill)  # a missing answer fails, never hangs
    watchdog.start()
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(sent)
        proc.stdin.flush()
        replies = {
            r["id"]: r for r in (json.loads(proc.stdout.readline()) for _ in range(1 + len(calls)))
        }
        _, err = proc.communicate(timeout=TIMEOUT)  # stdin closed: it stops
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    refused = [replies[n]["result"] for n in (1, 2, 3)]
    assert all(r["isError"] for r in refused)
    assert [r["structuredContent"]["error"] for r in refused] == [
        "invalid title: must be Unicode text: it holds a lone surrogate (U+D800) at character 1",
        "invalid tags: must be Unicode text: it holds a lone surrogate (U+DFFF) at character 0",
        "invalid query: must be Unicode text: it holds a lone surrogate (U+D83D) at character 0",
    ]
    assert replies[4]["result"]["structuredContent"]["created"] is True


# -- in the same process -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_unexpected_failure_answers_internal_error_and_is_logged(tmp_path):
    site = make_site(tmp_path / "node")
    async with (
        Node.open(site.data) as node,
        Client(build_server(node, token=site.tokens["alice"])) as client,
    ):
        assert (await ask(client, "e_audit"))["events"] == []
        with closing(sqlite3.connect(site.data / "memlane.db")) as db, db:
            db.execute("DROP TABLE audit")  # the store breaks under the node
        with capture_logs() as logs:
            result = await client.call_tool("e_audit", {})
    assert refusal(result) == "internal error"
    assert "audit" not in result.content[0].text  # nothing of the failure reaches the client
    (logged,) = [e for e in logs if e["event"] == "tool call failed"]
    assert logged["tool"] == "e_audit"
    assert "no such table: audit" in logged["traceback"]
