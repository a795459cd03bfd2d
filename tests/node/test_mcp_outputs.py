"""Every tool's ``outputSchema`` (node/tools/outputs.py) against what the tools answer.

One plan of calls — an answer and a refusal of every tool, writes read back through every
action, episodes concise and detailed, a chain that is not available, a call refused before
dispatch with its ``call_window`` — is driven by real clients: the Python SDK's, in the same
process (it checks every answer against the schema), and the official TypeScript SDK's
(``tests/node/mcp_ts``, which checks every result, refusals included, with ajv) against
``memlane mcp`` over stdio and ``memlane serve`` over streamable HTTP.  Each structured content
is also held to a closed copy of its schema, so every property an answer carries is one the
schema names.

The TypeScript client is installed by the Makefile's set-up (``npm ci`` in tests/node/mcp_ts);
without it these tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator, ValidationError
from mcp import Client

from node.mcp.server import build_server
from node.node import Node, system_wall
from node.tools.catalog import CATALOG
from node.tools.outputs import REFUSAL
from protocol.timefmt import format_instant
from tests.node.clikit import MEMLANE
from tests.node.helpers import Wall
from tests.node.mcpkit import TIMEOUT, TOOLS, Site, make_site, serve, type_arrays

HOUR = 3_600_000
TS_CLIENT = Path(__file__).parent / "mcp_ts"
OUTPUTS = {spec.name: dict(spec.output_schema) for spec in CATALOG}


def closed(schema: Any) -> Any:
    """``schema`` with every object that names its properties closed to others."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def check(tool: str, content: Any) -> None:
    """``content`` holds to ``tool``'s schema as listed, and to its closed copy."""
    schema = OUTPUTS[tool]
    for validator in (Draft202012Validator, Draft7Validator):
        validator(copy.deepcopy(schema)).validate(content)
        validator(closed(schema)).validate(content)


# -- the plan -------------------------------------------------------------------------------------


def _turn(call_id: str, now: int, start: int, end: int) -> dict[str, Any]:
    window = {
        "source": "answered",
        "mention": 0,
        "zone": "UTC",
        "range": {"from": format_instant(start), "to": format_instant(end)},
    }
    return {
        "memlane/turn": {
            "turn": 1,
            "iteration": 0,
            "toolCallId": call_id,
            "now": format_instant(now),
            "zone": "UTC",
            "windows": [window],
        }
    }


def plan(now: int, since: int | None = None) -> list[dict[str, Any]]:
    """The calls, in order: ``tool``, ``arguments`` ("$N.field" is call N's answer's field),
    ``meta``, and whether the call is ``refused``.  ``changes`` reads from ``since`` (an
    hour before ``now`` unless given)."""
    since_text = format_instant(now - HOUR if since is None else since)
    calls: list[tuple[str, dict[str, Any], dict[str, Any] | None, bool]] = [
        (
            "e_write",
            {"title": "backup plan", "text": "nightly backup", "tags": ["ops"]},
            None,
            False,
        ),  # 0
        (
            "e_write",
            {"title": "rota", "text": "backup rota", "tags": ["ops"], "links": ["$0.sr_id"]},
            None,
            False,
        ),  # 1
        ("e_write", {"sr_id": "$0.sr_id", "text": "nightly backup at two"}, None, False),
        (
            "e_correct",
            {"sr_id": "$1.sr_id", "text": "backup rota, monthly", "reason": "cadence"},
            None,
            False,
        ),
        ("e_adjust", {"sr_id": "$1.sr_id", "tags": ["ops", "people"]}, None, False),
        ("e_write", {"title": "gone soon", "private_fields": {"k": "v"}}, None, False),  # 5
        ("e_timeline", {"action": "list"}, None, False),
        ("e_timeline", {"action": "find", "query": "backup rota"}, None, False),
        ("e_timeline", {"action": "intersect", "match": ["ops", "backup"]}, None, False),
        ("e_timeline", {"action": "traverse", "sr_id": "$0.sr_id"}, None, False),
        ("e_delete", {"sr_id": "$5.sr_id"}, None, False),  # 10
        ("e_delete", {"sr_id": "$5.sr_id"}, None, False),
        ("e_timeline", {"action": "changes", "since": since_text}, None, False),
        ("e_timeline", {"action": "changes", "since": since_text, "page_size": 1}, None, False),
        ("e_undelete", {"sr_id": "$5.sr_id"}, None, False),
        ("e_audit", {}, None, False),  # 15
        (
            "work_record",
            {
                "summary": "indexed the repo",
                "tool": "search",
                "tags": ["ops"],
                "duration_ms": 120,
                "session_id": "s1",
            },
            None,
            False,
        ),
        ("work_record", {"summary": "second"}, None, False),
        (
            "work_result",
            {
                "id": "$16.id",
                "status": "done",
                "task_result": 0.9,
                "trust": 0.5,
                "verdict_at": format_instant(now),
            },
            None,
            False,
        ),
        ("work_episode_chain", {"id": "$17.id"}, None, False),
        (
            "work_episode_chain",
            {"id": "$17.id", "response_format": "concise", "k": 1},
            None,
            False,
        ),  # 20
        ("work_episodes", {}, None, False),
        ("work_episodes", {"response_format": "concise"}, None, False),
        ("work_forget", {"id": "$16.id"}, None, False),
        ("work_episode_chain", {"id": "$16.id"}, None, False),
        (
            "e_timeline",
            {"action": "list"},
            _turn("past", now, now - 2 * HOUR, now - HOUR),
            False,
        ),  # 25
        ("e_timeline", {"action": "list"}, _turn("ahead", now, now + HOUR, now + 2 * HOUR), True),
        ("call_windows", {}, None, False),
        # One refusal of every tool.
        ("e_timeline", {"action": "list", "since": "2026-01-01"}, None, True),
        ("e_audit", {"action": "tail"}, None, True),
        ("work_episode_chain", {"id": "$17.id", "k": 0}, None, True),  # 30
        ("work_episodes", {"page": 0}, None, True),
        ("work_record", {"vault": "elsewhere"}, None, True),
        ("work_result", {"id": "$17.id"}, None, True),
        ("work_forget", {"id": "not-an-episode"}, None, True),
        ("e_write", {"tags": ["ops"]}, None, True),  # 35
        ("e_correct", {"sr_id": "not-an-sr", "reason": "r", "text": "t"}, None, True),
        ("e_adjust", {"sr_id": "$0.sr_id"}, None, True),
        ("e_delete", {"sr_id": "not-an-sr"}, None, True),
        ("e_undelete", {"sr_id": "not-an-sr"}, None, True),
        ("call_windows", {"latest": "yes"}, None, True),  # 40
        ("e_erase", {"sr_id": "$5.sr_id", "reason": "asked to be forgotten"}, None, False),
        ("e_erase", {"sr_id": "$5.sr_id"}, None, True),
    ]
    return [{"tool": t, "arguments": a, "meta": m, "refused": r} for t, a, m, r in calls]


def _resolve(value: Any, done: list[dict[str, Any]]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        n, _, name = value[1:].partition(".")
        return done[int(n)][name]
    if isinstance(value, list):
        return [_resolve(v, done) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, done) for k, v in value.items()}
    return value


def held(calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each result as the plan expects it (answered or refused), its text the JSON of its
    structured content, that content held to the tool's schema; the contents, in order."""
    assert len(results) == len(calls)
    contents = []
    for i, (call, result) in enumerate(zip(calls, results, strict=True)):
        assert "thrown" not in result, (i, call, result)
        content = result["structuredContent"]
        assert result["isError"] == call["refused"], (i, call, content)
        assert [json.loads(t) for t in result["text"]] == [content], i
        check(call["tool"], content)
        contents.append(content)
    return contents


def covered(calls: list[dict[str, Any]], contents: list[dict[str, Any]]) -> None:
    """The plan reached what the schemas describe: every tool answered and refused, and the
    answers' variants."""
    answered = {c["tool"] for c, a in zip(calls, contents, strict=True) if "error" not in a}
    refused = {c["tool"] for c, a in zip(calls, contents, strict=True) if "error" in a}
    assert answered == refused == set(TOOLS)
    assert contents[26]["error"] == "refused before dispatch: time-future"
    assert contents[26]["call_window"]["how"] == "refused"
    assert {r["rank"] for r in contents[7]["results"]} == {1, 2}
    assert contents[6]["results"][0]["caller"] == "alice"
    changes = {c["change"] for c in contents[12]["changes"]}
    assert "new" in changes
    assert contents[13]["has_more"] is True
    assert contents[11]["changed"] is False
    assert contents[19]["chain"][0]["vault"] == "team"  # detailed
    assert "vault" not in contents[20]["chain"][0]  # concise
    assert contents[24] == {
        "available": False,
        "chain": [],
        "truncated": False,
        "message": contents[24]["message"],
    }
    assert [r["how"] for r in contents[27]["rows"]] == ["filled", "refused"]


# -- the schemas themselves -----------------------------------------------------------------------


def test_every_tool_declares_an_object_schema_that_admits_its_refusal():
    row = {
        "kind": "call-window",
        "turn": 1,
        "iteration": 0,
        "toolCallId": "c",
        "toolName": "e_timeline",
        "how": "refused",
        "refused": "time-future",
        "asked": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"},
    }
    assert set(OUTPUTS) == set(TOOLS)
    for name, schema in OUTPUTS.items():
        assert schema["type"] == "object", name  # MCP: an object schema at the top
        assert dict(REFUSAL) in schema["anyOf"], name
        Draft202012Validator.check_schema(schema)
        Draft7Validator.check_schema(schema)  # ajv's default dialect
        assert type_arrays(schema) == [], name
        check(name, {"error": "a refusal"})
        check(name, {"error": "refused before dispatch: time-future", "call_window": row})


def test_a_closed_schema_names_every_property():
    """What ``check`` catches: a property the schema does not name, a missing one, a type."""
    written = {
        "sr_id": "s",
        "entry_id": "e",
        "ingest_time": "2026-01-01T00:00:00Z",
        "created": True,
    }
    check("e_write", written)
    Draft202012Validator(OUTPUTS["e_write"]).validate(written | {"later": 1})  # open as listed
    for bad in (
        written | {"later": 1},
        {k: v for k, v in written.items() if k != "created"},
        written | {"created": "yes"},
        {"error": 1},
        {"error": "x", "more": 1},
    ):
        with pytest.raises(ValidationError):
            check("e_write", bad)


# -- the Python SDK, in the same process ----------------------------------------------------------


@pytest.mark.asyncio
async def test_the_python_sdk_checks_every_answer(node: Node, wall: Wall):
    issued = await node.create_token("alice", "team", ("read:workspace", "write:workspace"))
    # A second a call: changes reads from between the first SR's creation and its update.
    calls = plan(wall.now, since=wall.now + 1_500)
    results: list[dict[str, Any]] = []
    contents: list[Any] = []
    async with Client(build_server(node, token=issued.token)) as client:
        listed = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        assert listed == OUTPUTS
        for call in calls:
            wall.now += 1_000
            arguments = _resolve(call["arguments"], contents)
            got = await client.call_tool(call["tool"], arguments, meta=call["meta"])  # type: ignore[arg-type]
            texts = [b.text for b in got.content if b.type == "text"]
            results.append(
                {
                    "isError": got.is_error,
                    "structuredContent": got.structured_content,
                    "text": texts,
                }
            )
            contents.append(got.structured_content)
    covered(calls, held(calls, results))
    updated = [c for c in contents[12]["changes"] if c["change"] == "updated"]
    assert [c["fields"] for c in updated] == [["text"]]


# -- the TypeScript SDK, over stdio and streamable HTTP -------------------------------------------


def _ts_client() -> list[str]:
    """The command that runs the TypeScript client, or a skip (a failure under CI)."""
    node_js = shutil.which("node")
    installed = (TS_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir()
    if node_js is None or not installed:
        why = "the TypeScript MCP client is not installed (make test installs it: npm ci)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return [node_js, str(TS_CLIENT / "client.mjs")]


def _ts_run(tmp_path: Path, transport: dict[str, Any], calls: list[dict[str, Any]]) -> Any:
    command = _ts_client()
    sent = [{k: c[k] for k in ("tool", "arguments", "meta") if c[k] is not None} for c in calls]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(transport | {"calls": sent}))
    done = subprocess.run(
        [*command, str(plan_file)], capture_output=True, text=True, timeout=4 * TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _ts_checked(answer: Any, calls: list[dict[str, Any]]) -> None:
    listed = {t["name"]: t.get("outputSchema") for t in answer["tools"]}
    assert listed == OUTPUTS
    assert answer["validators"] == {name: [True, False, False] for name in TOOLS}
    covered(calls, held(calls, answer["results"]))


def test_the_typescript_sdk_checks_every_result_over_stdio(tmp_path: Path):
    site: Site = make_site(tmp_path / "node")
    calls = plan(system_wall())
    args = ["mcp", "--data", str(site.data), "--token", site.tokens["alice"]]
    transport = {"transport": "stdio", "command": str(MEMLANE), "args": args}
    _ts_checked(_ts_run(tmp_path, transport, calls), calls)


def test_the_typescript_sdk_checks_every_result_over_streamable_http(tmp_path: Path):
    _ts_client()  # before a server is started for nothing
    site = make_site(tmp_path / "node")
    served = serve(site, "--mcp-http", "127.0.0.1:0")
    try:
        calls = plan(system_wall())
        transport = {"transport": "http", "url": served.url, "token": site.tokens["alice"]}
        _ts_checked(_ts_run(tmp_path, transport, calls), calls)
    finally:
        code, err = served.stop()
    assert code == 0, err
